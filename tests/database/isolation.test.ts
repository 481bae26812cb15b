// Two groups in one database: each sees only its own tables and figures. Group A holds the known
// content of seed.ts, group B the real fixtures; B's expectations are counted from the files.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { adminSql, createTestSchema, databaseUrl } from '../helpers/db.js';
import { createSql } from '../../src/db/client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createIntrospectionRepo } from '../../src/db/introspection-repo.js';
import { createAnalyzeRepo } from '../../src/db/analyze-repo.js';
import { createDatabaseService } from '../../src/services/database-service.js';
import { internalCtx } from '../../src/services/context.js';
import { packageRoot } from '../../src/paths.js';
import { seedKnown } from './seed.js';

const FIXTURES = path.join(packageRoot, 'tests', 'fixtures', 'vcons');
const ROUTES = [
  '/database/shape',
  '/database/stats',
  '/database/size',
  '/database/health',
  '/analytics',
  '/analytics/growth',
  '/analytics/content',
  '/analytics/tags',
  '/analytics/attachments',
];

let a: TestServer;
let b: TestServer;

/** What B's analytics must report, counted straight from the stored fixture documents. */
const expected = {
  stored: 0,
  kinds: {} as Record<string, number>,
  parties: 0,
  dialogs: 0,
  dialogTypes: {} as Record<string, number>,
  analyses: 0,
  analysisTypes: {} as Record<string, number>,
  attachments: 0,
};

beforeAll(async () => {
  [a, b] = await Promise.all([startTestServer(), startTestServer()]);
  await seedKnown(a);
  const admin = adminSql();
  await admin.unsafe(`create table "${a.schema}".only_in_a (x int)`);
  await admin.end();
  const docs = new Map<string, any>();
  for (const file of readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.json') && !f.startsWith('invalid__'))
    .sort()) {
    const doc = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8'));
    const r = await b.api('/vcons', { method: 'POST', json: doc });
    if (r.status === 200 || r.status === 201) docs.set(r.body.uuid, doc);
  }
  const count = (m: Record<string, number>, k: unknown) => {
    const key = typeof k === 'string' ? k : '(none)';
    m[key] = (m[key] ?? 0) + 1;
  };
  for (const doc of docs.values()) {
    const kind = 'payload' in doc && 'signatures' in doc ? 'signed' : 'ciphertext' in doc && 'recipients' in doc ? 'encrypted' : 'plain';
    count(expected.kinds, kind);
    if (kind !== 'plain') continue;
    expected.parties += doc.parties?.length ?? 0;
    expected.dialogs += doc.dialog?.length ?? 0;
    for (const d of doc.dialog ?? []) count(expected.dialogTypes, d.type);
    expected.analyses += doc.analysis?.length ?? 0;
    for (const x of doc.analysis ?? []) count(expected.analysisTypes, x.type);
    expected.attachments += doc.attachments?.length ?? 0;
  }
  expected.stored = docs.size;
}, 120_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

const data = async (s: TestServer, p: string) => {
  const r = await s.api(p);
  expect(r.status, `${p}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body.data;
};

describe('two groups, one database', () => {
  it("no answer of one group names the other group's schema or tables", async () => {
    expect(expected.stored).toBeGreaterThanOrEqual(10);
    for (const [self, other] of [
      [a, b],
      [b, a],
    ] as const) {
      for (const p of ROUTES) {
        const text = JSON.stringify(await data(self, p));
        expect(text, p).not.toContain(other.schema);
      }
      const plan = await self.api('/database/analyze', { method: 'POST', json: { query: 'select count(*) from vcons', analyze: true } });
      expect(plan.status).toBe(200);
      expect(JSON.stringify(plan.body)).not.toContain(other.schema);
    }
    const shapeA = await data(a, '/database/shape');
    const shapeB = await data(b, '/database/shape');
    expect(shapeA.schema).toBe(a.schema);
    expect(shapeB.schema).toBe(b.schema);
    expect(shapeA.tables.map((t: any) => t.name)).toContain('only_in_a');
    expect(shapeB.tables.map((t: any) => t.name)).not.toContain('only_in_a');
    for (const p of ['/database/stats', '/database/size', '/database/health']) {
      expect(JSON.stringify(await data(b, p)), p).not.toContain('only_in_a');
    }
  });

  it("refuses to plan a read of the other group's tables, even schema-qualified", async () => {
    for (const query of [
      `select * from "${a.schema}".vcons`,
      `select count(*) from vcons v join "${a.schema}".vcon_tags t on t.vcon_uuid = v.uuid`,
    ]) {
      for (const analyze of [false, true]) {
        const r = await b.api('/database/analyze', { method: 'POST', json: { query, analyze } });
        expect(r.status, query).toBe(400);
        expect(r.body.message).toContain(`${a.schema}.`);
        expect(JSON.stringify(r.body)).not.toMatch(/Plan Rows|Actual Rows/);
      }
    }
  });

  it("each group's figures are its own", async () => {
    const [ca, cb] = [await data(a, '/analytics/content'), await data(b, '/analytics/content')];
    expect(ca.conversations.vcons).toBe(4);
    expect(cb.conversations.vcons).toBe(expected.stored);
    expect((await data(a, '/database/size')).vcons).toBe(4);
    expect((await data(b, '/database/size')).vcons).toBe(expected.stored);
    expect((await data(a, '/analytics/tags')).tags).toBe(4);
    // The plan of an unqualified name counts this group's rows only.
    const plan = await b.api('/database/analyze', { method: 'POST', json: { query: 'select * from vcons', analyze: true } });
    expect(plan.body.data.plan[0].Plan['Actual Rows']).toBe(expected.stored);
  });

  it("B's content and attachment analytics match the fixture documents", async () => {
    const c = await data(b, '/analytics/content');
    expect(Object.fromEntries(c.conversations.kinds.map((k: any) => [k.kind, k.count]))).toEqual(expected.kinds);
    expect(c.parties.total).toBe(expected.parties);
    expect(c.dialogs.total).toBe(expected.dialogs);
    expect(Object.fromEntries(c.dialogs.by_type.map((t: any) => [t.type ?? '(none)', t.count]))).toEqual(expected.dialogTypes);
    expect(c.analyses.total).toBe(expected.analyses);
    expect(Object.fromEntries(c.analyses.by_type.map((t: any) => [t.type ?? '(none)', t.count]))).toEqual(expected.analysisTypes);
    const att = await data(b, '/analytics/attachments');
    expect(att.total).toBe(expected.attachments);
    expect(att.purposes.reduce((n: number, p: any) => n + p.count, 0) + att.without_purpose_or_type).toBeGreaterThanOrEqual(
      expected.attachments - att.types.reduce((n: number, t: any) => n + t.count, 0),
    );
    const all = await data(b, '/analytics?months_back=60');
    expect(all.summary.vcons).toBe(expected.stored);
    expect(all.growth.totals.vcons + all.growth.before_window + all.growth.after_window).toBe(expected.stored);
  });

  it('analyze stops at the statement timeout', async () => {
    // A short timeout on an instance of B's of its own: on B itself any query of a loaded machine
    // (the fixtures' writes, the analytics) could pass 500 ms.
    const short = await startTestServer({ SUPABASE_DB_SCHEMA: b.schema, STATEMENT_TIMEOUT_MS: '500' });
    try {
      const r = await short.api('/database/analyze', {
        method: 'POST',
        // In the select list the series streams (in FROM it would fill a tuplestore and hit analyze's
        // temp-file limit first), so only the statement timeout can stop it.
        json: { query: 'select count(*) from (select generate_series(1, 2000000000)) s', analyze: true },
      });
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/statement timeout of 500 ms/);
    } finally {
      await short.close();
    }
  });
});

describe('long-running queries of this application', () => {
  it("are listed with their text; other applications' are not", async () => {
    const t = await createTestSchema('dbh');
    const other = adminSql();
    const sibling = createSql({ url: databaseUrl(), schema: t.schema, max: 1 });
    try {
      const service = createDatabaseService({
        repo: createIntrospectionRepo(t.sql, t.schema),
        analyzer: createAnalyzeRepo({ url: databaseUrl(), schema: t.schema }),
        analyzeTimeoutMs: 1000,
        longRunningS: 0.3,
      });
      // postgres.js sends a query when it is awaited or executed: start both now; they run until cancelled.
      // Ours runs on a connection of its own with the pool's application_name: on the service's
      // pool, postgres.js could queue one of the health queries behind it.
      const cancelled = (err: { code?: string }) => err.code;
      const mine = sibling`select pg_sleep(60), 'mine-long-query'`.execute().catch(cancelled);
      const theirs = other.unsafe(`set application_name = 'not-vcon'; select pg_sleep(60), 'their-long-query'`).execute().catch(cancelled);
      // Both running for longer than longRunningS (0.3 s), as seen by the server's own clock.
      const active = async () =>
        other<{ pid: number }[]>`
          select pid from pg_stat_activity
          where query like any(array['%mine-long-query%', '%their-long-query%']) and state = 'active' and pid <> pg_backend_pid()
            and query_start < clock_timestamp() - interval '0.5 s'`;
      await vi.waitFor(async () => expect(await active()).toHaveLength(2), { timeout: 60_000, interval: 50 });
      const h = await service.health(internalCtx);
      const text = JSON.stringify(h);
      expect(h.connections.application.long_running).toEqual([
        expect.objectContaining({ state: 'active', query: expect.stringContaining('pg_sleep') }),
      ]);
      expect(h.connections.application.long_running[0].running_s).toBeGreaterThan(0.3);
      expect(h.alerts).toContainEqual(expect.objectContaining({ code: 'long_running_query', severity: 'warning' }));
      expect(h.status).toBe('warning');
      expect(text).not.toContain('their-long-query');
      expect(await active()).toHaveLength(2); // theirs was running all along, only not shown
      for (const { pid } of await active()) await other`select pg_cancel_backend(${pid})`;
      expect(await Promise.all([mine, theirs])).toEqual(['57014', '57014']); // query_canceled
    } finally {
      // A failed assertion must not leave the sleeps holding connections.
      await other`select pg_cancel_backend(pid) from pg_stat_activity where query like '%-long-query%' and pid <> pg_backend_pid()`;
      await Promise.all([other.end(), sibling.end()]);
      await t.drop();
    }
  });
});
