// The write path against real PostgreSQL, a throwaway schema: the stored document text is exactly
// the accepted document's JSON (docs/api.md: key order, every character), whichever write stored it (a
// create, a batch: each document its own parameter, a replacement); and a delete removes the derived
// rows (no foreign keys on them since migration 0006; a delete trigger since 0007), also those of a
// write that commits while the delete waits for it, and also when an operator deletes in SQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSql } from '../../src/db/client.js';
import { internalCtx } from '../../src/services/context.js';
import { deriveRows, MAX_LABEL_CHARS } from '../../src/domain/derive.js';
import { arrayLiteral } from '../../src/db/vcon-repo.js';
import type { JsonObject } from '../../src/domain/vcon.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';

let t: TestSchema;
let services: ReturnType<typeof createServices>;
beforeAll(async () => {
  t = await createTestSchema('write_path');
  services = createServices(t.sql, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
  await services.stop();
});
afterAll(async () => {
  await services?.stop();
  await t?.drop();
});

/** A plain vCon with text that a parameter or an array literal could mangle, keys in no sorted order. */
const tricky = (i: number) => ({
  zeta: { b: 1, a: [2, { y: null, x: 'tab\there' }] },
  uuid: randomUUID(),
  vcon: '0.3.0',
  created_at: '2025-03-01T12:00:00.000Z',
  subject: `$${i} {"quoted"} back\\slash 'single' \u2028 ∑ 注文 😀 ,(){}[]`,
  parties: [{ name: 'Zoë "Z" O\'Neil', tel: '+1555000' + i }],
  dialog: [{ type: 'text', parties: [0], encoding: 'none', body: 'NULL null \\N \\x00 "' + i + '"' }],
  attachments: [{ purpose: 'tags', encoding: 'json', body: [`k:v${i}`, 'a:b:c'] }],
  number: 1e21,
  negative: -0.000001,
  empty: {},
});

/** A JWS general-serialization form: stored opaque, as sent. */
const signed = () => ({
  payload: Buffer.from(JSON.stringify({ subject: 'x' })).toString('base64url'),
  signatures: [{ header: { uuid: randomUUID() }, protected: 'eyJhbGciOiJSUzI1NiJ9', signature: 'c2ln' }],
});

describe('stored document text', () => {
  it('is JSON.stringify of the accepted document for a batch, a create and a replacement', async () => {
    const plain = Array.from({ length: 5 }, (_, i) => tricky(i));
    const docs = [...plain, signed()];
    const r = await services.vcons.batch(structuredClone(docs), internalCtx);
    expect(r.failed, JSON.stringify(r.results)).toBe(0);
    for (const [i, doc] of docs.entries()) {
      expect((await services.vcons.getStored(r.results[i].uuid as string))?.toString()).toBe(JSON.stringify(doc));
    }
    const one = tricky(7);
    const c = await services.vcons.create(structuredClone(one), internalCtx);
    expect((await services.vcons.getStored(c.uuid))?.toString()).toBe(JSON.stringify(one));
    // A replacement in a batch: the service adds updated_at at the end, the rest as sent.
    const again = { ...plain[0], subject: 'replaced $1' };
    const r2 = await services.vcons.batch([structuredClone(again), tricky(9)], internalCtx);
    expect(r2.results.map((x) => x.status)).toEqual([200, 201]);
    const text = (await services.vcons.getStored(plain[0].uuid))?.toString();
    const stored = JSON.parse(text as string);
    expect(text).toBe(JSON.stringify({ ...again, updated_at: stored.updated_at }));
    const [row] = await t.sql<{ subject: string; created_at: Date; parties_count: number; tags_sig: string | null }[]>`
      select subject, created_at, parties_count, tags_sig from vcons where uuid = ${plain[1].uuid}::uuid`;
    expect(row).toMatchObject({ subject: plain[1].subject, created_at: new Date('2025-03-01T12:00:00.000Z'), parties_count: 1 });
    expect(row.tags_sig).toMatch(/^[0-9a-f]{40}$/);
  });
});

const DERIVED = ['vcon_parties', 'vcon_dialogs', 'vcon_analyses', 'vcon_attachments', 'vcon_tags'];

const doc = () => ({
  uuid: randomUUID(),
  vcon: '0.3.0',
  subject: 'to delete',
  parties: [{ name: 'A' }, { name: 'B' }],
  dialog: [{ type: 'text', parties: [0], encoding: 'none', body: 'hi' }],
  analysis: [{ type: 'summary', vendor: 'v', body: 'x' }],
  attachments: [{ purpose: 'tags', encoding: 'json', body: ['k:v'] }],
});

const rowsOf = async (uuid: string) => {
  const out: Record<string, number> = {};
  for (const table of DERIVED) {
    const [r] = await t.sql<{ n: number }[]>`select count(*)::int as n from ${t.sql(table)} where vcon_uuid = ${uuid}::uuid`;
    out[table] = r.n;
  }
  return out;
};
const none = Object.fromEntries(DERIVED.map((d) => [d, 0]));

/** Every stored row of a vCon but its uuid: the document's columns, each derived table's rows, its queue row. */
const storedRows = async (uuid: string) => {
  const [v] = await t.sql`
    select doc::text, kind, subject, created_at, updated_at, parties_count, dialog_count, analysis_count,
           attachments_count, tags_sig, tags_updated_at is not null as tagged
    from vcons where uuid = ${uuid}::uuid`;
  const out: Record<string, unknown> = { vcon: v && { ...v, doc: JSON.parse(v.doc as string) } };
  for (const table of DERIVED) {
    out[table] = (await t.sql`select to_jsonb(x) - 'vcon_uuid' as r from ${t.sql(table)} x where vcon_uuid = ${uuid}::uuid`)
      .map((r) => JSON.stringify(r.r))
      .sort();
  }
  const [q] = await t.sql`select count(*)::int as n from index_queue where vcon_uuid = ${uuid}::uuid`;
  out.queued = q.n;
  return out;
};

describe('a single create and a batch (one insert statement for both)', () => {
  it('store the same rows for the same document, with tags or none, dialogs or none, plain or signed', async () => {
    const bare = { vcon: '0.3.0', created_at: '2025-03-01T12:00:00.000Z', subject: 'bare' };
    const rich = { ...tricky(3), analysis: [{ type: 'summary', vendor: 'v', product: 'p', schema: 's', encoding: 'json', body: '{"a":1}' }] };
    const twoTags = { ...tricky(4), attachments: [{ purpose: 'tags', encoding: 'json', body: ['b:2', 'a:1', 'c:3'] }] };
    for (const make of [() => ({ ...rich, uuid: randomUUID() }), () => ({ ...twoTags, uuid: randomUUID() }), () => bare, signed]) {
      const c = await services.vcons.create(make(), internalCtx);
      expect(c.created).toBe(true);
      // The same document in a batch of two, under another uuid.
      const r = await services.vcons.batch([make(), doc()], internalCtx);
      expect(r.created, JSON.stringify(r.results)).toBe(2);
      const a = await storedRows(c.uuid);
      const b = await storedRows(r.results[0].uuid as string);
      // The uuids differ (in the document, or in a signed form's header), and a signed form's
      // created_at is its write's clock: nothing else may.
      for (const x of [a, b]) {
        const v = x.vcon as { doc: JsonObject; created_at: Date };
        if ('payload' in v.doc) {
          (v.doc.signatures as { header: JsonObject }[])[0].header.uuid = 'x';
          v.created_at = new Date(0);
        } else v.doc.uuid = 'x';
      }
      expect(a).toEqual(b);
      expect(a.queued).toBe(1);
    }
    // Tag signatures are the stored sha1 of the sorted tags (a replacement compares them).
    const sig = (await storedRows((await services.vcons.create(structuredClone({ ...twoTags, uuid: randomUUID() }), internalCtx)).uuid)).vcon as {
      tags_sig: string;
    };
    const { createHash } = await import('node:crypto');
    const sorted = [
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
      { key: 'c', value: '3' },
    ];
    expect(sig.tags_sig).toBe(createHash('sha1').update(JSON.stringify(sorted)).digest('hex'));
  });

  it('inserts nothing when the uuid exists: the create replaces it, its derived rows not doubled', async () => {
    const d = doc();
    expect((await services.vcons.create(structuredClone(d), internalCtx)).created).toBe(true);
    const before = await rowsOf(d.uuid);
    expect((await services.vcons.create({ ...structuredClone(d), subject: 'again' }, internalCtx)).created).toBe(false);
    expect(await rowsOf(d.uuid)).toEqual(before);
    expect(before).toEqual({ vcon_parties: 2, vcon_dialogs: 1, vcon_analyses: 1, vcon_attachments: 1, vcon_tags: 1 });
  });
});

describe('prepared statements of the write path', () => {
  it('are one insert per connection whatever the batch sizes (rows as arrays read by unnest)', async () => {
    const one = createSql({ url: databaseUrl(), schema: t.schema, max: 1 });
    const svc = createServices(one, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
    try {
      await svc.stop();
      for (let n = 1; n <= 20; n++) {
        const r = await svc.vcons.batch(
          Array.from({ length: n }, () => doc()),
          internalCtx,
        );
        expect(r.created).toBe(n);
      }
      // A full batch goes in chunks of 32 (the last one 4): no statement of 64 or 128 rows.
      for (const n of [100, 65])
        expect(
          (
            await svc.vcons.batch(
              Array.from({ length: n }, () => doc()),
              internalCtx,
            )
          ).created,
        ).toBe(n);
      // Sizes 1 to 20, 32 and 4 (the chunks of 100 and 65): one statement text for all of them.
      const [{ n }] = await one<{ n: number }[]>`
        select count(*)::int as n from pg_prepared_statements
        where statement like '%insert into vcons (%' and statement not like '%pg_prepared_statements%'`;
      expect(n).toBe(1);
    } finally {
      await svc.stop();
      await one.end();
    }
  });
});

const countOf = async (table: string, uuids: string[]) => {
  const [r] = await t.sql<
    { n: number }[]
  >`select count(*)::int as n from ${t.sql(table)} where ${t.sql(table === 'vcons' ? 'uuid' : 'vcon_uuid')} = any(${uuids}::uuid[])`;
  return r.n;
};

describe('a batch written in chunks (statements pipelined on the transaction)', () => {
  it('stores every new item of a full batch with its derived and queue rows, replaces the existing ones, refuses the invalid', async () => {
    const existing = [doc(), doc()];
    await services.vcons.batch(structuredClone(existing), internalCtx);
    const items: unknown[] = Array.from({ length: 100 }, () => doc());
    // Existing uuids in the first and the last chunk, invalid items in between.
    items[3] = { ...existing[0], subject: 'replaced' };
    items[99] = { ...existing[1], subject: 'replaced' };
    items[40] = { uuid: 'not-a-uuid' };
    items[70] = { vcon: '0.3.0', parties: 'not an array' };
    const r = await services.vcons.batch(items, internalCtx);
    expect([r.total, r.created, r.updated, r.failed]).toEqual([100, 96, 2, 2]);
    expect(r.results.map((x) => x.status)).toEqual(items.map((_, i) => (i === 3 || i === 99 ? 200 : i === 40 || i === 70 ? 400 : 201)));
    const stored = r.results.filter((x) => x.status !== 400).map((x) => x.uuid as string);
    expect(await countOf('vcons', stored)).toBe(98);
    expect(await countOf('index_queue', stored)).toBe(98);
    // Each stored vCon has its two parties, one dialog row, one analysis and one tag (doc()).
    expect(await countOf('vcon_parties', stored)).toBe(196);
    expect(await countOf('vcon_dialogs', stored)).toBe(98);
    expect(await countOf('vcon_analyses', stored)).toBe(98);
    expect(await countOf('vcon_tags', stored)).toBe(98);
    expect(JSON.parse((await services.vcons.getStored(existing[1].uuid))!.toString()).subject).toBe('replaced');
  });

  it('runs beforeCreate hooks before its transaction takes a connection (a hook may wait on anything, the pool too)', async () => {
    const one = createSql({ url: databaseUrl(), schema: t.schema, max: 1 });
    const seen: string[] = [];
    const plugin = {
      name: 'pool-reader',
      version: '1',
      hooks: {
        // With the only connection held by the batch's transaction, this query would never run.
        async beforeCreate(vcon: JsonObject) {
          await one`select 1`;
          seen.push(vcon.uuid as string);
        },
      },
    };
    const svc = createServices(one, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }), [plugin]);
    try {
      await svc.stop();
      const items = Array.from({ length: 70 }, () => doc());
      expect((await svc.vcons.batch(items, internalCtx)).created).toBe(70);
      expect(seen).toEqual(items.map((d) => d.uuid));
    } finally {
      await svc.stop();
      await one.end();
    }
  });

  it('is atomic: a statement failing in a later chunk leaves nothing of the earlier chunks, and the pool goes on', async () => {
    // A tag the database refuses (as a constraint or a lost connection would fail a statement).
    await t.sql`create function refuse_tag() returns trigger language plpgsql as $$ begin raise exception 'tag refused'; end $$`;
    await t.sql`create trigger refuse_tag before insert on vcon_tags for each row when (new.key = 'refused') execute function refuse_tag()`;
    try {
      const items = Array.from({ length: 100 }, () => doc());
      items[80].attachments = [{ purpose: 'tags', encoding: 'json', body: ['refused:yes'] }];
      await expect(services.vcons.batch(structuredClone(items), internalCtx)).rejects.toThrow(/tag refused/);
      const uuids = items.map((d) => d.uuid);
      for (const table of ['vcons', 'index_queue', ...DERIVED]) expect(await countOf(table, uuids), table).toBe(0);
      // The same documents without the refused tag: all stored, on the same pool.
      items[80].attachments = [];
      expect((await services.vcons.batch(items, internalCtx)).created).toBe(100);
    } finally {
      await t.sql`drop trigger refuse_tag on vcon_tags`;
      await t.sql`drop function refuse_tag()`;
    }
  });
});

describe('dialog facts', () => {
  it('go as array literals and are stored exactly as derived, whatever an element holds', async () => {
    const odd = ['a"b', 'back\\slash', 'comma,brace{}', ' spaced ', '', 'NULL', 'null', 'naïve ☕', 'plain/type+x.y_z:1;2-3'];
    // Array literals read back as the arrays they were made of, numbers included (read as JSON:
    // postgres.js reads a null element of a text[] as the string NULL).
    const [{ texts, numbers }] = await t.sql`
      select to_json(${arrayLiteral([...odd, null])}::text[]) as texts, to_json(${arrayLiteral([1e21, 0.1, -3, null, 12.25])}::float8[]) as numbers`;
    expect(texts).toEqual([...odd, null]);
    expect(numbers).toEqual([1e21, 0.1, -3, null, 12.25]);
    // Through a write: a media type's parameters may hold any text.
    const d = {
      uuid: randomUUID(),
      vcon: '0.3.0',
      parties: [{ name: 'A' }],
      dialog: odd.map((s, i) => ({
        type: i % 2 ? 'text' : 'recording',
        parties: [0],
        mediatype: i === 0 ? 'audio/x-wav' : `text/plain;${s}`,
        ...(i % 3 ? { encoding: 'none', body: 'body' } : {}),
        duration: [1e9, 0.1, 3, 0, 12.25][i % 5],
      })),
    };
    const r = await services.vcons.batch([structuredClone(d)], internalCtx);
    expect(r.created, JSON.stringify(r.results)).toBe(1);
    const [row] = await t.sql`
      select to_json(types) as types, to_json(durations) as durations, to_json(mediatypes) as mediatypes,
             to_json(encodings) as encodings, to_json(body_bytes) as body_bytes
      from vcon_dialogs where vcon_uuid = ${d.uuid}::uuid`;
    expect(row).toEqual(deriveRows(JSON.parse(JSON.stringify(d)), 'plain', new Date()).dialogs);
    expect(row.mediatypes).toEqual(['audio/x-wav', ...odd.slice(1).map((s) => `text/plain;${s}`)]);
  });
});

describe('labels of the derived rows', () => {
  it('are cut at their bound between characters: a surrogate pair across it made the write fail', async () => {
    const vendor = 'v'.repeat(MAX_LABEL_CHARS - 1) + '😀';
    const d = { uuid: randomUUID(), vcon: '0.3.0', parties: [{ name: 'A' }], analysis: [{ type: 'summary', vendor, encoding: 'none', body: 'x' }] };
    const r = await services.vcons.batch([structuredClone(d)], internalCtx);
    expect(r.created, JSON.stringify(r.results)).toBe(1);
    expect((await services.vcons.create({ ...structuredClone(d), uuid: randomUUID() }, internalCtx)).created).toBe(true);
    const [row] = await t.sql<{ vendor: string }[]>`select vendor from vcon_analyses where vcon_uuid = ${d.uuid}::uuid`;
    expect(row.vendor).toBe('v'.repeat(MAX_LABEL_CHARS - 1));
    // The document keeps the whole vendor.
    expect(JSON.parse((await services.vcons.getStored(d.uuid))!.toString()).analysis[0].vendor).toBe(vendor);
  });
});

describe('deleting a vCon without foreign keys on its derived rows', () => {
  it('removes every derived row of the vCon and no other', async () => {
    const [a, b] = [doc(), doc()];
    await services.vcons.batch([a, b], internalCtx);
    expect(Object.values(await rowsOf(a.uuid)).every((n) => n > 0)).toBe(true);
    expect(await services.vcons.remove(a.uuid, internalCtx)).toEqual({ uuid: a.uuid, deleted: true });
    expect(await rowsOf(a.uuid)).toEqual(none);
    expect(Object.values(await rowsOf(b.uuid)).every((n) => n > 0)).toBe(true);
    await expect(services.vcons.remove(a.uuid, internalCtx)).rejects.toMatchObject({ status: 404 });
  });

  it('waits for a write of the vCon in progress and removes the rows it committed', async () => {
    const d = doc();
    await services.vcons.create(d, internalCtx);
    // A write of the vCon holds its row lock (as a replacement or append does) and adds derived rows.
    const other = createSql({ url: databaseUrl(), schema: t.schema, max: 1 });
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: (pid: number) => void;
      const isLocked = new Promise<number>((r) => (locked = r));
      const write = other.begin(async (tx) => {
        await tx`select 1 from vcons where uuid = ${d.uuid}::uuid for no key update`;
        await tx`insert into vcon_tags (vcon_uuid, key, value) values (${d.uuid}::uuid, 'late', 'tag')`;
        await tx`insert into vcon_parties (vcon_uuid, idx, name) values (${d.uuid}::uuid, 2, 'Late')`;
        const [{ pid }] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
        locked(pid);
        await held;
      });
      const writer = await isLocked;
      const removal = services.vcons.remove(d.uuid, internalCtx);
      // The delete waits for the write's lock (the server shows it blocked); the write then commits its rows.
      await waitFor(
        async () =>
          (
            await t.sql<{ n: number }[]>`
              select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and ${writer}::int = any(pg_blocking_pids(pid))`
          )[0].n > 0,
        60_000,
        10,
        'the delete to wait for the lock',
      );
      release();
      await write;
      expect(await removal).toEqual({ uuid: d.uuid, deleted: true });
      expect(await rowsOf(d.uuid)).toEqual(none);
    } finally {
      await other.end();
    }
  });

  it('removes the derived rows of vCons an operator deletes in SQL (a retention job), and on truncate', async () => {
    const [a, b, c] = [doc(), doc(), doc()];
    await services.vcons.batch([a, b, c], internalCtx);
    // As a group's own role would run it in psql: no API, no repo.
    await t.sql`delete from vcons where uuid = any(${[a.uuid, b.uuid]}::uuid[])`;
    expect(await rowsOf(a.uuid)).toEqual(none);
    expect(await rowsOf(b.uuid)).toEqual(none);
    expect(Object.values(await rowsOf(c.uuid)).every((n) => n > 0)).toBe(true);
    // The same uuid again: nothing of the old vCon is in its way (an orphan tag row would collide).
    expect((await services.vcons.create(structuredClone(a), internalCtx)).created).toBe(true);
    expect(Object.values(await rowsOf(a.uuid)).every((n) => n > 0)).toBe(true);
    await t.sql`truncate vcons cascade`;
    for (const table of DERIVED) {
      const [r] = await t.sql<{ n: number }[]>`select count(*)::int as n from ${t.sql(table)}`;
      expect(r.n, table).toBe(0);
    }
  });

  it('has no foreign key left on the derived tables; the search tables keep theirs', async () => {
    const fks = await t.sql<{ table: string }[]>`
      select conrelid::regclass::text as table from pg_constraint
      where contype = 'f' and connamespace = ${t.schema}::regnamespace order by 1`;
    const tables = fks.map((f) => f.table);
    for (const table of DERIVED) expect(tables).not.toContain(table);
    expect(tables).toContain('search_units');
    expect(tables).toContain('index_queue');
  });
});
