// The background indexer of a server process, on a thread of its own (issue 17): indexing embeds
// every unit of every written vCon, which on the request thread would take the CPU the writes
// and reads need. The thread has its own pool (one connection, given back when idle) and its own
// provider; the request thread wakes it after each acknowledged write and asks it to stop.
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

const data = workerData as IndexThreadData;
const log = createLogger(data.config).child({ component: 'indexer' });
const sql = createSql(data.sql);
const { worker } = createIndexing({ sql, provider: createEmbeddingProvider(data.config, log), log });
worker.start();
parentPort!.on('message', (m: IndexThreadMessage) => {
  if (m === 'wake') worker.wake();
  else if (m === 'stop')
    void (async () => {
      await worker.stop();
      await sql.end({ timeout: 5 }).catch(() => undefined);
      parentPort!.postMessage('stopped');
      parentPort!.close();
    })();
});
