// Composition of search for one instance (ARCHITECTURE.md "Search"): the indexer with its
// transaction, the DerivedWriter that indexes inside every write transaction, the search
// service, and the embedding worker of a remote provider.
import type { Db, Sql } from './db/client.js';
import type { DerivedWriter } from './db/vcon-repo.js';
import { createSearchRepo } from './db/search-repo.js';
import { createSearchIndexRepo } from './db/search-index-repo.js';
import { createEmbeddingQueueRepo } from './db/embedding-queue-repo.js';
import type { EmbeddingProvider } from './embeddings/types.js';
import type { Plugin } from './plugins/hooks.js';
import { createSearchIndexer, type IndexRepos, type IndexTransact } from './services/search-indexer.js';
import { createSearchService } from './services/search-service.js';
import { createEmbeddingWorker } from './services/embedding-worker.js';

const indexRepos = (db: Db): IndexRepos => ({ index: createSearchIndexRepo(db), queue: createEmbeddingQueueRepo(db) });

const indexTransactor =
  (sql: Sql): IndexTransact =>
  (fn) =>
    sql.begin((tx) => fn(indexRepos(tx))) as never;

interface SearchLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export function createSearch(deps: { sql: Sql; provider: EmbeddingProvider; plugins: readonly Plugin[]; log: SearchLog }) {
  const { sql, provider, plugins, log } = deps;
  const transact = indexTransactor(sql);
  const indexer = createSearchIndexer({ provider, transact });
  /** Indexes every written vCon inside its write transaction, after its search units. */
  const writer: DerivedWriter = (db, items) =>
    indexer.indexStored(
      indexRepos(db),
      items.map((i) => ({ uuid: i.uuid, created_at: i.derived.created_at, units: i.derived.units })),
    );
  const service = createSearchService({ repo: createSearchRepo(sql), queue: createEmbeddingQueueRepo(sql), provider, plugins });
  // An inline provider embeds in the write transaction; a remote one drains its queue in the background.
  const worker = provider.inline ? undefined : createEmbeddingWorker({ queue: createEmbeddingQueueRepo(sql), indexer, transact, log });
  return {
    indexer,
    writer,
    service,
    start() {
      worker?.start();
    },
    /** Stops the background work and waits for a running round (before the pool closes). */
    async stop() {
      await worker?.stop();
    },
  };
}

export interface ReembedReport {
  provider: string;
  model: string;
  embedded: number;
  ms: number;
  spaces: { provider: string; model: string; vcons: number }[];
}

/**
 * Re-embeds a group after a provider change (and back-fills vCons without vectors): every vCon
 * whose vectors are missing from the provider's space. Used by scripts/embeddings/reembed.ts.
 */
export async function reembedGroup(
  sql: Sql,
  provider: EmbeddingProvider,
  opts: { batch?: number; onProgress?: (done: number) => void } = {},
): Promise<ReembedReport> {
  const t0 = Date.now();
  const embedded = await createSearchIndexer({ provider, transact: indexTransactor(sql) }).reembedMissing(opts);
  return { provider: provider.id, model: provider.model, embedded, ms: Date.now() - t0, spaces: await createSearchRepo(sql).spaces() };
}
