// Composition of search for one instance (docs/architecture.md "Search"): the indexer with its
// transaction, the background index worker, and the search service made consistent with every
// write acknowledged before a search (it first indexes what is still queued, bounded).
import type { Db, Sql } from './db/client.js';
import { createSearchRepo } from './db/search-repo.js';
import { createSearchIndexRepo } from './db/search-index-repo.js';
import { createIndexQueueRepo } from './db/index-queue-repo.js';
import type { EmbeddingProvider } from './embeddings/types.js';
import type { Plugin } from './plugins/hooks.js';
import { INDEX_BATCH, createSearchIndexer, type IndexRepos, type IndexState, type IndexTransact } from './services/search-indexer.js';
import { createSearchService, type SearchService } from './services/search-service.js';
import { createIndexWorker, type WakeCounter } from './services/index-worker.js';
import type { IndexThreadData, IndexThreadMessage, IndexThreadReport } from './index-thread.js';
import { Worker } from 'node:worker_threads';
import { heapLimitsMiB } from './config.js';

const indexRepos = (db: Db): IndexRepos => ({ index: createSearchIndexRepo(db), queue: createIndexQueueRepo(db) });

/**
 * A lossy indexing transaction (an indexing round) commits without waiting for its WAL flush: a
 * crash can lose at most the last rounds, each whole (index rows and the removal of their queue
 * rows together), so their vCons are still queued and are indexed again. Re-embedding pages, which
 * nothing re-queues, and writes of vCons stay synchronous.
 */
const indexTransactor =
  (sql: Sql): IndexTransact =>
  (fn, opts) =>
    sql.begin(async (tx) => {
      if (opts?.lossy) await tx`set local synchronous_commit = off`;
      return fn(indexRepos(tx));
    }) as never;

interface SearchLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * How long a search waits for writes acknowledged before it to be indexed. Past it the search
 * answers from the index as it is (the lag shows in /health): a backlog (a bulk import) must not
 * turn every search into a wait.
 */
export const SEARCH_CATCH_UP_MS = 2000;
/** How long a write with wait_for=search waits for its own indexing. */
export const WAIT_FOR_SEARCH_MS = 30_000;

/** What the write path needs from search: a wake-up for the worker and the wait of wait_for=search. */
export interface IndexNotifier {
  written(uuids: string[]): void;
  /** Resolves when the vCons are indexed (true) or after WAIT_FOR_SEARCH_MS (false). */
  awaitIndexed(uuids: string[]): Promise<boolean>;
}

/** The indexer and its background worker over one pool (the request thread's, or the index thread's own). */
export function createIndexing(deps: {
  sql: Sql;
  provider: EmbeddingProvider;
  log: SearchLog;
  onIdle?: (wakes: number) => void;
  onStuck?: () => void;
  wakes?: WakeCounter;
  /** vCons a round (default: the provider's batch). */
  batch?: number;
}) {
  const { sql, provider, log } = deps;
  const queue = createIndexQueueRepo(sql);
  const indexer = createSearchIndexer({ provider, transact: indexTransactor(sql), queue, log });
  // A remote provider's batch may take a while; a local one embeds a batch in well under a second.
  const worker = createIndexWorker({
    indexer,
    log,
    batch: deps.batch ?? (provider.inline ? INDEX_BATCH : 32),
    backlogBatch: deps.batch ?? (provider.inline ? 2 * INDEX_BATCH : 32),
    onIdle: deps.onIdle,
    onStuck: deps.onStuck,
    wakes: deps.wakes,
    stuckMs: provider.inline ? 20_000 : 120_000,
  });
  return { queue, indexer, worker };
}

/** The index thread's settings: what it is given, but for what threadWorker adds. */
export type IndexThreadSettings = Omit<IndexThreadData, 'wakes' | 'batch'>;

/** Threads that ran out of heap in a row, without a round finding the queue empty between, before indexing leaves the thread. */
const OUT_OF_HEAP_TRIES = 3;

/**
 * The background worker on a thread of its own: same interface as the in-process one. The thread
 * exists only while there is work (a thread costs ~16 MB of RSS and a connection): started at
 * start() when the queue holds rows (a crash's leftovers), by a write's or a search's wake, or by
 * kick() when /health saw queued rows; retired after INDEX_THREAD_IDLE_S without work.
 *
 * Its heap is bounded (resourceLimits, its share of VCON_MEMORY_LIMIT). A thread that runs out of
 * it is ended by V8; a new one takes over the queue one vCon a round (the batch that did not fit
 * is retried in pieces), until a round finds the queue empty. After OUT_OF_HEAP_TRIES such ends
 * in a row, searches and waits index what they need themselves, as after any other failure.
 */
function threadWorker(settings: IndexThreadSettings, log: SearchLog, hasPending: () => Promise<boolean>) {
  const limits = heapLimitsMiB(settings.config.limits.memory);
  const heap = { old: settings.config.db.indexThreadHeapMb || limits.indexOld, young: limits.indexYoung };
  const resourceLimits = { maxOldGenerationSizeMb: heap.old, maxYoungGenerationSizeMb: heap.young };
  let outOfHeap = 0;
  let outOfHeapInARow = 0;
  // From the build: the compiled entry; from the sources (tests, tsx): the .ts one through tsx.
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./index-thread.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  let thread: Worker | undefined;
  // The thread that has loaded and indexes (a new one takes a moment to load its modules).
  let ready: Worker | undefined;
  const retiring = new Set<Worker>();
  let started = false;
  let stopped = false;
  let failed = false;
  // Wakes counted for the current thread (IndexThreadData.wakes): an idle report counts only if it
  // saw them all (a report crossing a wake on its way must not retire a thread that has work).
  let wakes = new Int32Array(new SharedArrayBuffer(12));
  let idleSince: number | undefined;
  let reaper: NodeJS.Timeout | undefined;
  const idleMs = settings.config.db.indexThreadIdleS * 1000;

  const spawn = () => {
    wakes = new Int32Array(new SharedArrayBuffer(12));
    const data: IndexThreadData = { ...settings, wakes: wakes.buffer as SharedArrayBuffer, batch: outOfHeapInARow > 0 ? 1 : undefined };
    const t = fromSource
      ? // Node 20 does not apply --import loaders to a worker's entry: register tsx, then load it.
        new Worker(`import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`, {
          eval: true,
          workerData: data,
          resourceLimits,
        })
      : new Worker(entry, { workerData: data, resourceLimits });
    t.unref();
    idleSince = undefined;
    const counted = wakes;
    t.on('message', (m: IndexThreadReport) => {
      if (m.type === 'ready') ready = t;
      if (m.type === 'idle') outOfHeapInARow = 0;
      if (m.type === 'idle' && t === thread && m.wakes === Atomics.load(counted, 0)) idleSince ??= Date.now();
    });
    t.on('error', (err) => {
      if ((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY' && ++outOfHeapInARow < OUT_OF_HEAP_TRIES) {
        // Ended by V8 at its heap limit: the exit below starts a new thread, one vCon a round.
        outOfHeap++;
        log.warn(
          { heap_mb: heap.old + heap.young, restarts: outOfHeap },
          'the index thread ran out of its heap (its share of VCON_MEMORY_LIMIT); a new one indexes one vCon a round',
        );
        return;
      }
      if ((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY') outOfHeap++;
      // Searches and wait_for then index what they need themselves (active() is false).
      failed = true;
      log.warn({ err: err.message }, 'the index thread failed; searches index what they need themselves');
    });
    t.on('exit', () => {
      retiring.delete(t);
      if (thread !== t) return;
      // It ended on its own (a stuck round): a fresh thread takes over what is still queued.
      thread = undefined;
      if (!stopped && !failed)
        void hasPending().then(
          (yes) => yes && !thread && !stopped && spawn(),
          () => undefined,
        );
    });
    thread = t;
  };

  /** Asks a thread to stop after its running round (at most one batch), then ends it either way. */
  const end = async (t: Worker) => {
    const done = new Promise<void>((resolve) => {
      t.on('message', (m: IndexThreadReport) => m.type === 'stopped' && resolve());
      t.once('exit', () => resolve());
    });
    t.postMessage('stop' satisfies IndexThreadMessage);
    await Promise.race([done, new Promise((r) => setTimeout(r, 10_000).unref())]);
    await t.terminate();
  };

  let checking = false;
  const retireIfIdle = () => {
    const t = thread;
    // Idle means: a round found nothing after every wake sent, and no wake came since.
    if (!t || checking || idleSince === undefined || Date.now() - idleSince < idleMs) return;
    // Rows still queued (embeddings failing, retried with back-off) keep it: retired, it would
    // leave them until the next write. One look at the queue, only when it would retire.
    checking = true;
    hasPending().then(
      (yes) => {
        checking = false;
        if (t !== thread || idleSince === undefined) return; // replaced, or woken meanwhile
        if (yes) idleSince = Date.now();
        else {
          thread = undefined;
          retiring.add(t);
          void end(t);
        }
      },
      () => (checking = false),
    );
  };

  return {
    /**
     * Whether a thread indexes now; else searches and waits index themselves (no thread while
     * idle, or the first write's thread still loading: the write's wait_for or a search must not
     * wait for its start).
     */
    active: () => started && !stopped && !failed && thread !== undefined && ready === thread,
    start() {
      if (started) return;
      started = true;
      reaper = setInterval(retireIfIdle, Math.min(5_000, idleMs)).unref();
      // Rows left by a crash are indexed without waiting for a request; an idle group starts none.
      // (The driver's type-fetch rejection this once exposed is patched: patches/README.md.)
      // If the queue cannot be read, a thread looks for itself and is retired if there is nothing.
      hasPending().then(
        (yes) => yes && !thread && !stopped && !failed && spawn(),
        (err: Error) => {
          log.warn({ err: err.message }, 'could not read the index queue at start; the index thread looks itself');
          if (!thread && !stopped && !failed) spawn();
        },
      );
    },
    /** Whether a thread runs now (/health shows it). */
    running: () => Boolean(thread),
    /** Threads ended by their heap limit since start, and whether indexing left the thread (/health shows both). */
    outOfHeap: () => outOfHeap,
    failed: () => failed,
    /** Rows are queued that no wake announced (another process wrote them): start a thread for them. */
    kick() {
      if (started && !stopped && !failed && !thread) spawn();
    },
    /** `vcons` were written (counted: a thread gathering a stream of writes runs once it has a round's worth). */
    wake(vcons = 1) {
      if (!started || stopped || failed) return;
      if (!thread) return spawn();
      idleSince = undefined;
      Atomics.add(wakes, 0, vcons);
      // A busy thread looks at the queue again anyway: only an idle one needs telling.
      if (Atomics.exchange(wakes, 1, 0) === 1) thread.postMessage('wake' satisfies IndexThreadMessage);
    },
    /** A search or wait_for waits: a gathering thread runs its round at its next look (≤ COALESCE_MS). */
    hurry() {
      if (thread) Atomics.store(wakes, 2, 1);
      this.wake(0);
    },
    async stop() {
      stopped = true;
      if (reaper) clearInterval(reaper);
      const all = [...(thread ? [thread] : []), ...retiring];
      thread = undefined;
      await Promise.all(all.map(end));
    },
  };
}

export function createSearch(deps: {
  sql: Sql;
  provider: EmbeddingProvider;
  plugins: readonly Plugin[];
  log: SearchLog;
  /** Index on a thread of its own with these settings (a server process); else on this thread. */
  thread?: IndexThreadSettings;
}) {
  const { sql, provider, plugins, log } = deps;
  const { queue, indexer, worker: local } = createIndexing({ sql, provider, log });
  const threaded = deps.thread ? threadWorker(deps.thread, log, () => queue.hasRows()) : undefined;
  const worker = threaded ?? local;
  const raw = createSearchService({ repo: createSearchRepo(sql), queue, provider, plugins });
  // With a background indexer running, a search or wait_for only waits for it (and wakes it):
  // requests don't open indexing transactions of their own. Without one (stopped, tools), they index.
  const help = () => !worker.active();
  // A search answers with what it could not see: past its wait, vCons acknowledged before it may
  // still be queued (a bulk import's backlog), and the answer says how many instead of looking whole.
  const consistent =
    <A extends unknown[], R extends object>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R & { index: IndexState }> => {
      const index = await indexer.catchUpState(SEARCH_CATCH_UP_MS, help(), () => worker.hurry());
      return { ...(await fn(...args)), index };
    };
  const service: SearchService = { ...raw, content: consistent(raw.content), semantic: consistent(raw.semantic), hybrid: consistent(raw.hybrid) };
  const writes: IndexNotifier = {
    written: (uuids) => worker.wake(uuids.length),
    awaitIndexed: (uuids) => {
      worker.hurry();
      return indexer.awaitIndexed(uuids, WAIT_FOR_SEARCH_MS, help());
    },
  };
  return {
    indexer,
    writes,
    service,
    queue,
    /** Whether an index thread runs now (false when indexing is on this thread). */
    threadRunning: () => threaded?.running() ?? false,
    /** Index threads ended by their heap limit since start. */
    threadOutOfHeap: () => threaded?.outOfHeap() ?? 0,
    /** Whether indexing left the thread after it failed (searches and waits index themselves). */
    threadFailed: () => threaded?.failed() ?? false,
    /** Queued rows seen by someone else (the /health ping): make sure a thread indexes them. */
    pendingSeen: () => threaded?.kick(),
    start() {
      worker.start();
      warnOtherSpaces(sql, provider, log).catch(() => undefined);
    },
    /** Stops the background work and waits for a running round (before the pool closes). */
    async stop() {
      await worker.stop();
    },
  };
}

/**
 * Vectors of another model (a provider change, or a MODEL_VERSION bump after an upgrade) are never
 * compared with this provider's queries: semantic search misses those vCons until the group is
 * re-embedded. Said once at start, with the command, instead of leaving it to be noticed.
 */
export async function warnOtherSpaces(sql: Sql, provider: EmbeddingProvider, log: SearchLog): Promise<boolean> {
  const repo = createSearchRepo(sql);
  const space = { id: provider.id, model: provider.model };
  // Usually there is no other space: one scan of the small codes table, nothing more.
  if (!(await repo.otherSpaces(space))) return false;
  if ((await createSearchIndexRepo(sql).missingVectors(space, 1, null)).length === 0) return false;
  const other = (await repo.spaces()).filter((s) => s.provider !== provider.id || s.model !== provider.model);
  log.warn(
    { space: { provider: provider.id, model: provider.model }, other_spaces: other },
    'vCons embedded under another model are not found by semantic search until the group is re-embedded: ENV_FILE=env/<group>.env npm run reembed',
  );
  return true;
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
  const embedded = await createSearchIndexer({ provider, transact: indexTransactor(sql), queue: createIndexQueueRepo(sql) }).reembedMissing(opts);
  return { provider: provider.id, model: provider.model, embedded, ms: Date.now() - t0, spaces: await createSearchRepo(sql).spaces() };
}
