import { describe, expect, it } from 'vitest';
import { defaultReserve, othersOf, planServer, type BudgetRequest } from '../../cli/budget.js';

const limits = { maxConnections: 100, superuserReserved: 3, reservedConnections: 0 };
const req = (group: string, extra: Partial<BudgetRequest> = {}): BudgetRequest => ({
  group,
  serverKey: 'h:5432',
  databaseLabel: 'u@h:5432/db',
  owns: [],
  explicitPool: undefined,
  replicas: 1,
  pooled: false,
  ...extra,
});

describe('connection budget', () => {
  it('keeps a tenth of max_connections for operators, 3 to 10', () => {
    expect([20, 100, 400].map(defaultReserve)).toEqual([3, 10, 10]);
  });

  it('shares what is left evenly, at most 10 each, and 50 groups fit on max_connections 100', () => {
    expect(planServer([req('a'), req('b')], limits, { reserve: undefined, held: [] }).allocations.map((a) => a.pool)).toEqual([10, 10]);
    const fifty = planServer(
      Array.from({ length: 50 }, (_, i) => req(`g${i}`)),
      limits,
      { reserve: undefined, held: [] },
    );
    expect(fifty.refusal).toBeUndefined();
    expect(fifty.available).toBe(87);
    expect(fifty.allocations.every((a) => a.pool === 1)).toBe(true);
  });

  it('counts every replica and what running groups hold', () => {
    const b = planServer([req('a', { replicas: 3 }), req('b', { explicitPool: 5, replicas: 2 })], limits, {
      reserve: 7,
      held: [{ group: 'r', serverKey: 'h:5432', connections: 30, owns: [] }],
    });
    // 100 − 3 − 7 − 30 = 60; b takes 10; a's 3 processes share 50 → 10 each (the cap).
    expect(b.available).toBe(60);
    expect(b.allocations).toMatchObject([
      { group: 'a', pool: 10, replicas: 3 },
      { group: 'b', pool: 5, replicas: 2, explicit: true },
    ]);
    const tight = planServer([req('a', { replicas: 3 }), req('b', { explicitPool: 5, replicas: 2 })], limits, {
      reserve: 7,
      held: [{ group: 'r', serverKey: 'h:5432', connections: 80, owns: [] }],
    });
    // 10 left: b needs 10, a's three processes at least 1 each.
    expect(tight.refusal).toContain('2 groups need at least 13 connections but only 10 are available');
    expect(tight.refusal).toContain('− 80 held by running groups (r 80)');
    expect(tight.refusal).toContain('b 5 × 2 replicas (DB_POOL_MAX), a 1 × 3 replicas');
  });

  it('leaves groups behind PgBouncer out of the server budget', () => {
    const b = planServer(
      [req('p', { pooled: true })],
      { maxConnections: 0, superuserReserved: 0, reservedConnections: 0 },
      { reserve: undefined, held: [] },
    );
    expect(b.refusal).toBeUndefined();
    expect(b.allocations[0]).toMatchObject({ pool: 20, pooled: true });
  });

  it("counts other clients' connections on every database of the server, not a group's own", () => {
    const snapshot = {
      ...limits,
      connections: [
        { database: 'a', application: 'vcon-alpha', n: 3 },
        { database: 'a', application: 'vcon-alpha-analyze', n: 1 },
        // Same application name on another database: another launcher's group, not ours.
        { database: 'b', application: 'vcon-alpha', n: 2 },
        { database: 'b', application: 'psql', n: 5 },
      ],
    };
    const alpha = {
      owns: [
        { database: 'a', application: 'vcon-alpha' },
        { database: 'a', application: 'vcon-alpha-analyze' },
      ],
    };
    expect(othersOf(snapshot, [alpha])).toBe(7);
    const b = planServer([req('x'), req('y')], limits, { reserve: 10, held: [], others: 80 });
    // 100 − 3 − 10 − 80 = 7: one analyze connection each, pools of 2.
    expect(b).toMatchObject({ others: 80, available: 7 });
    expect(b.allocations.map((a) => [a.pool, a.analyze])).toEqual([
      [2, 1],
      [2, 1],
    ]);
    const full = planServer([req('x'), req('y')], limits, { reserve: 10, held: [], others: 86 });
    expect(full.refusal).toContain(
      'only 1 are available (max_connections 100 − superuser_reserved_connections 3 − reserve 10 (DB_RESERVED_CONNECTIONS) − 86 held by other clients)',
    );
  });
});
