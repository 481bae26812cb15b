// POST /database/analyze with analyze=true executes the statement. Without per-group roles the
// instance's connection could read another schema, so the plan is checked before anything runs:
// an error raised while executing (a cast of the other group's text) must never carry that text.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const SECRET = `secretsubject${Date.now()}`;
let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  [a, b] = await Promise.all([startTestServer({ EMBEDDINGS_PROVIDER: 'hashing' }), startTestServer({ EMBEDDINGS_PROVIDER: 'hashing' })]);
  expect((await b.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: SECRET, parties: [] } })).status).toBe(201);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

describe("analyze cannot exfiltrate another group's data", () => {
  it.each([
    ['a cast error of a scalar subquery', (s: string) => `select (select string_agg(subject, ',') from "${s}".vcons)::int`],
    ['a cast error in a CTE', (s: string) => `with x as (select subject::int as n from "${s}".vcons) select * from x`],
    [
      "a division driven by the other group's rows",
      (s: string) => `select 1 / (select count(*) - count(*) from "${s}".vcons where subject like '${SECRET}%')`,
    ],
  ])('%s is refused before it runs', async (_name, query) => {
    for (const analyze of [true, false]) {
      const r = await a.api('/database/analyze', { method: 'POST', json: { query: query(b.schema), analyze } });
      expect(r.status).toBe(400);
      expect(r.body.message).toContain(`${b.schema}.vcons`);
      expect(r.body.message).toMatch(/outside this group's schema/);
      expect(JSON.stringify(r.body)).not.toContain(`${SECRET},`);
      expect(JSON.stringify(r.body)).not.toMatch(/invalid input syntax|division by zero/);
    }
  });

  it.each([
    [
      'ts_stat running SQL text',
      (s: string) => `select (select string_agg(word, ',') from ts_stat('select tsv from "${s}".vcon_search'))::int`,
      'ts_stat',
    ],
    [
      'ts_rewrite running SQL text',
      (s: string) => `select ts_rewrite('a'::tsquery, 'select to_tsquery(subject), to_tsquery(subject) from "${s}".vcons')::text::int`,
      'ts_rewrite',
    ],
    ['a relation size by name', (s: string) => `select (pg_relation_size('"${s}".vcons')::text || 'x')::int`, 'pg_relation_size'],
    [
      'relation statistics by name',
      (s: string) => `select (pg_stat_get_live_tuples('"${s}".vcons'::regclass)::text || 'x')::int`,
      'pg_stat_get_live_tuples',
    ],
  ])('%s is refused', async (_name, query, fn) => {
    const r = await a.api('/database/analyze', { method: 'POST', json: { query: query(b.schema), analyze: true } });
    expect(r.status).toBe(400);
    expect(r.body.message).toContain(`${fn}() is not allowed`);
    expect(JSON.stringify(r.body)).not.toMatch(/secretsubject\d|invalid input syntax/);
  });

  it("the same statements on the group's own schema still run", async () => {
    const r = await b.api('/database/analyze', {
      method: 'POST',
      json: { query: "select (select string_agg(subject, ',') from vcons)::int", analyze: true },
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/invalid input syntax/);
    const ok = await b.api('/database/analyze', { method: 'POST', json: { query: 'select count(*) from vcons', analyze: true } });
    expect(ok.status).toBe(200);
    expect(ok.body.data.plan[0].Plan['Actual Rows']).toBe(1);
  });
});
