// The background indexer of a server process, on a thread of its own (issue 17): indexing embeds
// every unit of every written vCon, which on the request thread would take the CPU the writes
// and reads need. The thread has its own pool (one connection, out of the group's DB_POOL_MAX) and
// its own provider; the request thread starts it when there is work, wakes it after each
// acknowledged write, and retires it once it has been idle a while (issue 15: an idle group keeps
// neither the thread's memory nor its connection).
import { parentPort, workerData } from 'node:worker_threads';
import { createSql, type SqlOptions } from './db/client.js';
import { createEmbeddingProvider } from './embeddings/index.js';
import { createLogger } from './logger.js';
import type { Config } from './config.js';
import { createIndexing } from './search.js';

export interface IndexThreadData {
  sql: SqlOptions;
  config: Config;
}

/** Messages from the request thread. */
export type IndexThreadMessage = 'wake' | 'stop';
/**
 * Messages to the request thread: the thread indexes now; a round found nothing to do after
 * `wakes` wakes (the request thread retires it only if it sent no wake since); it has stopped.
 */
export type IndexThreadReport = { type: 'ready' } | { type: 'idle'; wakes: number } | { type: 'stopped' };

const data = workerData as IndexThreadData;
const log = createLogger(data.config).child({ component: 'indexer' });
const sql = createSql(data.sql);
let wakes = 0;
const { worker } = createIndexing({
  sql,
  provider: createEmbeddingProvider(data.config, log),
  log,
  onIdle: () => parentPort!.postMessage({ type: 'idle', wakes } satisfies IndexThreadReport),
  onStuck: () => {
    log.warn({}, 'an indexing round is stuck (a dead connection?): the index thread restarts with a fresh pool');
    process.exit(1);
  },
});
worker.start();
parentPort!.postMessage({ type: 'ready' } satisfies IndexThreadReport);
parentPort!.on('message', (m: IndexThreadMessage) => {
  if (m === 'wake') {
    wakes++;
    worker.wake();
  } else if (m === 'stop')
    void (async () => {
      await worker.stop();
      await sql.end({ timeout: 5 }).catch(() => undefined);
      parentPort!.postMessage({ type: 'stopped' } satisfies IndexThreadReport);
      parentPort!.close();
    })();
});
