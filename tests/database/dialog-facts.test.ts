// Dialog facts one row per vCon (arrays in dialog order): analytics must answer exactly what the
// plain one-row-per-dialog queries answer, on the real fixtures and on documents with missing
// fields. The oracle is a scratch schema with a row per dialog, written from the documents by the
// test itself. Real PostgreSQL, a schema per group.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { randomUUID } from 'node:crypto';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSql, type Sql } from '../../src/db/client.js';
import { createAnalyticsRepo, type DateRange } from '../../src/db/analytics-repo.js';
import { migrate } from '../../src/db/migrate.js';
import { deriveRows } from '../../src/domain/derive.js';
import { classifyVcon, type JsonObject } from '../../src/domain/vcon.js';
import { internalCtx } from '../../src/services/context.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { loadFixtures } from '../helpers/fixtures.js';

/** Dialogs with every field missing or null in turn, odd bodies, and vCons with none. */
function edgeCases(): JsonObject[] {
  const at = (d: string) => ({ vcon: '0.3.0', created_at: d, parties: [{ name: 'P' }, { name: 'Q' }] });
  return [
    {
      ...at('2024-01-10T00:00:00Z'),
      dialog: [
        { type: 'recording', parties: [0, 1], url: 'https://example.com/a.wav' },
        { type: 'text', parties: [0], body: 'naïve café ☕', encoding: 'none', mimetype: 'text/plain' },
        { type: 'text', parties: [1], body: { note: 'an object body' }, encoding: 'json', duration: 0 },
        { type: 'recording', parties: [0, 1], duration: 12.25, mediatype: 'audio/x-wav', body: '', encoding: 'base64url' },
        { type: 'incomplete', parties: [0], disposition: 'no-answer', duration: 3 },
      ],
    },
    { ...at('2024-02-10T00:00:00Z'), dialog: [] },
    { ...at('2024-03-10T00:00:00Z') },
    {
      ...at('2024-04-10T00:00:00Z'),
      dialog: [
        { type: 'transfer', parties: [0, 1] },
        { type: 'recording', parties: [0], duration: 1e9, mediatype: 'audio/ogg; codecs=opus' },
      ],
    },
  ];
}

/** The documents of the test: the fixtures a create accepts as plain vCons, then the edge cases. */
function documents(): JsonObject[] {
  const out: JsonObject[] = [];
  for (const f of loadFixtures()) {
    try {
      if (classifyVcon(f.json).kind !== 'plain') continue;
    } catch {
      continue;
    }
    // Documents without a date get a fixed one: both groups must file them under the same period.
    out.push({ ...f.json, uuid: randomUUID(), created_at: f.json.created_at ?? '2023-06-01T00:00:00Z' });
  }
  return [...out, ...edgeCases().map((d) => ({ ...d, uuid: randomUUID() }))];
}

/** The oracle: the same figures from one row per dialog. */
async function dialogsBefore(sql: Sql, r: DateRange) {
  const range = sql`${r.start ? sql`and v.created_at >= ${r.start}` : sql``} ${r.end ? sql`and v.created_at < ${r.end}` : sql``}`;
  const rows = () => sql`vcon_dialogs d join vcons v on v.uuid = d.vcon_uuid`;
  return {
    by_type: await sql`
      select d.type, count(*)::float8 as count, count(distinct d.vcon_uuid)::float8 as vcons,
             count(d.duration)::float8 as with_duration, sum(d.duration)::float8 as total_duration_s,
             avg(d.duration)::float8 as avg_duration_s, min(d.duration)::float8 as min_duration_s,
             max(d.duration)::float8 as max_duration_s, coalesce(sum(d.body_bytes), 0)::float8 as bytes
      from ${rows()} where true ${range}
      group by d.type order by count desc, d.type nulls last`,
    durations: (
      await sql`
      select count(d.duration)::float8 as count, sum(d.duration)::float8 as total_s, avg(d.duration)::float8 as avg_s,
             min(d.duration)::float8 as min_s, max(d.duration)::float8 as max_s,
             percentile_cont(0.5) within group (order by d.duration)::float8 as p50_s,
             percentile_cont(0.9) within group (order by d.duration)::float8 as p90_s
      from ${rows()} where d.duration is not null ${range}`
    )[0],
    mediatypes: await sql`
      select d.mediatype as value, count(*)::float8 as count from ${rows()} where true ${range}
      group by 1 order by count desc, 1 nulls last limit 50`,
    encodings: await sql`
      select d.encoding as value, count(*)::float8 as count from ${rows()} where true ${range}
      group by 1 order by count desc, 1 nulls last`,
  };
}

const RANGES: DateRange[] = [
  {},
  { start: new Date('2024-01-01T00:00:00Z'), end: new Date('2024-04-01T00:00:00Z') },
  { end: new Date('2024-01-01T00:00:00Z') },
];

describe('dialog facts one row per vCon', () => {
  const schemas: string[] = [];
  const pools: Sql[] = [];
  const docs = documents();
  let old: Sql;
  let before: Awaited<ReturnType<typeof dialogsBefore>>[];

  // The old derivation's field readers (src/domain/derive.ts at 42acf5f), for the oracle's rows.
  const oldLabel = (v: unknown): string | null =>
    typeof v === 'string' ? (v.includes('\u0000') ? v.replaceAll('\u0000', '') : v).toWellFormed().slice(0, 200) : null;
  const oldNum = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  const oldBodyBytes = (v: unknown): number | null =>
    v === undefined || v === null ? null : Buffer.byteLength(typeof v === 'string' ? v : JSON.stringify(v));

  const pool = (schema: string) => {
    const sql = createSql({ url: databaseUrl(), schema, max: 3 });
    schemas.push(schema);
    pools.push(sql);
    return sql;
  };
  const group = async () => {
    const schema = testSchemaName('dialog_facts');
    const sql = pool(schema);
    await migrate(sql, schema, { optional: true });
    return { sql, schema };
  };

  beforeAll(async () => {
    // The oracle's schema: the documents with one dialog row each.
    const oracleSchema = testSchemaName('dialog_oracle');
    old = pool(oracleSchema);
    await old.unsafe(`create schema "${oracleSchema}"`);
    await old`create table vcons (uuid uuid primary key, doc json not null, created_at timestamptz not null, dialog_count integer not null)`;
    await old`create table vcon_dialogs (vcon_uuid uuid not null, idx integer not null, type text, duration double precision,
                mediatype text, encoding text, body_bytes integer, primary key (vcon_uuid, idx))`;
    for (const doc of docs) {
      const d = deriveRows(doc, 'plain', new Date('2023-06-01T00:00:00Z'));
      await old`insert into vcons (uuid, doc, created_at, dialog_count) values (${doc.uuid as string}, ${doc as never}, ${d.created_at}, ${d.counts.dialog})`;
      // The rows written out here, not by today's deriveRows, so a change to the derivation can't
      // move both sides of the comparison.
      const list = Array.isArray(doc.dialog) ? doc.dialog : [];
      for (const [idx, raw] of list.entries()) {
        const x = raw && typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
        await old`insert into vcon_dialogs (vcon_uuid, idx, type, duration, mediatype, encoding, body_bytes)
          values (${doc.uuid as string}, ${idx}, ${oldLabel(x.type)}, ${oldNum(x.duration)}, ${oldLabel(x.mediatype) ?? oldLabel(x.mimetype)},
                  ${oldLabel(x.encoding)}, ${oldBodyBytes(x.body)})`;
      }
    }
    before = [];
    for (const r of RANGES) before.push(await dialogsBefore(old, r));
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    const admin = adminSql();
    for (const s of schemas) await admin.unsafe(`drop schema if exists "${s}" cascade`);
    await admin.end();
  });

  test('the documents cover the edge cases: missing durations, media types and bodies, and several ranges', () => {
    expect(docs.length).toBeGreaterThan(15);
    expect(before[0].by_type.length).toBeGreaterThan(2);
    expect(before[0].mediatypes.some((m) => m.value === null)).toBe(true);
    expect(before[0].encodings.some((m) => m.value === null)).toBe(true);
    expect(before[1].durations.count).toBeGreaterThan(0);
    expect(before[2].by_type.length).toBeGreaterThan(0);
  });

  test('writes store one row per vCon with dialogs, analytics answers exactly as the oracle, and a delete takes the row along', async () => {
    const fresh = await group();
    const services = createServices(fresh.sql, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: fresh.schema, LOG_LEVEL: 'silent' }));
    await services.stop();
    const half = Math.floor(docs.length / 2);
    for (const doc of docs.slice(0, half)) await services.vcons.create(structuredClone(doc), internalCtx);
    expect(
      (
        await services.vcons.batch(
          docs.slice(half).map((d) => structuredClone(d)),
          internalCtx,
        )
      ).failed,
    ).toBe(0);
    const written = await fresh.sql<{ vcon_uuid: string; types: (string | null)[] }[]>`
      select vcon_uuid::text, types from vcon_dialogs order by vcon_uuid`;
    const [counts] = await fresh.sql<{ withDialogs: number }[]>`select count(*)::int as "withDialogs" from vcons where dialog_count > 0`;
    expect(written.length).toBe(counts.withDialogs);
    // Element i of each array is dialog i: the oracle's rows in idx order.
    const oracle = await old<{ vcon_uuid: string; types: (string | null)[] }[]>`
      select vcon_uuid::text, array_agg(type order by idx) as types from vcon_dialogs group by vcon_uuid order by vcon_uuid`;
    expect(written).toEqual(oracle);
    const repo = createAnalyticsRepo(fresh.sql);
    for (const [i, r] of RANGES.entries()) expect(await repo.dialogs(r), `range ${i}`).toEqual(before[i]);
    await services.vcons.remove(written[0].vcon_uuid, internalCtx);
    const [left] = await fresh.sql<{ n: number }[]>`select count(*)::int as n from vcon_dialogs where vcon_uuid = ${written[0].vcon_uuid}::uuid`;
    expect(left.n).toBe(0);
  });
});
