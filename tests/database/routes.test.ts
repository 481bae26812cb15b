// Every database and analytics route on a schema with known content (tests/database/seed.ts).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAnalyzeRepo } from '../../src/db/analyze-repo.js';
import { adminSql, databaseUrl } from '../helpers/db.js';
import { RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { dayOf, monthOf, seedKnown, type Seeded } from './seed.js';

let s: TestServer;
let seed: Seeded;

beforeAll(async () => {
  s = await startTestServer();
  seed = await seedKnown(s);
  // Planner statistics make row estimates exact on tables this small.
  const admin = adminSql();
  await admin.unsafe(`analyze "${s.schema}".vcons, "${s.schema}".vcon_dialogs, "${s.schema}".vcon_parties`);
  await admin.end();
});
afterAll(() => s?.close());

const ok = async (path: string) => {
  const r = await s.api(path);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.success).toBe(true);
  return r.body.data;
};

describe('GET /database/shape', () => {
  it("lists this schema's tables with columns, indexes, constraints and real sizes", async () => {
    const d = await ok('/database/shape');
    expect(d.schema).toBe(s.schema);
    const names = d.tables.map((t: any) => t.name);
    for (const t of ['vcons', 'vcon_parties', 'vcon_dialogs', 'vcon_analyses', 'vcon_attachments', 'vcon_tags', 'search_units']) {
      expect(names).toContain(t);
    }
    const vcons = d.tables.find((t: any) => t.name === 'vcons');
    expect(vcons.row_estimate).toBe(4);
    expect(vcons.columns.find((c: any) => c.name === 'uuid')).toMatchObject({ type: 'uuid', not_null: true });
    expect(vcons.columns.find((c: any) => c.name === 'doc')).toMatchObject({ type: 'json', not_null: true });
    expect(vcons.indexes.find((i: any) => i.name === 'vcons_pkey')).toMatchObject({ primary: true, unique: true, columns: ['uuid'] });
    expect(vcons.indexes.find((i: any) => i.name === 'vcons_created_idx').columns).toEqual(['created_at', 'uuid']);
    expect(vcons.size.heap_bytes).toBeGreaterThan(0);
    expect(vcons.size.total_bytes).toBe(vcons.size.table_bytes + vcons.size.index_bytes);
    expect(vcons.size.total_bytes % 8192).toBe(0); // whole pages: measured, not rows × 1024
    // One row per vCon with dialogs (migration 0005): a1, a2 and a4.
    const dialogs = d.tables.find((t: any) => t.name === 'vcon_dialogs');
    expect(dialogs.row_estimate).toBe(3);
    // The derived tables have no foreign keys (migration 0006); the search tables keep theirs.
    expect(dialogs.constraints.find((c: any) => c.type === 'foreign_key')).toBeUndefined();
    const units = d.tables.find((t: any) => t.name === 'search_units');
    expect(units.constraints.find((c: any) => c.type === 'foreign_key').definition).toMatch(/REFERENCES vcons\(uuid\) ON DELETE CASCADE/);
    expect(d.totals.tables).toBe(d.tables.length);
    expect(d.totals.total_bytes).toBe(d.tables.reduce((n: number, t: any) => n + t.size.total_bytes, 0));
    expect(d.estimates.row_estimate).toMatch(/reltuples/);
  });
});

describe('GET /database/stats', () => {
  it("reports counters of this schema's tables and indexes, saying they are estimates", async () => {
    const d = await ok('/database/stats');
    const vcons = d.tables.find((t: any) => t.table === 'vcons');
    // n_live_tup is an estimate: ANALYZE set it to 4, and a server backend may flush its pending
    // insert counters after that and add to it.
    expect(vcons.live_rows).toBeGreaterThanOrEqual(4);
    expect(vcons.last_analyze).not.toBeNull();
    expect(d.indexes.map((i: any) => i.index)).toContain('vcons_pkey');
    expect(d.tables.map((t: any) => t.table).sort()).toEqual((await ok('/database/shape')).tables.map((t: any) => t.name).sort());
    expect(d.estimates.counters).toMatch(/estimates/);
    for (const k of ['hit_ratio', 'heap_hit_ratio', 'index_hit_ratio']) {
      const v = d.cache[k];
      expect(v === null || (v >= 0 && v <= 1)).toBe(true);
    }
    expect(d.totals.rows_inserted).toBeGreaterThanOrEqual(0);
    expect(Array.isArray(d.recommendations)).toBe(true);
  });
});

describe('GET /database/size', () => {
  it('sizes tables and indexes and advises search limits for the corpus', async () => {
    const d = await ok('/database/size');
    expect(d.vcons).toBe(4);
    expect(d.search).toMatchObject({ corpus_vcons: 4, tier: 'small', recommended_limit: 100 });
    expect(d.recommendations.find((r: any) => r.code === 'search_limits').message).toMatch(/^4 vCons stored/);
    const bytes = d.tables.map((t: any) => t.total_bytes);
    expect(bytes).toEqual([...bytes].sort((a, b) => b - a));
    expect(d.totals.total_bytes).toBe(bytes.reduce((a: number, b: number) => a + b, 0));
    expect(d.largest_indexes.length).toBeGreaterThan(0);
    const dialogs = d.tables.find((t: any) => t.table === 'vcon_dialogs');
    expect(dialogs.bytes_per_row_estimate).toBe(Math.round(dialogs.table_bytes / 3));
  });
});

describe('GET /database/health', () => {
  it("finds bloat, duplicate and unused indexes, and this application's connections", async () => {
    const admin = adminSql();
    try {
      await admin.unsafe(`
        create table "${s.schema}".bloat_probe (a int) with (autovacuum_enabled = off);
        insert into "${s.schema}".bloat_probe select g from generate_series(1, 5000) g;
        delete from "${s.schema}".bloat_probe where a > 1000;
        create index bloat_probe_a_idx on "${s.schema}".bloat_probe (a);
        create index bloat_probe_a_copy_idx on "${s.schema}".bloat_probe (a);`);
      // Flush this session's counters now, so the ANALYZE figures (1000 live, 4000 dead) are final.
      await admin`select pg_stat_force_next_flush()`;
      await admin.unsafe(`analyze "${s.schema}".bloat_probe`);
    } finally {
      await admin.end();
    }
    const d = await ok('/database/health');
    expect(d.status).toBe('warning');
    const probe = d.bloat.tables.find((t: any) => t.table === 'bloat_probe');
    expect(probe).toMatchObject({ live_rows: 1000, dead_rows: 4000, dead_ratio: 0.8 });
    expect(probe.estimated_dead_bytes).toBeGreaterThan(0);
    expect(d.alerts).toContainEqual(expect.objectContaining({ code: 'table_bloat', table: 'bloat_probe', severity: 'warning' }));
    expect(d.indexes.duplicate).toEqual([
      expect.objectContaining({ table: 'bloat_probe', indexes: ['bloat_probe_a_copy_idx', 'bloat_probe_a_idx'] }),
    ]);
    expect(d.alerts).toContainEqual(expect.objectContaining({ code: 'duplicate_index', table: 'bloat_probe' }));
    expect(d.indexes.unused.map((i: any) => i.index)).toEqual(expect.arrayContaining(['bloat_probe_a_idx', 'bloat_probe_a_copy_idx']));
    // Constraint-backing indexes are never "unused" candidates.
    expect(d.indexes.unused.map((i: any) => i.index)).not.toContain('vcons_pkey');
    expect(d.connections.application.application_name).toBe(`vcon-label-${s.schema}`);
    expect(d.connections.application.total).toBeGreaterThanOrEqual(1);
    expect(d.connections.server.max_connections).toBeGreaterThan(0);
    expect(d.recommendations.find((r: any) => r.code === 'table_bloat').action).toBe('VACUUM (ANALYZE) bloat_probe');
    // The shape sees the new table too: every figure is read live.
    expect((await ok('/database/shape')).tables.map((t: any) => t.name)).toContain('bloat_probe');
  });

  it("shows this application's long-running queries and never other applications' text", async () => {
    const admin = adminSql();
    const other = adminSql();
    try {
      // Another application's long query: it must not appear (nor its text). It runs until cancelled.
      const pending = other
        .unsafe(`set application_name = 'someone-else'; select pg_sleep(60), 'secret-text-of-another-app'`)
        .execute()
        .catch((err: { code?: string }) => err.code);
      const running = async () =>
        (
          await admin<{ pid: number }[]>`
            select pid from pg_stat_activity where query like '%secret-text-of-another-app%' and state = 'active' and pid <> pg_backend_pid()`
        ).map((r) => r.pid);
      // It is running (the server counts it) before we look, and still after: only not shown.
      await vi.waitFor(async () => expect(await running()).toHaveLength(1), { timeout: 60_000, interval: 50 });
      const d = await ok('/database/health');
      expect(JSON.stringify(d)).not.toContain('secret-text-of-another-app');
      expect(d.connections.application.long_running).toEqual([]);
      const [pid] = await running();
      expect(pid).toBeDefined();
      await admin`select pg_cancel_backend(${pid})`;
      expect(await pending).toBe('57014'); // query_canceled
    } finally {
      // A failed assertion must not leave the sleep holding a connection.
      await admin`select pg_cancel_backend(pid) from pg_stat_activity where query like '%secret-text-of-another-app%' and pid <> pg_backend_pid()`;
      await admin.end();
      await other.end();
    }
  });
});

describe('POST /database/analyze', () => {
  const analyze = (json: unknown, key?: string) => s.api('/database/analyze', { method: 'POST', json, key });

  it('returns the JSON plan of a SELECT, in this schema, without running it', async () => {
    const r = await analyze({ query: `select uuid, subject from vcons where uuid = '${seed.uuids[0]}'` });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // The default STATEMENT_TIMEOUT_MS (30 s) is capped: a slow statement's 400 comes within 5 s.
    expect(r.body.data).toMatchObject({ analyzed: false, read_only: true, schema: s.schema, statement_timeout_ms: 5_000 });
    expect(r.body.data.note).toMatch(
      /calls a function, operator or cast off the allowlist or reads a relation outside this schema is refused before PostgreSQL sees it/,
    );
    const plan = r.body.data.plan[0].Plan;
    expect(JSON.stringify(plan)).toContain('"Relation Name":"vcons"');
    expect(plan['Actual Rows']).toBeUndefined();
  });

  it('with analyze: true executes it read-only and reports actual rows', async () => {
    const r = await analyze({ query: 'with d as (select types from vcon_dialogs) select count(*) from d;', analyze: true });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data.analyzed).toBe(true);
    expect(r.body.data.plan[0]['Execution Time']).toEqual(expect.any(Number));
    expect(r.body.data.plan[0].Plan['Actual Rows']).toBe(1);
  });

  it.each([
    ['DML', 'delete from vcons', /data-modifying.*DELETE/],
    ['DML in a CTE', 'with x as (delete from vcons returning uuid) select * from x', /data-modifying/],
    ['DDL', 'drop table vcons', /DDL.*DROP/],
    ['multiple statements', 'select 1; delete from vcons', /single statement/],
    ['a comment hiding a second statement', 'select 1 -- note\n; drop table vcons', /single statement/],
    ['a block comment hiding a second statement', 'select 1 /* ; */ ; drop table vcon_tags', /single statement/],
    ['SELECT INTO', 'select * into stolen from vcons', /SELECT INTO/],
    ['FOR UPDATE', 'select * from vcons for update', /locking/],
    ['pg_sleep', 'select pg_sleep(5)', /pg_sleep\(\) is not allowed/],
  ])('refuses %s with 400 and changes nothing', async (_name, query, message) => {
    const r = await analyze({ query, analyze: true });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ success: false, error: 'validation_failed' });
    expect(r.body.message).toMatch(message);
    expect((await ok('/analytics/content')).conversations.vcons).toBe(4);
    expect((await ok('/analytics/tags')).tags).toBe(4);
  });

  it('refuses bad bodies with a clear 400', async () => {
    for (const [json, path] of [
      [{}, 'query'],
      [{ query: 42 }, 'query'],
      [{ query: 'select 1', analyze: 'maybe' }, 'analyze'],
      // A JSON body has booleans: the words a query string needs are not taken here.
      [{ query: 'select 1', analyze: 'yes' }, 'analyze'],
      [{ query: 'select 1', analyze: 'true' }, 'analyze'],
      [{ query: 'select 1', analyze: 1 }, 'analyze'],
      [{ query: 'select 1', explain: true }, 'explain'],
      [['select 1'], '(root)'],
    ] as const) {
      const r = await analyze(json);
      expect(r.status, JSON.stringify(json)).toBe(400);
      expect(r.body.details.map((d: any) => d.path)).toContain(path);
    }
  });

  it('runs read-only: a function that writes fails in PostgreSQL, not only in the check', async () => {
    const admin = adminSql();
    try {
      // plpgsql resolves names at run time, through the search_path analyze pins.
      await admin.unsafe(`create function "${s.schema}".sneaky() returns int language plpgsql volatile
        as $$ begin insert into vcon_tags (vcon_uuid, key, value) select uuid, 'sneaky', 'x' from vcons; return 1; end $$`);
    } finally {
      await admin.end();
    }
    const r = await analyze({ query: 'select sneaky()', analyze: true });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/function sneaky\(\) is not allowed in analyze/);
    // Past the plan check (which refuses it first), PostgreSQL itself refuses the write.
    const analyzer = createAnalyzeRepo({ url: databaseUrl(), schema: s.schema });
    await expect(
      analyzer.explain('select sneaky()', { analyze: true, timeoutMs: 5_000, workMemKb: 1024, tempFileLimitKb: 1024, inspect: () => undefined }),
    ).rejects.toMatchObject({ code: '25006' });
    expect((await ok('/analytics/tags')).keys.map((k: any) => k.key)).not.toContain('sneaky');
  });

  it("reports PostgreSQL's own refusal as 400", async () => {
    const r = await analyze({ query: 'select * from no_such_table' });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/no_such_table/);
  });

  it('read-only keys may GET but get 403 on POST /database/analyze', async () => {
    expect((await s.api('/database/shape', { key: RO_KEY })).status).toBe(200);
    expect((await s.api('/analytics', { key: RO_KEY })).status).toBe(200);
    const r = await analyze({ query: 'select 1' }, RO_KEY);
    expect(r.status).toBe(403);
    expect(r.body.error).toBe('forbidden');
  });

  it('answers 405 for other methods and 401 without a key', async () => {
    expect((await s.api('/database/analyze')).status).toBe(405);
    expect((await s.api('/database/shape', { method: 'DELETE' })).status).toBe(405);
    expect((await s.api('/analytics', { key: null })).status).toBe(401);
  });
});

describe('GET /analytics/*', () => {
  it('growth counts vCons and their contents per month, with a projection', async () => {
    const d = await ok('/analytics/growth');
    expect(d).toMatchObject({ granularity: 'month', months_back: 12, before_window: 1, after_window: 0 });
    expect(d.periods).toHaveLength(13);
    const at = (i: number) => d.periods.find((p: any) => p.period === monthOf(seed.dates[i]));
    expect(at(0)).toMatchObject({ vcons: 1, parties: 2, dialogs: 2, analyses: 2, attachments: 2, partial: true });
    expect(at(1)).toMatchObject({ vcons: 1, parties: 3, dialogs: 3, analyses: 1, attachments: 2, partial: false });
    expect(at(2)).toMatchObject({ vcons: 1, parties: 1, dialogs: 0, analyses: 0, attachments: 1 });
    expect(d.totals).toEqual({ vcons: 3, parties: 6, dialogs: 5, analyses: 3, attachments: 5 });
    expect(d.periods.at(-1).cumulative_vcons).toBe(4);
    expect(d.projection).toMatchObject({ estimate: true, based_on_periods: 12 });
    expect(d.projection.next).toHaveLength(3);
    expect(d.projection.next[0].period).toBe(monthOf(seed.dates[0]));
  });

  it('growth by day and by week, validated', async () => {
    const day = await ok('/analytics/growth?granularity=day&months_back=1');
    expect(day.periods.find((p: any) => p.period === dayOf(seed.dates[0])).vcons).toBe(1);
    expect(day.periods.length).toBeGreaterThanOrEqual(29);
    const week = await ok('/analytics/growth?granularity=week&months_back=6');
    expect(week.totals.vcons).toBe(3);
    expect(new Date(`${week.periods[0].period}T00:00:00Z`).getUTCDay()).toBe(1); // ISO weeks start on Monday
    const five = await ok('/analytics/growth?months_back=60');
    expect(five.totals.vcons + five.before_window).toBe(4);
  });

  it('content: dialog types and durations, analysis types and vendors, parties, conversations', async () => {
    const d = await ok('/analytics/content');
    expect(d.conversations).toMatchObject({ vcons: 4, with_dialog: 3, with_analysis: 2, with_attachments: 3, kinds: [{ kind: 'plain', count: 4 }] });
    expect(d.dialogs.total).toBe(6);
    const rec = d.dialogs.by_type.find((t: any) => t.type === 'recording');
    expect(rec).toMatchObject({
      count: 3,
      vcons: 3,
      with_duration: 3,
      total_duration_s: 210,
      avg_duration_s: 70,
      min_duration_s: 30,
      max_duration_s: 120,
    });
    expect(d.dialogs.by_type.find((t: any) => t.type === 'text')).toMatchObject({ count: 3, vcons: 2, with_duration: 0, bytes: 10 });
    expect(d.dialogs.durations).toMatchObject({ count: 3, total_s: 210, p50_s: 60, min_s: 30, max_s: 120 });
    expect(d.analyses.total).toBe(3);
    expect(d.analyses.by_type.map((t: any) => [t.type, t.count]).sort()).toEqual([
      ['sentiment', 1],
      ['summary', 1],
      ['transcript', 1],
    ]);
    expect(d.analyses.by_vendor).toEqual([
      { vendor: 'acme', count: 2, vcons: 1, products: ['asr'] },
      { vendor: 'mood', count: 1, vcons: 1, products: [] },
    ]);
    expect(d.parties).toMatchObject({ total: 8, with_name: 6, with_tel: 4, with_mailto: 2, distinct_tel: 4 });
    expect(d.parties.per_vcon).toEqual({
      avg: 2,
      min: 1,
      max: 3,
      distribution: [
        { parties: 1, vcons: 1 },
        { parties: 2, vcons: 2 },
        { parties: 3, vcons: 1 },
      ],
    });
  });

  it('content honours start_date and end_date', async () => {
    const recent = await ok(`/analytics/content?start_date=${dayOf(seed.dates[1])}`);
    expect(recent.conversations.vcons).toBe(2);
    expect(recent.dialogs.total).toBe(5);
    expect(recent.range.start_date).toBe(`${dayOf(seed.dates[1])}T00:00:00.000Z`);
    const old = await ok(`/analytics/content?end_date=${dayOf(seed.dates[2])}`);
    expect(old.conversations.vcons).toBe(2); // a3 (that whole day) and a4
    expect(old.dialogs.by_type).toEqual([expect.objectContaining({ type: 'recording', count: 1, total_duration_s: 30 })]);
    const none = await ok('/analytics/content?start_date=2000-01-01&end_date=2000-12-31');
    expect(none.conversations.vcons).toBe(0);
    expect(none.parties.per_vcon.avg).toBeNull();
  });

  it('tags: keys, values and coverage', async () => {
    const d = await ok('/analytics/tags');
    expect(d).toMatchObject({ total_vcons: 4, tagged_vcons: 3, coverage: 0.75, tags: 4, distinct_keys: 2, distinct_pairs: 3 });
    expect(d.keys[0]).toEqual({
      key: 'status',
      vcons: 3,
      coverage: 0.75,
      distinct_values: 2,
      top_values: [
        { value: 'open', count: 2 },
        { value: 'closed', count: 1 },
      ],
    });
    expect(d.keys[1]).toMatchObject({ key: 'priority', vcons: 1, top_values: [{ value: 'high', count: 1 }] });
    expect(d.top_pairs[0]).toEqual({ key: 'status', value: 'open', count: 2 });
    const one = await ok('/analytics/tags?limit=1&values_limit=1');
    expect(one.keys).toHaveLength(1);
    expect(one.keys[0].top_values).toEqual([{ value: 'open', count: 2 }]);
  });

  it('attachments: purposes, legacy types, encodings and sizes', async () => {
    const d = await ok('/analytics/attachments');
    expect(d).toMatchObject({ total: 5, vcons_with_attachments: 3, coverage: 0.75, tags_attachments: 3, without_purpose_or_type: 0 });
    expect(d.purposes).toEqual([
      expect.objectContaining({ purpose: 'tags', count: 3, vcons: 3 }),
      expect.objectContaining({ purpose: 'invoice', count: 1, vcons: 1, bytes: '{"total":12}'.length }),
    ]);
    expect(d.types).toEqual([expect.objectContaining({ type: 'legacy-note', count: 1, bytes: 3 })]);
    expect(d.encodings).toEqual([expect.objectContaining({ encoding: 'json', count: 4 }), expect.objectContaining({ encoding: 'none', count: 1 })]);
    expect(d.sizes.with_body).toBe(5);
    expect(d.sizes.bytes).toBe(d.purposes.reduce((n: number, p: any) => n + p.bytes, 0) + 3);
  });

  it('GET /analytics gathers every section with schema totals', async () => {
    const d = await ok('/analytics?granularity=week&months_back=2&start_date=2019-01-01&end_date=2019-12-31&limit=1');
    expect(d.summary).toMatchObject({ vcons: 4, parties: 8, dialogs: 6, analyses: 3, attachments: 5, tags: 4, tagged_vcons: 3, stored_24h: 4 });
    expect(d.growth.granularity).toBe('week');
    expect(d.content.conversations.vcons).toBe(1);
    expect(d.tags.keys).toHaveLength(1);
    expect(d.attachments.total).toBe(5);
    expect(d.note).toMatch(/projection is an estimate/);
  });

  it.each([
    ["/analytics/content?start_date=2024-01-01';drop table vcons;--", 'start_date'],
    ['/analytics/content?end_date=2024-02-30', 'end_date'],
    ['/analytics/content?start_date=yesterday', 'start_date'],
    ['/analytics/content?start_date=2024-05-01&end_date=2024-04-01', 'end_date'],
    ['/analytics?end_date=1 or 1=1', 'end_date'],
    ['/analytics/growth?months_back=1;drop table vcons', 'months_back'],
    ['/analytics/growth?months_back=0', 'months_back'],
    ['/analytics/growth?months_back=61', 'months_back'],
    ['/analytics/growth?granularity=year', 'granularity'],
    ["/analytics/growth?granularity=day'--", 'granularity'],
    ['/analytics/tags?limit=-1', 'limit'],
    ['/analytics/tags?values_limit=abc', 'values_limit'],
  ])('hostile or invalid %s → 400 naming the parameter, nothing changed', async (path, parameter) => {
    const r = await s.api(path);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ success: false, error: 'invalid_parameter' });
    expect(r.body.message).toMatch(new RegExp(`^${parameter}: `));
    expect((await ok('/analytics/content')).conversations.vcons).toBe(4);
  });
});
