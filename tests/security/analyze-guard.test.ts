// The analyze guard judges a statement on PostgreSQL's parse tree before PostgreSQL sees it: the
// statements of the review's findings (attribute notation, a regclass cast folded at plan time, a
// CASE that fails only when a condition holds, a gigabyte repeat) are refused without an analyze
// connection being opened, so the planner never evaluates them. And analyze at its role's
// connection limit is 503 database_busy, not the caller's 400.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminSql, createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { startTestServer } from '../helpers/server.js';
import { createIntrospectionRepo } from '../../src/db/introspection-repo.js';
import { createAnalyzeRepo } from '../../src/db/analyze-repo.js';
import { createDatabaseService } from '../../src/services/database-service.js';
import { internalCtx } from '../../src/services/context.js';
import { ValidationError } from '../../src/domain/errors.js';
import { checkPlan, loadParser } from '../../src/services/analyze-guard.js';
import { CAST_TYPES } from '../../src/services/analyze-size.js';

let mine: TestSchema;
let other: TestSchema;
let oid: number;
const analyzer = () => createAnalyzeRepo({ url: databaseUrl(), schema: mine.schema, applicationName: `guard-${mine.schema}` });
let service: ReturnType<typeof createDatabaseService>;
let repo: ReturnType<typeof analyzer>;

beforeAll(async () => {
  [mine, other] = await Promise.all([createTestSchema('guard_a'), createTestSchema('guard_b')]);
  const [r] = await other.sql<{ oid: number }[]>`select 'vcons'::regclass::oid::int as oid`;
  oid = r.oid;
  repo = analyzer();
  service = createDatabaseService({ repo: createIntrospectionRepo(mine.sql, mine.schema), analyzer: repo, analyzeTimeoutMs: 5_000 });
}, 60_000);
afterAll(async () => {
  await Promise.all([mine?.drop(), other?.drop()]);
});

/** Refused with a 400 naming `query`, and no analyze connection was opened for it. */
async function refusedUnplanned(query: string): Promise<string> {
  const before = repo.opened;
  const err = await service.analyze({ query, analyze: false }, internalCtx).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, query).toBeInstanceOf(ValidationError);
  expect((err as ValidationError).details?.[0]?.path).toBe('query');
  expect(repo.opened, `an analyze connection was opened for: ${query}`).toBe(before);
  return (err as Error).message;
}

describe('the findings are refused before any analyze connection is opened', () => {
  it("the webhook tables, whose URLs may hold the operator's credentials and tokens, by any name and in the plan", async () => {
    for (const query of [
      "select 1 / (case when position('token=' in url) > 0 then 0 else 1 end) from webhook_endpoint",
      'select endpoint from "webhook_delivery"',
      `select url from "${mine.schema}".WEBHOOK_ENDPOINT`,
      'select uuid from vcons where exists (select 1 from webhook_delivery d where d.uuid = vcons.uuid)',
    ])
      expect(await refusedUnplanned(query)).toMatch(/holds the operator's webhook configuration/);
    // What PostgreSQL resolved is judged too (a view over them, were one there).
    await loadParser();
    expect(() => checkPlan([{ Plan: { 'Node Type': 'Seq Scan', 'Relation Name': 'webhook_endpoint', Schema: mine.schema } }], mine.schema)).toThrow(
      /holds the operator's webhook configuration/,
    );
    // The change log stays readable.
    const plan = await service.analyze({ query: 'select count(*) from change_log', analyze: true }, internalCtx);
    expect(plan).toMatchObject({ analyzed: true });
  });

  it('attribute notation calling a statistics function, with or without a cast', async () => {
    expect(await refusedUnplanned(`select (${oid}::oid).pg_stat_get_live_tuples`)).toMatch(/type oid is not allowed/);
    expect(await refusedUnplanned(`select (${oid}).pg_stat_get_live_tuples`)).toMatch(
      /\.pg_stat_get_live_tuples is not allowed in analyze: .*attribute notation/,
    );
    expect(await refusedUnplanned(`select x.pg_stat_get_tuples_inserted from (select ${oid} as o) x`)).toMatch(/attribute notation/);
  });

  it('a text-to-regclass cast that the planner would fold, and its statistics', async () => {
    expect(await refusedUnplanned(`select ('live' || pg_stat_get_live_tuples(${oid})::text)::regclass`)).toMatch(
      /pg_stat_get_live_tuples\(\) is not allowed/,
    );
    expect(await refusedUnplanned(`select ('v' || (${oid})::text)::regclass`)).toMatch(/type regclass is not allowed/);
    expect(await refusedUnplanned("select ('x' || version())::int")).toMatch(/function version\(\) is not allowed/);
  });

  it('a CASE that fails a cast only when a condition holds (one bit per request)', async () => {
    expect(await refusedUnplanned(`select case when pg_stat_get_live_tuples(${oid}) > 0 then 'x'::int else 0 end`)).toMatch(
      /pg_stat_get_live_tuples/,
    );
    expect(await refusedUnplanned(`select case when (select count(*) from "${other.schema}".vcons) > 0 then 1 / 0 end`)).toMatch(
      /outside this group's schema/,
    );
  });

  it('repeat of a gigabyte, and format padding to one', async () => {
    expect(await refusedUnplanned("select length(repeat('x', 1000000000))")).toMatch(/function repeat\(\) is not allowed/);
    expect(await refusedUnplanned("select length(format('%1000000000s', 'x'))")).toMatch(/function format\(\) is not allowed/);
  });

  // Allowlisted functions the planner folds over constants: one nested replace() held ~270 MB and
  // 5.9 s of the shared server while being planned; `v || v` through subqueries the planner pulls
  // up and substitutes doubles per level. Both are bounded on the parse tree.
  const x = (n: number) => 'x'.repeat(n);
  it('nested replace() over constants, and || doubling through pulled-up subqueries', async () => {
    const nested = `select length(replace(replace(replace(replace('${x(78)}', 'x', '${x(42)}'), 'x', '${x(47)}'), 'x', '${x(30)}'), 'x', '${x(20)}'))`;
    expect(await refusedUnplanned(nested)).toMatch(
      /^function replace\(\) over constants could produce up to \d+ bytes .*analyze allows 1048576 bytes/,
    );
    let doubling = `select '${x(100)}' as v0`;
    for (let i = 1; i <= 12; i++) doubling = `select v${i - 1} || v${i - 1} || v${i - 1} || v${i - 1} as v${i} from (${doubling}) s${i}`;
    expect(await refusedUnplanned(`select length(v12) from (${doubling}) s`)).toMatch(/^operator \|\| over constants could produce/);
    expect(await refusedUnplanned(`select * from regexp_replace('${x(4000)}', 'x', '${x(300)}', 'g') as f`)).toMatch(/function regexp_replace\(\)/);
  });

  it('the same through REST: 400 validation_failed naming query, nothing planned', async () => {
    const server = await startTestServer();
    try {
      const query = `select replace(replace(replace('${x(200)}', 'x', '${x(60)}'), 'x', '${x(60)}'), 'x', '${x(60)}')`;
      const r = await server.api('/database/analyze', { method: 'POST', json: { query } });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error).toBe('validation_failed');
      expect(r.body.details[0].path).toBe('query');
      expect(r.body.message).toMatch(/function replace\(\) over constants/);
    } finally {
      await server.close();
    }
  });

  it('constants of ordinary size, and growth over table columns, still reach PostgreSQL', async () => {
    for (const query of [
      `select replace(v.subject, 'a', '${x(1000)}') from vcons v where v.subject like '%${x(100)}%'`,
      `with t(w) as (select '${x(1000)}'::text) select length(w || w || w || w), upper(w), jsonb_build_object('w', w) from t`,
      `select v from (values ('${x(500)}'), ('y')) as l(v) order by 1`,
    ]) {
      const before = repo.opened;
      const r = await service.analyze({ query, analyze: true }, internalCtx);
      expect(r.analyzed, query).toBe(true);
      expect(repo.opened).toBe(before + 1);
    }
  });

  it('a cast to every type of the one cast table (the guard allows it, the size bound sizes it) reaches PostgreSQL', async () => {
    const before = repo.opened;
    for (const type of CAST_TYPES.keys()) {
      const r = await service.analyze({ query: `select null::${type} as v`, analyze: true }, internalCtx);
      expect(r.analyzed, type).toBe(true);
    }
    expect(repo.opened).toBe(before + CAST_TYPES.size);
    // A type not in it is refused by name.
    expect(await refusedUnplanned(`select '1'::money`)).toMatch(/type money is not allowed/);
  });

  it("the group's own statements still reach PostgreSQL, once each", async () => {
    const before = repo.opened;
    const r = await service.analyze({ query: 'select v.subject, count(*) from vcons v group by 1', analyze: true }, internalCtx);
    expect(r.analyzed).toBe(true);
    expect(repo.opened).toBe(before + 1);
  });
});

describe('analyze at its role connection limit', () => {
  const role = `guard_busy_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  beforeAll(async () => {
    const admin = adminSql();
    try {
      await admin.unsafe(`create role "${role}" login password '${password}' connection limit 0`);
    } finally {
      await admin.end();
    }
  });
  afterAll(async () => {
    const admin = adminSql();
    try {
      await admin.unsafe(`drop role if exists "${role}"`);
    } finally {
      await admin.end();
    }
  });

  it('answers 503 database_busy with Retry-After, not a 400', async () => {
    const server = await startTestServer({ ANALYZE_DATABASE_USER: role, ANALYZE_DATABASE_PASSWORD: password });
    try {
      const r = await server.api('/database/analyze', { method: 'POST', json: { query: 'select 1' } });
      expect(r.status, JSON.stringify(r.body)).toBe(503);
      expect(r.body.error).toBe('database_busy');
      expect(r.headers.get('retry-after')).toBe('1');
    } finally {
      await server.close();
    }
  });
});
