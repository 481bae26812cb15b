// The candidate stage of semantic search: the sign codes of one vector space, held in memory
// (src/embeddings/code-index.ts) and kept in step with PostgreSQL, the source of truth.
import type { SearchRepo, VectorSpace } from '../db/search-repo.js';
import { codeWords, createCodeIndex, type CodeFilter } from '../embeddings/code-index.js';
import { signCodeBytes } from '../embeddings/code.js';

/** The in-memory code index is rebuilt from PostgreSQL this often (drops stale entries). */
export const CODE_RELOAD_MS = 10 * 60_000;
/**
 * Catching up re-reads codes written this long before the previous sync began, so a write whose
 * transaction committed just after that sync read the table is still picked up.
 */
export const CODE_OVERLAP_MS = 2_000;

export function createCodeCache(repo: Pick<SearchRepo, 'codes'>, space: VectorSpace) {
  let index = createCodeIndex();
  let loadedAt = 0;
  /** Database clock at the start of the last sync. */
  let syncedAt = 0;
  let fullLoad: Promise<void> | null = null;

  /** Reloads when due, then catches up with every code written since the last sync. */
  async function sync(): Promise<void> {
    if (Date.now() - loadedAt > CODE_RELOAD_MS) {
      fullLoad ??= (async () => {
        const { now, rows } = await repo.codes(space, null);
        const fresh = createCodeIndex();
        for (const r of rows) fresh.upsert(r.uuid, r.created_at.getTime(), codeWords(r.code.subarray(4)));
        index = fresh;
        syncedAt = Math.max(syncedAt, now.getTime());
        loadedAt = Date.now();
      })().finally(() => {
        fullLoad = null;
      });
      await fullLoad;
    }
    // Always catch up, also after a shared full load that began before this request's own writes.
    const { now, rows } = await repo.codes(space, new Date(syncedAt - CODE_OVERLAP_MS));
    for (const r of rows) index.upsert(r.uuid, r.created_at.getTime(), codeWords(r.code.subarray(4)));
    syncedAt = Math.max(syncedAt, now.getTime());
  }

  return {
    sync,
    /** How many vCons the index holds. */
    get size() {
      return index.size;
    },
    /** The `n` vCons whose codes are nearest the vector's code (call sync() first). */
    nearest(vec: Float32Array, n: number, window: CodeFilter): string[] {
      return index.nearest(codeWords(signCodeBytes(vec)), n, window);
    },
    /** Forgets vCons found deleted or re-embedded. */
    remove(uuids: string[]): void {
      for (const u of uuids) index.remove(u);
    },
  };
}
