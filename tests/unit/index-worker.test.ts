// The background indexer's scheduling, on a fake clock with a stand-in for the indexing round (a
// queue counter and a round that takes 5 ms): how writes become rounds, not what a round writes
// (that is tests/search/*, against PostgreSQL).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { COALESCE_MS, createIndexWorker, MAX_GATHER_MS } from '../../src/services/index-worker.js';
import type { SearchIndexer } from '../../src/services/search-indexer.js';

const ROUND_MS = 5;

/** The queue counter and its rounds; `afterRound` runs once as the next round ends (a write landing during it). */
function fakeIndexer() {
  const q = { queued: 0, rounds: [] as { at: number; n: number }[], afterRound: undefined as (() => void) | undefined };
  const indexer = {
    indexRound: async (batch: number) => {
      const n = Math.min(q.queued, batch);
      q.queued -= n;
      await new Promise((r) => setTimeout(r, ROUND_MS)); // the fake clock's: a round's length, not a wait
      if (n > 0) q.rounds.push({ at: Date.now(), n });
      const hook = q.afterRound;
      q.afterRound = undefined;
      hook?.();
      return n;
    },
  } as unknown as SearchIndexer;
  return { q, indexer };
}

function setup(coalesceMs?: number, backlogBatch?: number) {
  const { q, indexer } = fakeIndexer();
  const worker = createIndexWorker({ indexer, log: { warn() {} }, batch: 100, backlogBatch, idleMs: 250, coalesceMs });
  return {
    worker,
    rounds: q.rounds,
    queue: (n: number) => (q.queued += n),
    queued: () => q.queued,
  };
}

/** One write a millisecond for `ms`, each waking the worker as the write path does. */
async function stream(t: ReturnType<typeof setup>, ms: number) {
  for (let i = 0; i < ms; i++) {
    t.queue(1);
    t.worker.wake();
    await vi.advanceTimersByTimeAsync(1);
  }
}

describe('index worker scheduling', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('gathers a stream of single writes into few rounds, and indexes all of it within a round and the wait', async () => {
    const t = setup(20);
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300); // the first (empty) round, then the idle poll
    await stream(t, 200);
    const last = Date.now();
    await vi.advanceTimersByTimeAsync(20 + 2 * ROUND_MS);
    expect(t.queued()).toBe(0);
    expect(t.rounds.reduce((s, r) => s + r.n, 0)).toBe(200);
    // ~25 ms a round (20 gathering + 5 indexing): about 8, where a round per wake gave ~40.
    expect(t.rounds.length).toBeLessThanOrEqual(10);
    expect(t.rounds[t.rounds.length - 1].at - last).toBeLessThanOrEqual(20 + 2 * ROUND_MS);
    await t.worker.stop();
  });

  it('without the wait, the same stream runs a round per few writes (what the wait saves)', async () => {
    const t = setup(0);
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    await stream(t, 200);
    await vi.advanceTimersByTimeAsync(50);
    expect(t.queued()).toBe(0);
    expect(t.rounds.length).toBeGreaterThanOrEqual(30);
    await t.worker.stop();
  });

  it('indexes the first write after a quiet spell at once, not after the idle poll or the wait', async () => {
    const t = setup(20);
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    const at = Date.now();
    t.queue(1);
    t.worker.wake();
    await vi.advanceTimersByTimeAsync(ROUND_MS);
    expect(t.rounds).toEqual([{ at: at + ROUND_MS, n: 1 }]);
    await t.worker.stop();
  });

  it('runs a backlog in full rounds back to back', async () => {
    const t = setup(20);
    t.queue(250);
    t.worker.start();
    await vi.advanceTimersByTimeAsync(4 * ROUND_MS);
    expect(t.rounds.map((r) => r.n)).toEqual([100, 100, 50]);
    // Each round starts as the one before ends (a zero timeout is up to 1 ms), without the 20 ms wait.
    expect(t.rounds[0].at).toBeLessThanOrEqual(ROUND_MS + 1);
    for (let k = 1; k < 3; k++) expect(t.rounds[k].at - t.rounds[k - 1].at).toBeLessThanOrEqual(ROUND_MS + 1);
    await t.worker.stop();
  });

  it('behind a backlog, takes backlogBatch a round; back to batch once the queue is empty', async () => {
    const t = setup(20, 200);
    t.queue(650);
    t.worker.start();
    await vi.advanceTimersByTimeAsync(5 * ROUND_MS);
    // The first round can't know of a backlog; each full one after it takes 200.
    expect(t.rounds.map((r) => r.n)).toEqual([100, 200, 200, 150]);
    await vi.advanceTimersByTimeAsync(300);
    t.queue(250);
    t.worker.wake();
    await vi.advanceTimersByTimeAsync(4 * ROUND_MS);
    expect(t.rounds.slice(4).map((r) => r.n)).toEqual([100, 150]);
    await t.worker.stop();
  });
});

/**
 * The index thread's wakes: the request thread counts each written vCon in shared memory and sends
 * a message only while the worker listens (waits idle); a waiting search sets the hurry cell, as
 * src/search.ts does.
 */
function counted(coalesceMs = 20) {
  const { q, indexer } = fakeIndexer();
  let count = 0;
  let listening = false;
  let hurried = false;
  let messages = 0;
  // When each write was made, in queue order (the fake queue is FIFO).
  const writtenAt: number[] = [];
  const idle: number[] = [];
  // Runs once as the worker starts to listen (a write landing just before).
  let beforeListen: (() => void) | undefined;
  const worker = createIndexWorker({
    indexer,
    log: { warn() {} },
    batch: 100,
    idleMs: 250,
    coalesceMs,
    onIdle: (seen) => idle.push(seen),
    wakes: {
      count: () => count,
      listen: (on) => {
        const hook = on ? beforeListen : undefined;
        if (on) beforeListen = undefined;
        hook?.();
        listening = on;
      },
      hurried: () => {
        const was = hurried;
        hurried = false;
        return was;
      },
    },
  });
  const notify = () => {
    if (listening) {
      listening = false;
      messages++;
      worker.wake();
    }
  };
  const write = () => {
    q.queued++;
    count++;
    writtenAt.push(Date.now());
    notify();
  };
  /** The longest a write waited for its round to end. */
  const maxLag = () => {
    let first = 0;
    let most = 0;
    for (const r of q.rounds) {
      most = Math.max(most, r.at - writtenAt[first]);
      first += r.n;
    }
    return most;
  };
  return {
    worker,
    rounds: q.rounds,
    idle,
    write,
    queued: () => q.queued,
    messages: () => messages,
    maxLag,
    /** Rows queued that no write of this instance counted (a crash's, another instance's). */
    uncounted: (n: number) => (q.queued += n),
    hurry: () => {
      hurried = true;
      notify();
    },
    duringRound: (fn: () => void) => (q.afterRound = fn),
    beforeListen: (fn: () => void) => (beforeListen = fn),
  };
}

describe('index worker with counted wakes (the index thread)', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('gathers a stream of single writes into full rounds, with one message for the whole stream', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    for (let i = 0; i < 400; i++) {
      t.write();
      await vi.advanceTimersByTimeAsync(1);
    }
    await vi.advanceTimersByTimeAsync(MAX_GATHER_MS + 2 * ROUND_MS);
    expect(t.queued()).toBe(0);
    expect(t.rounds.reduce((s, r) => s + r.n, 0)).toBe(400);
    // The first write alone (after a quiet spell), then rounds of ~100 (a 20 ms wait gave ~16 of ~25).
    expect(t.rounds[0].n).toBe(1);
    expect(t.rounds.length).toBeLessThanOrEqual(6);
    expect(t.rounds.slice(1, -1).every((r) => r.n >= 95)).toBe(true);
    // Only the first write found the worker idle; the others were counted while it ran or gathered.
    expect(t.messages()).toBe(1);
    // No write waits longer than the gathering bound and a round (the stream's tail waits for it).
    expect(t.maxLag()).toBeLessThanOrEqual(MAX_GATHER_MS + COALESCE_MS + 2 * ROUND_MS);
    await t.worker.stop();
  });

  it('waits at most MAX_GATHER_MS for a slow stream, so that the lag stays bounded', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    for (let i = 0; i < 100; i++) {
      t.write();
      await vi.advanceTimersByTimeAsync(10);
    }
    await vi.advanceTimersByTimeAsync(MAX_GATHER_MS + 2 * ROUND_MS);
    expect(t.queued()).toBe(0);
    // ~20 writes a round, a round about every MAX_GATHER_MS.
    expect(t.rounds.length).toBeGreaterThanOrEqual(5);
    expect(t.rounds.length).toBeLessThanOrEqual(8);
    expect(t.maxLag()).toBeLessThanOrEqual(MAX_GATHER_MS + 2 * ROUND_MS);
    await t.worker.stop();
  });

  it('runs rows nobody counted (a crash, another instance) in full rounds back to back, a stream beside them too', async () => {
    const t = counted();
    t.uncounted(250);
    t.worker.start();
    t.write();
    await vi.advanceTimersByTimeAsync(3 * ROUND_MS + 3);
    expect(t.rounds.map((r) => r.n)).toEqual([100, 100, 51]);
    await t.worker.stop();
  });

  it('stops gathering when a search or wait_for=search waits', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    for (let i = 0; i < 30; i++) {
      t.write();
      await vi.advanceTimersByTimeAsync(1);
    }
    // The first write ran alone; the other 29 are being gathered for a fuller round.
    expect(t.rounds.map((r) => r.n)).toEqual([1]);
    const at = Date.now();
    t.hurry();
    await vi.advanceTimersByTimeAsync(COALESCE_MS + ROUND_MS);
    expect(t.queued()).toBe(0);
    expect(t.rounds.map((r) => r.n)).toEqual([1, 29]);
    expect(t.rounds[1].at - at).toBeLessThanOrEqual(COALESCE_MS + ROUND_MS);
    await t.worker.stop();
  });

  it('a hurry with nothing to index does not stay set to end a later gathering', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    // A search waited while the queue held nothing of this instance's (or it was already indexed).
    t.hurry();
    await vi.advanceTimersByTimeAsync(1_000);
    for (let i = 0; i < 30; i++) {
      t.write();
      await vi.advanceTimersByTimeAsync(1);
    }
    // As without the hurry: the first write ran alone, the other 29 are gathered.
    expect(t.rounds.map((r) => r.n)).toEqual([1]);
    await vi.advanceTimersByTimeAsync(MAX_GATHER_MS + ROUND_MS);
    expect(t.rounds.map((r) => r.n)).toEqual([1, 29]);
    await t.worker.stop();
  });

  it('indexes the first write after a quiet spell at once, and again after the next quiet spell', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(300);
    for (const at of [Date.now(), Date.now() + 1_000]) {
      await vi.advanceTimersByTimeAsync(at - Date.now());
      t.write();
      await vi.advanceTimersByTimeAsync(ROUND_MS);
      expect(t.rounds[t.rounds.length - 1]).toEqual({ at: at + ROUND_MS, n: 1 });
    }
    expect(t.messages()).toBe(2);
    await t.worker.stop();
  });

  it('does not lose a write counted as an empty round ends, before the worker listens', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(ROUND_MS + 1); // the first (empty) round: the worker now waits idle
    // The next empty round (the idle poll) ends, and a write is counted just before the worker says
    // it listens: no message is sent for it, and it is still indexed at once (not at the next poll).
    t.beforeListen(() => t.write());
    await vi.advanceTimersByTimeAsync(250 + ROUND_MS);
    const at = Date.now();
    await vi.advanceTimersByTimeAsync(ROUND_MS + 1);
    expect(t.messages()).toBe(0);
    expect(t.queued()).toBe(0);
    expect(t.rounds).toHaveLength(1);
    expect(t.rounds[0].at - at).toBeLessThanOrEqual(ROUND_MS + 1);
    await t.worker.stop();
  });

  it('reports idle with the wake count it saw, and not after a round during which a write came', async () => {
    const t = counted();
    t.worker.start();
    await vi.advanceTimersByTimeAsync(ROUND_MS + 1);
    expect(t.idle).toEqual([0]);
    t.duringRound(() => t.write());
    await vi.advanceTimersByTimeAsync(250 + ROUND_MS); // the poll's round: empty, but a write came during it
    expect(t.idle).toEqual([0]);
    await vi.advanceTimersByTimeAsync(2 * (MAX_GATHER_MS + ROUND_MS) + 2); // the gathered round, then one that finds nothing
    expect(t.rounds.map((r) => r.n)).toEqual([1]);
    expect(t.idle).toEqual([0, 1]);
    await t.worker.stop();
  });
});
