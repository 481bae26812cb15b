import { CursorExpiredError, type ChangeEntry, type ChangeKind } from '../domain/changes.js';
import { ChangesQuery, ChangesStreamQuery, LastEventId, parseParams } from '../domain/params.js';
import type { ChangeRepo } from '../db/change-repo.js';

export interface ChangeServiceDeps {
  repo: ChangeRepo;
  /** CHANGES_RETENTION_HOURS: entries older than this are pruned in the background. */
  retentionHours: number;
  log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /** How often the horizon is read while a stream follows the log. */
  pollMs?: number;
  /** How often pruning runs. */
  pruneEveryMs?: number;
}

/** A page of the log: entries after the cursor asked for, and the cursor to ask with next. */
export interface ChangePage {
  data: ChangeEntry[];
  next_cursor: string;
  has_more: boolean;
}

/** Where a stream starts and what it shows. */
export interface StreamStart {
  after: bigint;
  kinds: ChangeKind[] | undefined;
}

/** Entries read per query while a stream catches up. */
const STREAM_CHUNK = 500;
/** Entries deleted per pruning statement. */
const PRUNE_CHUNK = 10_000;

/**
 * The change log's reader (docs/architecture.md "Change feed"). Cursors come from a sequence, taken
 * inside the writing statement, so a cursor is visible only once its transaction commits and a
 * later cursor can commit first. The horizon is the highest cursor below which nothing can still
 * appear: a reader is shown entries up to it only, in cursor order, and so never passes an entry
 * that commits late.
 *
 * How the horizon moves: a sample reads the sequence's last value L (live) and, in the next sample,
 * a transaction id X assigned to that sample's statement. Every cursor up to L was taken
 * by a transaction whose id was assigned before (the log row is inserted from the rows the write's
 * own statement wrote, so the transaction has its id by then), hence below X. Once the oldest
 * running transaction id (a snapshot's xmin, at X's statement or later) reaches X, all of them have ended: each entry up
 * to L is committed (and visible) or rolled back (never to appear), and the horizon moves to L.
 */
export function createChangeService(deps: ChangeServiceDeps) {
  const { repo } = deps;
  const pollMs = deps.pollMs ?? 50;
  let horizon = 0n;
  /** (cursor, xmax) pairs waiting for xmin to reach xmax, oldest first. */
  const pending: { cursor: bigint; xmax: bigint }[] = [];
  let lastSeen: bigint | undefined;
  let chain: Promise<void> = Promise.resolve();
  let queued: Promise<void> | undefined;
  let stopped = false;
  const followers = new Set<() => void>();
  let poller: NodeJS.Timeout | undefined;
  let pruner: NodeJS.Timeout | undefined;
  let firstPrune: NodeJS.Timeout | undefined;
  /** Streams following the log now, and entries they were sent since start (GET /metrics). */
  let streams = 0;
  let eventsSent = 0;

  async function step(): Promise<void> {
    const s = await repo.sample();
    const caughtUp = lastSeen === undefined || lastSeen <= horizon;
    const newest = pending.at(-1);
    if (lastSeen !== undefined && lastSeen > horizon && (!newest || newest.cursor < lastSeen)) pending.push({ cursor: lastSeen, xmax: s.xmax });
    lastSeen = s.lastCursor;
    // A long transaction holds every pair back: keep the oldest and the newest, drop between (the horizon then moves in larger steps).
    if (pending.length > 1000) pending.splice(pending.length - 2, 1);
    const before = horizon;
    while (pending.length > 0 && pending[0].xmax <= s.xmin) horizon = pending.shift()!.cursor;
    if (horizon > before) for (const wake of followers) wake();
    // The log moved after a quiet spell: the sample that pairs the new cursors with a transaction id
    // is taken at once, not a poll later (a write at idle reached its streams one poll sooner). At
    // most one more sample per quiet spell; under a steady stream of writes nothing changes.
    if (caughtUp && lastSeen > horizon && followers.size > 0 && !stopped) tick().catch(() => undefined);
  }

  /** One sample, after any in flight; callers arriving before it starts share it. */
  function tick(): Promise<void> {
    if (queued) return queued;
    const p: Promise<void> = chain.then(() => {
      queued = undefined;
      return step();
    });
    queued = p;
    chain = p.catch(() => undefined);
    return p;
  }

  /** The horizon as of now: two samples, so a write acknowledged before this call is below it when nothing older is running. */
  async function currentHorizon(): Promise<bigint> {
    await tick();
    await tick();
    return horizon;
  }

  /**
   * The horizon once it covers every cursor taken before the call: waits (sampling every pollMs)
   * for the transactions that took them to end. currentHorizon may answer below that while any
   * transaction runs, and a fresh service's horizon starts at 0: a new webhook endpoint registered
   * there was sent the log's retained history instead of starting at its end.
   */
  async function settledHorizon(): Promise<bigint> {
    await tick();
    const target = lastSeen ?? 0n;
    while (horizon < target && !stopped) {
      await new Promise((resolve) => setTimeout(resolve, pollMs));
      await tick();
    }
    return horizon;
  }

  /** Refuses a cursor older than the log keeps. */
  async function checkAfter(after: bigint | undefined): Promise<bigint> {
    const b = await repo.bounds();
    if (after === undefined) return b.prunedThrough;
    if (after < b.prunedThrough) throw new CursorExpiredError(after, b.oldest, b.prunedThrough);
    return after;
  }

  function startPolling(): void {
    if (poller || stopped) return;
    poller = setInterval(() => {
      if (followers.size === 0) {
        clearInterval(poller);
        poller = undefined;
        return;
      }
      tick().catch((err: Error) => deps.log?.warn({ err: err.message }, 'change log horizon not read'));
    }, pollMs);
    poller.unref();
  }

  async function prune(before = new Date(Date.now() - deps.retentionHours * 3_600_000)): Promise<number> {
    let total = 0;
    for (let n = PRUNE_CHUNK; n === PRUNE_CHUNK && !stopped; total += n) n = await repo.prune(before, PRUNE_CHUNK);
    if (total > 0) deps.log?.info({ pruned: total }, 'change log pruned');
    return total;
  }

  return {
    /** A page of entries after `after` (from the oldest held when absent), oldest first: GET /changes. */
    async page(raw: unknown): Promise<ChangePage> {
      const q = parseParams(ChangesQuery, raw);
      const after = await checkAfter(q.after === undefined ? undefined : BigInt(q.after));
      const through = await currentHorizon();
      const rows = await repo.page(after, through, q.limit + 1, q.kinds);
      const has_more = rows.length > q.limit;
      const data = rows.slice(0, q.limit);
      // Without more, everything up to the horizon was read (filtered kinds included): resume there.
      const next = has_more ? data[data.length - 1].cursor : (through > after ? through : after).toString();
      return { data, next_cursor: next, has_more };
    },

    /**
     * Where a stream starts: `Last-Event-ID` (a reconnecting EventSource) wins over `after`;
     * `after=now` starts at the end of the log, once every cursor taken before the call is
     * committed or rolled back (the settled horizon, where a new webhook endpoint starts too);
     * neither starts at the oldest entry held. The horizon as of now could lie anywhere below the
     * end while an older transaction runs, 0 on a process that had not read the log yet: the
     * stream then sent a client that asked for new changes the whole retained log.
     */
    async openStream(raw: unknown, lastEventId: string | undefined): Promise<StreamStart> {
      const q = parseParams(ChangesStreamQuery, raw);
      const resumed = lastEventId === undefined ? undefined : parseParams(LastEventId, { 'Last-Event-ID': lastEventId })['Last-Event-ID'];
      if (resumed === undefined && q.after === 'now') return { after: await settledHorizon(), kinds: q.kinds };
      const after = resumed ?? q.after;
      return { after: await checkAfter(after === undefined ? undefined : BigInt(after)), kinds: q.kinds };
    },

    /**
     * Follows the log from `start`: hands each run of new entries to `deliver` (awaited: a slow
     * consumer slows only its own stream) until `signal` aborts or the service stops.
     */
    async follow(start: StreamStart, deliver: (entries: ChangeEntry[], cursor: bigint) => Promise<void>, signal: AbortSignal): Promise<void> {
      let cursor = start.after;
      let wake: () => void = () => undefined;
      const woken = () => wake();
      followers.add(woken);
      streams++;
      startPolling();
      const onAbort = () => wake();
      signal.addEventListener('abort', onAbort);
      try {
        while (!signal.aborted && !stopped) {
          const arrived = new Promise<void>((resolve) => (wake = resolve));
          const through = horizon;
          while (cursor < through && !signal.aborted && !stopped) {
            const rows = await repo.page(cursor, through, STREAM_CHUNK, start.kinds);
            // A filtered run may hold none of the kinds asked for: the cursor still moves to what was read.
            const end = rows.length < STREAM_CHUNK ? through : BigInt(rows[rows.length - 1].cursor);
            if (rows.length > 0) {
              await deliver(rows, end);
              eventsSent += rows.length;
            }
            cursor = end;
          }
          if (horizon <= cursor) await arrived;
        }
      } finally {
        streams--;
        followers.delete(woken);
        signal.removeEventListener('abort', onAbort);
      }
    },

    /** The horizon as of now (a write acknowledged before the call is below it when nothing older runs). */
    horizonNow: currentHorizon,

    /** The horizon once every cursor taken before the call is committed or rolled back: where a new webhook endpoint starts. */
    settledHorizon,

    /** The horizon as last read (0 until the first reads). */
    get horizon() {
      return horizon;
    },

    /**
     * Calls `wake` whenever the horizon moves, until `signal` aborts: the log is polled while anyone
     * watches (the webhook dispatcher turns new entries into deliveries this way).
     */
    watch(wake: () => void, signal: AbortSignal): void {
      if (signal.aborted) return;
      followers.add(wake);
      startPolling();
      signal.addEventListener('abort', () => followers.delete(wake), { once: true });
    },

    /** Starts background pruning (every pruneEveryMs, first soon after start). */
    start(): void {
      const every = deps.pruneEveryMs ?? 600_000;
      const run = () => void prune().catch((err: Error) => deps.log?.warn({ err: err.message }, 'change log not pruned'));
      pruner = setInterval(run, every);
      pruner.unref();
      firstPrune = setTimeout(run, Math.min(every, 5_000));
      firstPrune.unref();
    },

    /** Prunes entries older than `before` (the retention by default); returns how many went. */
    prune,

    /** Streams open now and entries sent to streams since start. */
    stats: () => ({ streams, events_sent: eventsSent }),

    /** Ends every stream (each sends its end event) and the background work. */
    stop(): void {
      stopped = true;
      clearInterval(poller);
      clearInterval(pruner);
      clearTimeout(firstPrune);
      for (const wake of followers) wake();
    },

    /** Whether stop was called (a stream then ends at once). */
    get stopped() {
      return stopped;
    },
  };
}

export type ChangeService = ReturnType<typeof createChangeService>;
