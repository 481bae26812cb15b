// The background indexer of a server process, on a thread of its own: indexing embeds
// every unit of every written vCon, which on the request thread would take the CPU the writes
// and reads need. The thread has its own pool (one connection, out of the group's DB_POOL_MAX) and
// its own provider; the request thread starts it when there is work, wakes it after each
// acknowledged write, and retires it once it has been idle a while (so an idle group keeps neither
// the thread's memory nor its connection).
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { createSql, type SqlOptions } from './db/client.js';
import { createEmbeddingProvider } from './embeddings/index.js';
import { createLogger } from './logger.js';
import type { Config } from './config.js';
import { createIndexing } from './search.js';

export interface IndexThreadData {
  sql: SqlOptions;
  config: Config;
  /**
   * Three Int32 cells shared with the request thread: [0] counts the vCons of its acknowledged
   * writes, [1] is 1 while this thread waits idle, the only time a write is also sent as a message
   * (a stream of writes costs no message per write on either thread), [2] is 1 when a search or a
   * wait_for=search waits (the thread stops gathering).
   */
  wakes: SharedArrayBuffer;
  /** Index this many vCons a round instead of the provider's batch (1 after the thread ran out of heap). */
  batch?: number;
}

/** Messages from the request thread. */
export type IndexThreadMessage = 'wake' | 'stop';
/**
 * Messages to the request thread: the thread indexes now; a round found nothing to do and had
 * seen `wakes` wakes (the request thread retires it only if it counted no wake since); it has stopped.
 */
export type IndexThreadReport = { type: 'ready' } | { type: 'idle'; wakes: number } | { type: 'stopped' };

const data = workerData as IndexThreadData;
const log = createLogger(data.config).child({ component: 'indexer' });
// Linux: setpriority of "this process" (0) sets the calling thread's nice only. Elsewhere it would
// renice the whole process, so the thread keeps the process's priority there.
if (process.platform === 'linux' && data.config.db.indexThreadNice > 0) {
  try {
    setPriority(0, data.config.db.indexThreadNice);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'could not lower the index thread priority');
  }
}
const sql = createSql(data.sql);
const wakes = new Int32Array(data.wakes);
const { worker } = createIndexing({
  sql,
  batch: data.batch,
  provider: createEmbeddingProvider(data.config, log),
  log,
  wakes: {
    count: () => Atomics.load(wakes, 0),
    listen: (on) => void Atomics.store(wakes, 1, on ? 1 : 0),
    hurried: () => Atomics.exchange(wakes, 2, 0) === 1,
  },
  onIdle: (seen) => parentPort!.postMessage({ type: 'idle', wakes: seen } satisfies IndexThreadReport),
  onStuck: () => {
    log.warn({}, 'an indexing round is stuck (a dead connection?): the index thread restarts with a fresh pool');
    process.exit(1);
  },
});
worker.start();
parentPort!.postMessage({ type: 'ready' } satisfies IndexThreadReport);
parentPort!.on('message', (m: IndexThreadMessage) => {
  if (m === 'wake') worker.wake();
  else if (m === 'stop')
    void (async () => {
      await worker.stop();
      await sql.end({ timeout: 5 }).catch(() => undefined);
      parentPort!.postMessage({ type: 'stopped' } satisfies IndexThreadReport);
      parentPort!.close();
    })();
});
