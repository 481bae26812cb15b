import { describe, expect, it } from 'vitest';
import { createAdmission } from '../../src/services/admission.js';
import { DatabaseBusyError } from '../../src/domain/errors.js';

describe('admission to the database pool', () => {
  it('admits up to the limit, then queues in arrival order', async () => {
    const a = createAdmission({ limit: 2, maxWaitMs: 60_000 });
    const r1 = await a.acquire();
    const r2 = await a.acquire();
    expect(a.stats()).toMatchObject({ size: 2, in_use: 2, waiting: 0 });
    const order: number[] = [];
    const w3 = a.acquire().then((r) => (order.push(3), r));
    const w4 = a.acquire().then((r) => (order.push(4), r));
    expect(a.stats().waiting).toBe(2);
    r1();
    r1(); // a second release of the same turn changes nothing
    const r3 = await w3;
    expect(a.stats()).toMatchObject({ in_use: 2, waiting: 1 });
    r2();
    const r4 = await w4;
    expect(order).toEqual([3, 4]);
    r3();
    r4();
    expect(a.stats()).toMatchObject({ in_use: 0, waiting: 0 });
  });

  it('refuses a waiter with database_busy once the bound passes, and forgets it', async () => {
    const a = createAdmission({ limit: 1, maxWaitMs: 20 });
    const held = await a.acquire();
    const err = await a.acquire().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DatabaseBusyError);
    expect(err).toMatchObject({ status: 503, code: 'database_busy', retryAfterS: 1 });
    expect((err as Error).message).toMatch(/all 1 connection\(s\) of this group stayed in use for 20 ms/);
    expect(a.stats()).toMatchObject({ in_use: 1, waiting: 0, refused: 1 });
    held();
    // The timed-out waiter is not handed the turn: the next caller gets it at once.
    const next = await a.acquire();
    expect(a.stats().in_use).toBe(1);
    next();
  });

  it('refuses at once when the queue is full or no wait is allowed', async () => {
    const full = createAdmission({ limit: 1, maxWaitMs: 60_000, maxQueue: 1 });
    const held = await full.acquire();
    const waiting = full.acquire();
    // Refused without waiting: the message says so, not that it waited the 60 s bound.
    await expect(full.acquire()).rejects.toMatchObject({
      code: 'database_busy',
      message: expect.stringMatching(/all 1 connection\(s\) of this group are in use and 1 request\(s\) already wait for one/),
    });
    held();
    (await waiting)();
    const none = createAdmission({ limit: 1, maxWaitMs: 0 });
    const h = await none.acquire();
    await expect(none.acquire()).rejects.toMatchObject({ code: 'database_busy' });
    h();
  });

  it('run() releases the turn when the work throws', async () => {
    const a = createAdmission({ limit: 1, maxWaitMs: 1_000 });
    await expect(a.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(a.stats().in_use).toBe(0);
    expect(await a.run(async () => 42)).toBe(42);
  });
});
