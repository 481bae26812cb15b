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
