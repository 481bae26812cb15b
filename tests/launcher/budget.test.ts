// The connection budget (issue 15) on a PostgreSQL of our own with max_connections = 20:
// check and start give each group its share, refuse explicit pools that cannot fit (naming
// groups and numbers), and a later start fits into what running groups left, or is refused.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import postgres from 'postgres';
import { acquireEmbeddedPostgres, restartWithMaxConnections, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { databaseOfUrl, groupRoleNames } from '../../src/db/roles.js';
import { api, createWorkspace, isAlive, waitFor, type Workspace } from './helpers.js';

let dir: string;
let pg: EmbeddedPostgres;
let ws: Workspace;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-budget-'));
  pg = await acquireEmbeddedPostgres(dir);
  // 20 − 3 superuser-reserved − a reserve of 3 (a tenth, at least 3) = 14 for groups.
  await restartWithMaxConnections(pg, 20);
  ws = createWorkspace(['alpha', 'beta', 'gamma']);
  ws.writeEnv('shared', { DATABASE_URL: pg.url, API_KEYS: 'launcher-test-key', LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing' });
}, 120_000);

afterAll(async () => {
  await ws?.run(['stop', '--all']);
  await ws?.cleanup().catch(() => undefined);
  await pg?.release();
  rmSync(dir, { recursive: true, force: true });
});

const setGroup = (name: string, extra: Record<string, string> = {}) =>
  ws.writeEnv(name, { SUPABASE_DB_SCHEMA: ws.schemas[name], VCON_INSTANCE_LABEL: `label-${name}`, ...extra });

describe('connection budget', () => {
  test('check gives each group its share and shows pool and connections per group', async () => {
    const r = await ws.run(['check']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /connection budget of postgres@127\.0\.0\.1:\d+\/postgres: 12 of 20 connections for 3 group\(s\) \(3 superuser-reserved, 3 kept for operators\)/,
    );
    // Each group: its pool and one connection of its analyze role (12 = 3 × (3 + 1)).
    for (const g of ['alpha', 'beta', 'gamma']) expect(r.stdout).toContain(`${g}: pool 3 (budget share), analyze 1, 0 connection(s) held now`);
  });

  test('analyze connections only where every pool still fits: none when the pools take the whole budget', async () => {
    for (const g of ['alpha', 'beta', 'gamma']) setGroup(g, { DB_POOL_MAX: '4' });
    try {
      const r = await ws.run(['check']);
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/12 of 20 connections for 3 group\(s\)/);
      for (const g of ['alpha', 'beta', 'gamma'])
        expect(r.stdout).toContain(`${g}: pool 4 (DB_POOL_MAX), analyze 0 (no room: analyze answers database_busy)`);
    } finally {
      for (const g of ['alpha', 'beta', 'gamma']) setGroup(g);
    }
  });

  test('check refuses explicit pools that cannot fit, naming the groups and the numbers', async () => {
    setGroup('alpha', { DB_POOL_MAX: '8' });
    setGroup('beta', { DB_POOL_MAX: '8' });
    try {
      const r = await ws.run(['check']);
      expect(r.exitCode).toBe(1);
      expect(r.stdout).toContain('FAIL  connection budget of');
      expect(r.stdout).toMatch(
        /3 groups need at least 17 connections but only 14 are available \(max_connections 20 − superuser_reserved_connections 3 − reserve 3 \(DB_RESERVED_CONNECTIONS\)\)/,
      );
      expect(r.stdout).toContain('alpha 8 (DB_POOL_MAX), beta 8 (DB_POOL_MAX), gamma 1');
      // start refuses the same way, before anything runs.
      const s = await ws.run(['start', '--all', '--detach']);
      expect(s.exitCode).not.toBe(0);
      expect(s.stderr).toContain('do not fit the connection budget');
      expect(s.stderr).toContain('alpha 8 (DB_POOL_MAX)');
      expect(ws.registry()).toEqual({});
    } finally {
      setGroup('alpha');
      setGroup('beta');
    }
  });

  test('a later start fits into what running groups left, or is refused naming them', async () => {
    setGroup('alpha', { DB_POOL_MAX: '6' });
    try {
      const first = await ws.run(['start', '--group', 'alpha', '--group', 'beta', '--detach']);
      expect(first.exitCode, first.stderr).toBe(0);
      // alpha asked for 6; one analyze connection each; beta gets the rest of the 14 → 6.
      expect(first.stdout).toMatch(/alpha .* 6\s*$/m);
      expect(first.stdout).toMatch(/beta .* 6 \(budget\)\s*$/m);
      expect(ws.registry()).toMatchObject({ alpha: { db_pool: 6, db_analyze: 1 }, beta: { db_pool: 6, db_analyze: 1 } });
      // The analyze role may open exactly what the budget counted for it.
      const limits = postgres(pg.url, { max: 1, onnotice: () => {} });
      try {
        const roles = ['alpha', 'beta'].map((g) => groupRoleNames(databaseOfUrl(pg.url), ws.schemas[g]).analyzeRole);
        const rows = await limits<{ rolconnlimit: number }[]>`select rolconnlimit from pg_roles where rolname in ${limits(roles)}`;
        expect(rows.map((r) => r.rolconnlimit)).toEqual([1, 1]);
      } finally {
        await limits.end();
      }

      const status = await ws.run(['status', '--json']);
      const rows = JSON.parse(status.stdout) as any[];
      for (const row of rows) {
        expect(row.health.pool.size).toBe(6);
        expect(row.health.pool.connections).toBeGreaterThanOrEqual(1);
      }
      const table = await ws.run(['status']);
      expect(table.stdout).toMatch(/POOL\s+CONNS/);

      // Nothing left for gamma: refused, naming what the running groups hold.
      const later = await ws.run(['start', '--group', 'gamma', '--detach']);
      expect(later.exitCode).not.toBe(0);
      expect(later.stderr).toMatch(/1 group needs at least 1 connection but only 0 are available .* − 14 held by running groups \(alpha 7, beta 7\)/);

      // The groups really stay within their pools under load, and an operator still connects.
      const base = (g: string) => `${ws.registry()[g].url}/api/v1`;
      await Promise.all(Array.from({ length: 30 }, (_, i) => api(base(i % 2 ? 'alpha' : 'beta'), '/vcons/search/content?q=x')));
      const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
      try {
        const byApp = await admin<{ app: string; n: number }[]>`
          select application_name as app, count(*)::int as n from pg_stat_activity where application_name like 'vcon-label-%' group by 1`;
        for (const r of byApp) expect(r.n).toBeLessThanOrEqual(6);
      } finally {
        await admin.end();
      }

      // Stopping one frees its share for the next start.
      const alphaPid = ws.registry().alpha.pid;
      expect((await ws.run(['stop', '--group', 'alpha'])).exitCode).toBe(0);
      await waitFor(() => !isAlive(alphaPid));
      const again = await ws.run(['start', '--group', 'gamma', '--detach']);
      expect(again.exitCode, again.stderr).toBe(0);
      expect(ws.registry().gamma.db_pool).toBe(6);
    } finally {
      setGroup('alpha');
      await ws.run(['stop', '--all']);
    }
  }, 180_000);
});
