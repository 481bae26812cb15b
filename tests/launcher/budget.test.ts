// The connection budget on a PostgreSQL of our own with max_connections = 20: check and start give
// each group its share of the server (whatever its database, less what other clients hold),
// refuse explicit pools that cannot fit (naming groups and numbers), a later start fits into what
// running groups left, or is refused, and every command that provisions keeps the analyze roles'
// CONNECTION LIMIT to the budget. Last, the same per-server budget on the test database's server.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import postgres from 'postgres';
import { acquireEmbeddedPostgres, restartWithMaxConnections, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { databaseOfUrl, groupRoleNames } from '../../src/db/roles.js';
import { packageRoot } from '../../src/paths.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
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
      /connection budget of server 127\.0\.0\.1:\d+: 12 of 20 connections for 3 group\(s\) on postgres@127\.0\.0\.1:\d+\/postgres \(3 superuser-reserved, 3 kept for operators, 0 held by other clients\)/,
    );
    // Each group: its pool (requests and the index thread's connection) and one connection of its analyze role (12 = 3 × (3 + 1)).
    for (const g of ['alpha', 'beta', 'gamma'])
      expect(r.stdout).toContain(`${g}: pool 3 (2 requests + 1 index) + 1 analyze (budget share), 0 connection(s) held now`);
  });

  test('analyze connections only where every pool still fits: none when the pools take the whole budget', async () => {
    for (const g of ['alpha', 'beta', 'gamma']) setGroup(g, { DB_POOL_MAX: '4' });
    try {
      const r = await ws.run(['check']);
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/12 of 20 connections for 3 group\(s\)/);
      for (const g of ['alpha', 'beta', 'gamma'])
        expect(r.stdout).toContain(`${g}: pool 4 (3 requests + 1 index) + 0 analyze (DB_POOL_MAX; no room for analyze: it answers database_busy)`);
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
      expect(r.stdout).toContain('FAIL  connection budget of server');
      expect(r.stdout).toMatch(
        /server 127\.0\.0\.1:\d+: 3 groups need at least 17 connections but only 14 are available \(max_connections 20 − superuser_reserved_connections 3 − reserve 3 \(DB_RESERVED_CONNECTIONS\)\)/,
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
      expect(first.stdout).toMatch(/alpha .* 6 \(5 requests \+ 1 index\) \+ 1 analyze\s*$/m);
      expect(first.stdout).toMatch(/beta .* 6 \(5 requests \+ 1 index\) \+ 1 analyze \(budget\)\s*$/m);
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
      // The split each instance computed from its configuration, as status shows it.
      for (const row of rows) {
        expect(row.health.pool).toMatchObject({ size: 6, requests: 5, index: 1, analyze: 1 });
        expect(row.db_split).toEqual({ size: 6, requests: 5, index: 1, analyze: 1 });
        expect(row.health.pool.connections).toBeGreaterThanOrEqual(1);
      }
      const table = await ws.run(['status']);
      expect(table.stdout).toMatch(/POOL\s+CONNS/);
      for (const g of ['alpha', 'beta']) expect(table.stdout).toMatch(new RegExp(`^${g} .* 6 \\(5 requests \\+ 1 index\\) \\+ 1 analyze `, 'm'));

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

  test('groups on two databases of one server share one budget, less what other clients hold', async () => {
    // gamma on a second database of the same server; the test holds idle connections there.
    const second = testSchemaName('budget_db');
    // The test's own connection is another client too: closed before the numbers are read.
    const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${second}`);
    await admin.end();
    const secondUrl = Object.assign(new URL(pg.url), { pathname: `/${second}` }).toString();
    setGroup('gamma', { DATABASE_URL: secondUrl });
    const idle = postgres(secondUrl, { max: 12, onnotice: () => {}, connection: { application_name: 'budget-test-idle' } });
    const hold = async (n: number) => {
      const held = await Promise.all(Array.from({ length: n }, () => idle.reserve()));
      await Promise.all(held.map((c) => c`select 1`));
      return held;
    };
    let held = await hold(4);
    try {
      // 20 − 3 superuser-reserved − 3 reserve − 4 others = 10; one analyze connection each leaves 7: pools of 2.
      const r = await ws.run(['check']);
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(
          `connection budget of server 127\\.0\\.0\\.1:\\d+: 9 of 20 connections for 3 group\\(s\\) on postgres@127\\.0\\.0\\.1:\\d+/${second}, postgres@127\\.0\\.0\\.1:\\d+/postgres ` +
            `\\(3 superuser-reserved, 3 kept for operators, 4 held by other clients\\)`,
        ),
      );
      expect(r.stdout.match(/connection budget of/g)).toHaveLength(1);
      for (const g of ['alpha', 'beta', 'gamma'])
        expect(r.stdout).toContain(`${g}: pool 2 (1 requests + 1 index) + 1 analyze (budget share), 0 connection(s) held now`);

      const s = await ws.run(['start', '--all', '--detach']);
      expect(s.exitCode, s.stderr).toBe(0);
      expect(s.stderr).toMatch(
        /connection budget of server 127\.0\.0\.1:\d+ \(.*\): 9 for these groups \(pools \+ 1 analyze connection each\), 0 for running groups, 4 held by other clients, of 20/,
      );
      expect(ws.registry()).toMatchObject({ alpha: { db_pool: 2, db_analyze: 1 }, beta: { db_pool: 2 }, gamma: { db_pool: 2, db_analyze: 1 } });
      expect((await ws.run(['stop', '--all'])).exitCode).toBe(0);

      // More idle clients: the three groups no longer fit, and the refusal says who holds the server.
      for (const c of held) c.release();
      held = await hold(12);
      const tight = await ws.run(['check']);
      expect(tight.exitCode).toBe(1);
      expect(tight.stdout).toContain(
        'but only 2 are available (max_connections 20 − superuser_reserved_connections 3 − reserve 3 (DB_RESERVED_CONNECTIONS) − 12 held by other clients)',
      );
    } finally {
      for (const c of held) c.release();
      await idle.end();
      await ws.run(['stop', '--all']);
      setGroup('gamma');
      const drop = postgres(pg.url, { max: 1, onnotice: () => {} });
      await drop.unsafe(`drop database if exists ${second} with (force)`);
      await drop.end();
    }
  }, 180_000);

  test('migrate, import, rotate and provision give analyze roles the connections the budget counts, not 4', async () => {
    const analyzeRole = (g: string) =>
      JSON.parse(readFileSync(path.join(ws.instancesDir, 'credentials', `${g}.json`), 'utf8')).analyze_role as string;
    const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    const limitsOf = async (groups: string[]) => {
      const names = groups.map(analyzeRole);
      const rows = await admin<
        { rolname: string; rolconnlimit: number }[]
      >`select rolname, rolconnlimit from pg_roles where rolname in ${admin(names)}`;
      return groups.map((g) => rows.find((r) => r.rolname === analyzeRole(g))?.rolconnlimit);
    };
    setGroup('alpha', { DB_POOL_MAX: '6' });
    try {
      // alpha 6 + beta 6, one analyze connection each: the 14 connections for groups are taken.
      const first = await ws.run(['start', '--group', 'alpha', '--group', 'beta', '--detach']);
      expect(first.exitCode, first.stderr).toBe(0);
      expect(await limitsOf(['alpha', 'beta'])).toEqual([1, 1]);

      // migrate: the running groups keep what their start counted, stopped gamma gets what a start would (no room: 0).
      const m = await ws.run(['migrate', '--all']);
      expect(m.exitCode, m.stdout + m.stderr).toBe(0);
      expect(await limitsOf(['alpha', 'beta', 'gamma'])).toEqual([1, 1, 0]);

      // import into stopped beta: its temporary instance and its analyze role come out of the budget.
      const betaPid = ws.registry().beta.pid;
      expect((await ws.run(['stop', '--group', 'beta'])).exitCode).toBe(0);
      await waitFor(() => !isAlive(betaPid));
      const imp = await ws.run([
        'import',
        '--group',
        'beta',
        path.join(packageRoot, 'tests', 'fixtures', 'vcons', 'fake-vcons__text-chat-no-analysis-2.json'),
      ]);
      expect(imp.exitCode, imp.stdout + imp.stderr).toBe(0);
      expect(await limitsOf(['alpha', 'beta'])).toEqual([1, 1]);

      // rotate (stopped groups only): beta fits beside alpha, with one analyze connection.
      const rot = await ws.run(['rotate', '--group', 'beta']);
      expect(rot.exitCode, rot.stdout + rot.stderr).toBe(0);
      expect(await limitsOf(['alpha', 'beta'])).toEqual([1, 1]);

      // provision of a stopped group, with beta running again: gamma has no room for analyze.
      expect((await ws.run(['start', '--group', 'beta', '--detach'])).exitCode).toBe(0);
      const prov = await ws.run(['provision', '--group', 'gamma', '--print']);
      expect(prov.exitCode, prov.stdout + prov.stderr).toBe(0);
      expect(await limitsOf(['alpha', 'beta', 'gamma'])).toEqual([1, 1, 0]);
    } finally {
      setGroup('alpha');
      await ws.run(['stop', '--all']);
      await admin.end();
    }
  }, 240_000);
});

describe("connection budget on the test database's server", () => {
  test('two databases of one server are one budget, and connections other clients hold count', async () => {
    const local = createWorkspace(['one', 'two']);
    const admin = adminSql();
    const second = testSchemaName('budget_db');
    await admin.unsafe(`create database ${second}`);
    const secondUrl = Object.assign(new URL(databaseUrl()), { pathname: `/${second}` }).toString();
    local.writeEnv('two', { SUPABASE_DB_SCHEMA: local.schemas.two, VCON_INSTANCE_LABEL: 'label-two', DATABASE_URL: secondUrl });
    const idle = postgres(secondUrl, { max: 5, onnotice: () => {}, connection: { application_name: 'budget-test-idle' } });
    try {
      const held = await Promise.all(Array.from({ length: 5 }, () => idle.reserve()));
      await Promise.all(held.map((c) => c`select 1`));
      const r = await local.run(['check']);
      for (const c of held) c.release();
      // One budget for the server, naming both databases; other clients (other tests too) counted.
      expect(r.stdout.match(/connection budget of/g)).toHaveLength(1);
      const m = r.stdout.match(
        /connection budget of server (\S+): (\d+) of (\d+) connections for 2 group\(s\) on (.*) \((\d+) superuser-reserved, (\d+) kept for operators, (\d+) held by other clients\)/,
      );
      expect(m, r.stdout).not.toBeNull();
      const [, , total, max, databases, su, reserve, others] = m!;
      expect(databases).toContain(`/${second}`);
      expect(databases.split(', ')).toHaveLength(2);
      expect(Number(others)).toBeGreaterThanOrEqual(5);
      // The shares follow from those numbers: what is left after other clients, split between the two groups.
      const available = Number(max) - Number(su) - Number(reserve) - Number(others);
      const analyze = available - 2 - 2 >= 0 ? 1 : 0;
      const pool = Math.max(1, Math.min(10, Math.floor((available - 2 * analyze) / 2)));
      expect(Number(total)).toBe(2 * (pool + analyze));
      // Two groups fit while two connections are left (a machine busy with other tests may have fewer).
      expect(r.exitCode, r.stdout + r.stderr).toBe(available >= 2 ? 0 : 1);
      for (const g of ['one', 'two']) expect(r.stdout).toMatch(new RegExp(`${g}: pool ${pool} \\(.*\\) \\+ ${analyze} analyze \\(budget share`));
    } finally {
      await idle.end();
      await admin.unsafe(`drop database if exists ${second} with (force)`);
      await admin.end();
      await local.cleanup();
    }
  }, 120_000);
});
