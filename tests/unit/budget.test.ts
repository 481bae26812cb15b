import { describe, expect, it } from 'vitest';
import { defaultReserve, planDatabase, type BudgetRequest } from '../../cli/budget.js';

const limits = { maxConnections: 100, superuserReserved: 3, reservedConnections: 0 };
const req = (group: string, extra: Partial<BudgetRequest> = {}): BudgetRequest => ({
  group,
  databaseKey: 'h:5432/db',
  databaseLabel: 'u@h:5432/db',
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
    expect(planDatabase([req('a'), req('b')], limits, { reserve: undefined, held: [] }).allocations.map((a) => a.pool)).toEqual([10, 10]);
    const fifty = planDatabase(
      Array.from({ length: 50 }, (_, i) => req(`g${i}`)),
      limits,
      { reserve: undefined, held: [] },
    );
    expect(fifty.refusal).toBeUndefined();
    expect(fifty.available).toBe(87);
    expect(fifty.allocations.every((a) => a.pool === 1)).toBe(true);
  });

  it('counts every replica and what running groups hold', () => {
    const b = planDatabase([req('a', { replicas: 3 }), req('b', { explicitPool: 5, replicas: 2 })], limits, {
      reserve: 7,
      held: [{ group: 'r', databaseKey: 'h:5432/db', connections: 30 }],
    });
    // 100 − 3 − 7 − 30 = 60; b takes 10; a's 3 processes share 50 → 10 each (the cap).
    expect(b.available).toBe(60);
    expect(b.allocations).toMatchObject([
      { group: 'a', pool: 10, replicas: 3 },
      { group: 'b', pool: 5, replicas: 2, explicit: true },
    ]);
    const tight = planDatabase([req('a', { replicas: 3 }), req('b', { explicitPool: 5, replicas: 2 })], limits, {
      reserve: 7,
      held: [{ group: 'r', databaseKey: 'h:5432/db', connections: 80 }],
    });
    // 10 left: b needs 10, a's three processes at least 1 each.
    expect(tight.refusal).toContain('2 groups need at least 13 connections but only 10 are available');
    expect(tight.refusal).toContain('− 80 held by running groups (r 80)');
    expect(tight.refusal).toContain('b 5 × 2 replicas (DB_POOL_MAX), a 1 × 3 replicas');
  });

  it('leaves groups behind PgBouncer out of the server budget', () => {
    const b = planDatabase(
      [req('p', { pooled: true })],
      { maxConnections: 0, superuserReserved: 0, reservedConnections: 0 },
      { reserve: undefined, held: [] },
    );
    expect(b.refusal).toBeUndefined();
    expect(b.allocations[0]).toMatchObject({ pool: 20, pooled: true });
  });
});
