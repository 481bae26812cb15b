// Density, small (the full figures come from `npm run bench`): 8 groups on a PostgreSQL
// of our own with max_connections = 30, started with `vcon-launch start --all --detach`, then
// mixed load from 8 clients per group at once. Overload may answer 503 database_busy, never
// another 5xx, never a reset; no process is lost; an ordinary operator role connects every second.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDensity } from '../../scripts/bench/density.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-density-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('many groups on one small PostgreSQL', () => {
  it('answers every request (2xx, 4xx or database_busy), loses no process and never locks the operator out', async () => {
    const r = await runDensity({
      groups: 8,
      seconds: Number(process.env.DENSITY_SECONDS ?? 20),
      clientsPerGroup: 8,
      maxConnections: 30,
      dir,
      sharedEnv: { EMBEDDINGS_PROVIDER: 'hashing' },
      log: (m) => console.info(m),
    });
    console.info(JSON.stringify(r));
    // 30 − 3 superuser-reserved − 3 kept for operators = 24, less what other clients hold when the
    // groups start (the harness's own connections count against the server's budget): one pool
    // size for every group, at least 1, and the server never over its limit (below).
    expect(r.pool_per_group).toHaveLength(1);
    expect(r.pool_per_group[0]).toBeGreaterThanOrEqual(1);
    expect(r.requests).toBeGreaterThan(0);
    for (const route of ['create', 'read', 'keyword', 'semantic'] as const) expect(r.routes[route].ok, route).toBeGreaterThan(0);
    expect(r.other_5xx).toBe(0);
    expect(r.errors).toEqual({});
    expect(r.lost_processes).toBe(0);
    expect(r.operator.attempts).toBeGreaterThan(0);
    expect(r.operator.refused, r.operator.reasons.join('; ')).toBe(0);
    expect(r.max_connections_in_use).toBeLessThanOrEqual(30 - 3);
  }, 600_000);
});
