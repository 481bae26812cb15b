// Re-embedding a group after a provider change (and back-filling vCons without vectors): every
// vCon whose vectors are missing from the configured space is embedded again, a page at a time,
// each page in its own transaction. Used by scripts/embeddings/reembed.ts; the launcher may call
// it directly.
import type { Sql } from './client.js';
import { createSearchRepo, type VectorEmbedder } from './search-repo.js';

export interface ReembedReport {
  provider: string;
  model: string;
  embedded: number;
  ms: number;
  spaces: { provider: string; model: string; vcons: number }[];
}

export async function reembedGroup(
  sql: Sql,
  embedder: VectorEmbedder,
  opts: { batch?: number; onProgress?: (done: number) => void } = {},
): Promise<ReembedReport> {
  const t0 = Date.now();
  const batch = opts.batch ?? 200;
  const repo = createSearchRepo(sql);
  let embedded = 0;
  let after: string | null = null;
  for (;;) {
    const page = await repo.missingVectors(embedder, batch, after);
    if (page.length === 0) break;
    after = page[page.length - 1].uuid;
    const units = await repo.units(page.map((p) => p.uuid));
    await sql.begin(async (tx) => {
      const r = createSearchRepo(tx);
      embedded += await r.writeVectors(embedder, page.map((p) => ({ uuid: p.uuid, created_at: p.created_at, units: units.get(p.uuid) ?? [] })), { force: true });
      // Queued background work for these vCons is done now.
      await tx`delete from embedding_queue where vcon_uuid = any(${page.map((p) => p.uuid)}::uuid[])`;
    });
    opts.onProgress?.(embedded);
  }
  return { provider: embedder.id, model: embedder.model, embedded, ms: Date.now() - t0, spaces: await repo.spaces() };
}
