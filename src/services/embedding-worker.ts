// The background embedding of a remote provider: drains the embedding queue, a batch at a time.
import type { EmbeddingQueueRepo } from '../db/embedding-queue-repo.js';
import type { IndexTransact, SearchIndexer } from './search-indexer.js';

interface WorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * Claims a batch (SKIP LOCKED, so several instances share the work), embeds the stored units,
 * writes the vectors, and logs the lag. `stop()` ends the loop and waits for the running round.
 */
export function createEmbeddingWorker(deps: {
  queue: EmbeddingQueueRepo;
  indexer: SearchIndexer;
  transact: IndexTransact;
  log: WorkerLog;
  batch?: number;
  idleMs?: number;
}) {
  const { queue, indexer, transact, log } = deps;
  const batch = deps.batch ?? 32;
  const idleMs = deps.idleMs ?? 1000;
  let timer: NodeJS.Timeout | undefined;
  let stopped = true;
  let running: Promise<number> | undefined;

  /** One round: returns how many vCons were embedded. */
  async function drainOnce(): Promise<number> {
    const claims = await queue.claim(batch);
    if (claims.length === 0) return 0;
    const stamps = new Map(claims.map((c) => [c.uuid, c.stamp]));
    let done: number;
    try {
      done = await transact(async (r) => {
        const items = await r.index.stored(claims.map((c) => c.uuid));
        // Only vCons not re-queued meanwhile get these vectors; the rest go round again.
        const current: typeof items = [];
        for (const it of items) if (await r.queue.complete(it.uuid, stamps.get(it.uuid)!)) current.push(it);
        return indexer.embedVcons(r, current, { force: true });
      });
    } catch (err) {
      for (const c of claims) await queue.fail(c.uuid, (err as Error).message).catch(() => undefined);
      throw err;
    }
    const stats = await queue.stats();
    log.info({ embedded: done, pending: stats.pending, lag_s: stats.oldest_s }, 'embedding queue drained a batch');
    return done;
  }

  const loop = async () => {
    if (stopped) return;
    let n = 0;
    try {
      running = drainOnce();
      n = await running;
    } catch (err) {
      // The pool closed under a worker nobody stopped: nothing more to drain in this process.
      if ((err as { code?: string }).code === 'CONNECTION_ENDED') stopped = true;
      else if (!stopped) log.warn({ err: (err as Error).message }, 'embedding worker round failed');
    } finally {
      running = undefined;
    }
    if (!stopped) {
      timer = setTimeout(loop, n > 0 ? 0 : idleMs);
      timer.unref();
    }
  };

  return {
    drainOnce,
    start() {
      if (!stopped) return;
      stopped = false;
      timer = setTimeout(loop, 0);
      timer.unref();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}

export type EmbeddingWorker = ReturnType<typeof createEmbeddingWorker>;
