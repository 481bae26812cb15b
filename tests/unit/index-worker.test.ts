// The background indexer's scheduling, on a fake clock with a stand-in for the indexing round (a
// queue counter and a round that takes 5 ms): how writes become rounds, not what a round writes
// (that is tests/search/*, against PostgreSQL).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createIndexWorker } from '../../src/services/index-worker.js';
import type { SearchIndexer } from '../../src/services/search-indexer.js';

const ROUND_MS = 5;

function setup(coalesceMs?: number) {
  let queued = 0;
  const rounds: { at: number; n: number }[] = [];
  const indexer = {
    indexRound: async (batch: number) => {
      const n = Math.min(queued, batch);
      queued -= n;
      await new Promise((r) => setTimeout(r, ROUND_MS));
      if (n > 0) rounds.push({ at: Date.now(), n });
      return n;
    },
  } as unknown as SearchIndexer;
  const worker = createIndexWorker({ indexer, log: { warn() {} }, batch: 100, idleMs: 250, coalesceMs });
  return {
    worker,
    rounds,
    queue: (n: number) => (queued += n),
    queued: () => queued,
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
});
