// The background indexer of one instance: drains the index queue a batch at a time, woken by this
// instance's writes and polling for the others' (several instances share the queue: SKIP LOCKED).
import type { SearchIndexer } from './search-indexer.js';
import { untracked } from '../stages.js';

interface WorkerLog {
  warn(obj: object, msg: string): void;
}

/**
 * Writes counted by another thread (the index thread's request thread) instead of sent one by one:
 * the worker reads the count of written vCons when a round ends (writes during the round mean more
 * to gather) and while it gathers, and says when it waits idle (`listen(true)`): only then does a
 * write need a message. `hurried()` says (once) that a search or a wait_for=search waits.
 */
export interface WakeCounter {
  count(): number;
  listen(on: boolean): void;
  hurried(): boolean;
}

/** How long a round waits for more writes after one that emptied the queue (ms). */
export const COALESCE_MS = 20;

/**
 * With counted writes, the wait goes on in COALESCE_MS steps until a full round's worth was
 * written, at most this long (ms): a round of 100 vCons costs ~30% less CPU per vCon than rounds
 * of 10-25, and the wait stays well inside the 1 s lag bound.
 */
export const MAX_GATHER_MS = 200;

/** `stop()` ends the loop and waits for the running round. */
export function createIndexWorker(deps: {
  indexer: SearchIndexer;
  log: WorkerLog;
  batch: number;
  /**
   * The round after a full one that left a backlog takes this many (default `batch`): a round of
   * 200 bench vCons costs ~5 % less CPU and ~12 % less time per vCon than two of 100 (fewer
   * statements and round trips), so a backlog drains sooner.
   */
  backlogBatch?: number;
  idleMs?: number;
  /**
   * After a round that left the queue empty, the next one waits this long for more writes (ms): a
   * stream of single creates otherwise runs a round of a few vCons per write, each paying the
   * round's fixed statements. A backlog (a full round) runs on at once; the first write after a
   * quiet spell is indexed at once.
   */
  coalesceMs?: number;
  /** The longest gathering wait with counted writes (MAX_GATHER_MS). */
  maxGatherMs?: number;
  /**
   * Called after a round that found nothing to index and saw no wake (the index thread reports it,
   * to be retired when idle), with the wake count the round saw.
   */
  onIdle?: (wakes: number) => void;
  wakes?: WakeCounter;
  /**
   * Called when a round has not settled after `stuckMs`: a query on a connection that died under it
   * (seen across PostgreSQL restarts) can stay pending for good. The index thread then ends itself
   * and is replaced with a fresh pool.
   */
  onStuck?: () => void;
  stuckMs?: number;
}) {
  const { indexer, log, batch } = deps;
  const backlogBatch = Math.max(batch, deps.backlogBatch ?? batch);
  // The size of the next round: `batch`, or backlogBatch behind a backlog.
  let size = batch;
  // Writes of other instances (and rows left by a crash) are found within this interval.
  const idleMs = deps.idleMs ?? 250;
  const coalesceMs = deps.coalesceMs ?? COALESCE_MS;
  const maxGatherMs = deps.maxGatherMs ?? MAX_GATHER_MS;
  let timer: NodeJS.Timeout | undefined;
  // The pending timer gathers writes after a round (a wake leaves it be), else it is an idle poll.
  let gathering = false;
  let stopped = true;
  let running: Promise<number> | undefined;
  let woken = false;
  // A search or wait_for=search waits: the next round runs without gathering.
  let hurry = false;
  // With counted writes: how many of them are queued (an estimate: a round that left the queue
  // empty resets it), the count it was last brought up to, and the end of the gathering wait.
  let queued = 0;
  let counted = 0;
  let gatherUntil = 0;
  const absorb = () => {
    const c = deps.wakes?.count() ?? 0;
    queued += c - counted;
    counted = c;
  };

  const schedule = (ms: number, gather = false) => {
    if (timer) clearTimeout(timer);
    gathering = gather;
    timer = untracked(() => setTimeout(loop, ms));
    timer.unref();
  };

  const loop = async () => {
    timer = undefined;
    if (stopped || running) return;
    absorb();
    // Read (and clear) the cell at every start: left set by a search while the worker was idle, it
    // would end the gathering of a later stream.
    if (deps.wakes?.hurried()) hurry = true;
    if (gathering && deps.wakes && !hurry && queued < batch && Date.now() + coalesceMs <= gatherUntil) {
      schedule(coalesceMs, true);
      return;
    }
    deps.wakes?.listen(false);
    woken = false;
    hurry = false;
    const seen = counted;
    const before = queued;
    let n = 0;
    try {
      running = indexer.indexRound(size);
      const watchdog = deps.onStuck ? untracked(() => setTimeout(deps.onStuck!, deps.stuckMs ?? 20_000)) : undefined;
      watchdog?.unref();
      try {
        n = await running;
      } finally {
        if (watchdog) clearTimeout(watchdog);
      }
    } catch (err) {
      // The pool closed under a worker nobody stopped: nothing more to index in this process.
      if ((err as { code?: string }).code === 'CONNECTION_ENDED') stopped = true;
      else if (!stopped) log.warn({ err: (err as Error).message }, 'indexing round failed');
    } finally {
      running = undefined;
    }
    const full = n >= size;
    queued = full ? Math.max(0, before - n) : 0;
    absorb();
    if (counted !== seen) woken = true;
    if (n === 0 && !woken) deps.onIdle?.(seen);
    if (stopped) return;
    // A full round is a backlog unless counted writes alone filled it and fewer than a round's
    // worth remain (a stream gathered to a full round): rows nobody counted (a crash's, another
    // instance's) run back to back.
    const backlog = full && (!deps.wakes || before < n || queued >= batch);
    size = backlog ? backlogBatch : batch;
    if (backlog || ((n > 0 || woken) && (hurry || deps.wakes?.hurried()))) schedule(0);
    else if (n > 0 || woken) {
      gatherUntil = Date.now() + maxGatherMs;
      schedule(coalesceMs, true);
    } else {
      schedule(idleMs);
      // From here on a wake comes as a message; one counted before that is the first after a quiet spell.
      deps.wakes?.listen(true);
      if (deps.wakes && deps.wakes.count() !== counted) {
        deps.wakes.listen(false);
        schedule(0);
      }
    }
  };

  return {
    /** Whether the loop runs (started, not stopped). */
    active: () => !stopped,
    start() {
      if (!stopped) return;
      stopped = false;
      schedule(0);
    },
    /** A write of this instance was acknowledged: index it now rather than at the next poll. */
    wake(_vcons = 1) {
      if (stopped) return;
      if (running) woken = true;
      else if (timer && !gathering) schedule(0);
    },
    /** A search or wait_for=search waits for queued vCons: index them without gathering more. */
    hurry() {
      if (stopped) return;
      if (running) woken = hurry = true;
      else if (timer) schedule(0);
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}

export type IndexWorker = ReturnType<typeof createIndexWorker>;
