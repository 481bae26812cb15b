// Introspection on a database crowded with other schemas: the /database routes read
// the catalogs starting from this group's own relations, so their cost follows the group, not the
// database. Checked by plan (no scan of a whole catalog), by answer (only the group's tables, on
// a database holding 40 other schemas × 60 relations), and by the error a timeout gives (503
// database_timeout in the one error format, never internal_error).
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIntrospectionRepo } from '../../src/db/introspection-repo.js';
import type { Sql } from '../../src/db/client.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { seedKnown } from './seed.js';

const CROWD = 40;
/** Tables per crowd schema; each has a primary key index, so 60 relations per schema. */
const TABLES = 30;
/** The catalogs that grow with every schema of the database. */
const BIG_CATALOGS = new Set(['pg_class', 'pg_attribute', 'pg_attrdef', 'pg_index', 'pg_constraint', 'pg_depend', 'pg_type']);

let admin: Sql;
let s: TestServer;
const crowdPrefix = testSchemaName('crowd');

beforeAll(async () => {
  admin = adminSql();
  await Promise.all(
    Array.from({ length: CROWD }, (_, i) =>
      admin.unsafe(`create schema "${crowdPrefix}_${i}";
        do $$ begin
          for t in 1..${TABLES} loop
            execute format('create table %I.%I (id int primary key, v text)', '${crowdPrefix}_${i}', 't' || t);
          end loop;
        end $$`),
    ),
  );
  // The default statement timeout: what shows a read whose cost follows the crowded catalog is
  // its plan (the first test), not its time, which a loaded machine stretches.
  s = await startTestServer();
  await seedKnown(s);
}, 180_000);

afterAll(async () => {
  await s?.close();
  for (let i = 0; i < CROWD; i++) await admin.unsafe(`drop schema if exists "${crowdPrefix}_${i}" cascade`);
  await admin?.end();
}, 180_000);

/** Every plan node, depth first. */
function nodesOf(plan: unknown): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const stack = [plan];
  while (stack.length) {
    const n = stack.pop();
    if (Array.isArray(n)) stack.push(...n);
    else if (n && typeof n === 'object') {
      const o = n as Record<string, unknown>;
      if (typeof o['Node Type'] === 'string') out.push(o);
      stack.push(...Object.values(o));
    }
  }
  return out;
}

describe('introspection on a database crowded with other schemas', () => {
  it("reads no big catalog whole: every query starts from the group's own relations", async () => {
    const captured: { text: string; params: unknown[] }[] = [];
    const sql = postgres(databaseUrl(), {
      max: 1,
      onnotice: () => {},
      connection: { search_path: `"${s.schema}"` },
      debug: (_c: number, text: string, params: unknown[]) => captured.push({ text, params }),
    }) as unknown as Sql;
    try {
      const repo = createIntrospectionRepo(sql, s.schema);
      await Promise.all([repo.tables(), repo.views(), repo.columns(), repo.indexes(), repo.constraints(), repo.tableStats(), repo.indexStats()]);
      const queries = captured.filter((q) => /pg_class/.test(q.text));
      expect(queries.length).toBe(7);
      for (const q of queries) {
        const [row] = await sql.unsafe(`explain (format json) ${q.text}`, q.params as any[]);
        const wholeScans = nodesOf(row['QUERY PLAN'])
          .filter((n) => n['Node Type'] === 'Seq Scan' && BIG_CATALOGS.has(String(n['Relation Name'])))
          .map((n) => n['Relation Name']);
        expect(wholeScans, q.text).toEqual([]);
      }
    } finally {
      await sql.end();
    }
  });

  it("/database/shape, /size, /stats and /health answer with this group's tables only", async () => {
    for (const path of ['/database/shape', '/database/size', '/database/stats', '/database/health']) {
      const r = await s.api(path);
      expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(200);
      expect(JSON.stringify(r.body)).not.toContain(crowdPrefix);
    }
    const shape = (await s.api('/database/shape')).body.data;
    expect(shape.tables.map((t: any) => t.name)).toContain('vcons');
    expect(shape.tables.every((t: any) => !/^t\d+$/.test(t.name))).toBe(true);
  });

  it('a read that gives up at the statement timeout answers 503 database_timeout in the one error format', async () => {
    // An instance of the group with a short statement timeout, and an open transaction holding the
    // group's vcons table exclusively: sizing it must wait, and the wait ends at the timeout.
    const short = await startTestServer({ SUPABASE_DB_SCHEMA: s.schema, STATEMENT_TIMEOUT_MS: '2000' });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const tx = admin.begin(async (t) => {
      await t.unsafe(`lock table "${s.schema}".vcons in access exclusive mode`);
      locked();
      await held;
    });
    try {
      await isLocked;
      const r = await short.api('/database/size');
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ success: false, error: 'database_timeout', message: expect.stringMatching(/statement timeout/) });
      expect(typeof r.body.request_id).toBe('string');
      release();
      await tx;
      expect((await short.api('/database/size')).status).toBe(200);
    } finally {
      release();
      await tx;
      await short.close();
    }
  });
});
