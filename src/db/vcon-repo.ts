import { hash } from 'node:crypto';
import type { Db, Sql, TransactionSql } from './client.js';
import type { Derived, DialogFacts, TagRow } from '../domain/derive.js';
import type { JsonObject, VconKind } from '../domain/vcon.js';
import type { ListQuery } from '../domain/params.js';
import type { ChangeMark } from '../domain/changes.js';
import { stage, stageMark } from '../stages.js';

/** A validated document with its derived rows, ready to store. */
export interface StoredVcon {
  uuid: string;
  kind: VconKind;
  doc: JsonObject;
  derived: Derived;
}

export interface VconRecord {
  uuid: string;
  kind: VconKind;
  doc: JsonObject;
  created_at: Date;
  tags_updated_at: Date | null;
}

export interface ListRow {
  uuid: string;
  doc?: JsonObject;
  subject: string | null;
  created_at: Date;
  updated_at: Date | null;
  parties_count: number;
  dialog_count: number;
  analysis_count: number;
  attachments_count: number;
}

/** The tags' signature: tags_updated_at moves only when it changes (stored, so its text is fixed). */
const tagsSig = (tags: TagRow[]) =>
  tags.length === 0
    ? null
    : // crypto.hash: one call, a fifth of createHash's CPU for these few hundred bytes.
      hash('sha1', JSON.stringify(tags.length === 1 ? tags : [...tags].sort((a, b) => (a.key < b.key ? -1 : 1))), 'hex');

/** Escapes LIKE metacharacters so a filter is a plain substring match. */
export const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** Elements an array literal can hold unquoted: anything else, and `null` in any case, is quoted. */
const BARE_ELEMENT = /^[A-Za-z0-9_./+:;-]+$/;

/**
 * A PostgreSQL array literal of text or numbers (`{a,"b c",NULL,1.5}`). json_to_recordset reads a
 * JSON string into an array column with the array's own input function, half the time of building
 * the array from a JSON array element by element (the dialog facts of a batch of 100 bench vCons:
 * 1.0 ms instead of 2.0 ms of PostgreSQL's time).
 */
export function arrayLiteral(xs: readonly (string | number | null)[]): string {
  let out = '{';
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i];
    if (i > 0) out += ',';
    if (x === null) out += 'NULL';
    else if (typeof x === 'number') out += String(x);
    else if (BARE_ELEMENT.test(x) && x.toLowerCase() !== 'null') out += x;
    else out += `"${x.replace(/["\\]/g, '\\$&')}"`;
  }
  return `${out}}`;
}

/** A vCon's dialog facts as the array literals of its vcon_dialogs row. */
const dialogArrays = (f: DialogFacts) => ({
  types: arrayLiteral(f.types),
  durations: arrayLiteral(f.durations),
  mediatypes: arrayLiteral(f.mediatypes),
  encodings: arrayLiteral(f.encodings),
  body_bytes: arrayLiteral(f.body_bytes),
});

export function createVconRepo(db: Db) {
  /**
   * The vcons columns and the select of their rows, for an insert into vcons: one array per column,
   * read back by unnest, so the statement's text is the same for any number of rows and
   * postgres.js prepares one statement per connection whatever the batch sizes (a VALUES list's
   * text grows with its rows, and postgres.js keeps a prepared statement per text). The documents
   * go as one JSON array split by json_array_elements, which hands each element on as its own text:
   * the stored json is the document's JSON.stringify exactly, key order included. (As a text[]
   * instead, every quote of every document was escaped into the array literal by postgres.js.)
   * That array, and every derived table's rows below, is sent as the JSON text made here (cast
   * `::text::json`), not as the objects for postgres.js to serialise: a query keeps its arguments
   * until its answer, and the documents' object trees then lived through every database round
   * trip, long enough for the young generation's collections to promote them to the old one.
   */
  const vconInsert = (items: StoredVcon[]) => {
    const col = <T>(pick: (i: StoredVcon) => T) => items.map(pick) as never;
    const d = (pick: (d: Derived) => unknown) => col((i) => pick(i.derived));
    return db`(uuid, doc, kind, subject, created_at, updated_at,
        parties_count, dialog_count, analysis_count, attachments_count, tags_sig, tags_updated_at)
      select u.uuid, u.doc, u.kind, u.subject, u.created_at, u.updated_at, u.pc, u.dc, u.ac, u.tc, u.sig,
             case when u.sig is null then null else now() end
      from rows from (
        unnest(${col((i) => i.uuid)}::uuid[], ${col((i) => i.kind)}::text[],
               ${d((x) => x.subject)}::text[], ${d((x) => x.created_at.toISOString())}::timestamptz[],
               ${d((x) => x.updated_at?.toISOString() ?? null)}::timestamptz[], ${d((x) => x.counts.parties)}::int[],
               ${d((x) => x.counts.dialog)}::int[], ${d((x) => x.counts.analysis)}::int[], ${d((x) => x.counts.attachments)}::int[],
               ${d((x) => tagsSig(x.tags))}::text[]),
        json_array_elements(${JSON.stringify(items.map((i) => i.doc))}::text::json))
        as u(uuid, kind, subject, created_at, updated_at, pc, dc, ac, tc, sig, doc)`;
  };

  /**
   * Every derived table's new rows, as CTEs of one statement (each table's rows one JSON
   * parameter, each row tagged with its vCon's uuid: far cheaper to bind than thousands of scalar
   * parameters). Only the rows of the vCons in CTE `v` go in.
   */
  const derivedInserts = (items: StoredVcon[]) => {
    const rows = <T extends object>(pick: (d: Derived) => T[]) =>
      JSON.stringify(items.flatMap((i) => pick(i.derived).map((r) => ({ vcon_uuid: i.uuid, ...r }))));
    // One row per vCon with dialogs: its facts as arrays (0001_schema.sql), sent as array literals.
    const dialogs = JSON.stringify(items.flatMap(({ uuid, derived: { dialogs: f } }) => (f ? [{ vcon_uuid: uuid, ...dialogArrays(f) }] : [])));
    return db`
      p as (
        insert into vcon_parties (vcon_uuid, idx, name, tel, mailto, party_uuid)
        select x.* from json_to_recordset(${rows((d) => d.parties)}::text::json)
          as x(vcon_uuid uuid, idx int, name text, tel text, mailto text, party_uuid text) where x.vcon_uuid in (select uuid from v)),
      d as (
        insert into vcon_dialogs (vcon_uuid, types, durations, mediatypes, encodings, body_bytes)
        select x.* from json_to_recordset(${dialogs}::text::json)
          as x(vcon_uuid uuid, types text[], durations double precision[], mediatypes text[], encodings text[], body_bytes int[])
          where x.vcon_uuid in (select uuid from v)),
      a as (
        insert into vcon_analyses (vcon_uuid, idx, type, vendor, product, schema, encoding, body_bytes)
        select x.* from json_to_recordset(${rows((d) => d.analyses)}::text::json)
          as x(vcon_uuid uuid, idx int, type text, vendor text, product text, schema text, encoding text, body_bytes int)
          where x.vcon_uuid in (select uuid from v)),
      t as (
        insert into vcon_attachments (vcon_uuid, idx, purpose, type, encoding, mediatype, body_bytes)
        select x.* from json_to_recordset(${rows((d) => d.attachments)}::text::json)
          as x(vcon_uuid uuid, idx int, purpose text, type text, encoding text, mediatype text, body_bytes int)
          where x.vcon_uuid in (select uuid from v)),
      g as (
        insert into vcon_tags (vcon_uuid, key, value)
        select x.* from json_to_recordset(${rows((d) => d.tags)}::text::json) as x(vcon_uuid uuid, key text, value text)
          where x.vcon_uuid in (select uuid from v))`;
  };

  /**
   * Rewrites every derived row of the given vCons (same transaction as the document write): old
   * rows of replaced vCons go, then every table's new rows go in one statement. The same statement
   * queues the vCons for search indexing (docs/architecture.md "Search"): durable with the write,
   * indexed after it.
   */
  async function writeDerived(items: StoredVcon[], replaced: string[]): Promise<void> {
    if (replaced.length > 0) {
      await stage(
        'sql: delete derived rows',
        () => db`
        with p as (delete from vcon_parties where vcon_uuid = any(${replaced}::uuid[])),
             d as (delete from vcon_dialogs where vcon_uuid = any(${replaced}::uuid[])),
             a as (delete from vcon_analyses where vcon_uuid = any(${replaced}::uuid[])),
             t as (delete from vcon_attachments where vcon_uuid = any(${replaced}::uuid[]))
        delete from vcon_tags where vcon_uuid = any(${replaced}::uuid[])`,
      );
    }
    await stage(
      'sql: insert derived rows',
      () => db`
      with v as (select unnest(${items.map((i) => i.uuid)}::uuid[]) as uuid),
      ${derivedInserts(items)}
      insert into index_queue (vcon_uuid)
      select uuid from v
      on conflict (vcon_uuid) do update
        set seq = nextval('index_queue_seq'), enqueued_at = clock_timestamp(), attempts = 0, last_error = null, retry_at = null`,
    );
  }

  return {
    /**
     * Inserts documents whose uuid is new, with their derived rows and queue rows, in one statement
     * (atomic on its own: no transaction, one round trip). Returns the uuids inserted; the others
     * exist already and are left untouched. Each vCon inserted is logged as created by keyId, in
     * the same statement (the change log: 0003_change_log.sql).
     */
    async insertNew(items: StoredVcon[], keyId: string | null): Promise<Set<string>> {
      if (items.length === 0) return new Set();
      const rows = await stage(
        'sql: insert new vcon (one statement)',
        () => db<{ uuid: string }[]>`
        with v as (
          insert into vcons ${vconInsert(items)}
          on conflict (uuid) do nothing
          returning uuid),
        ${derivedInserts(items)},
        q as (insert into index_queue (vcon_uuid) select uuid from v),
        c as (insert into change_log (uuid, kind, key_id) select uuid, 'created', ${keyId}::text from v)
        select uuid::text from v`,
      );
      return new Set(rows.map((r) => r.uuid));
    },

    /**
     * Inserts or replaces documents and rewrites their derived rows. Returns, per uuid, whether it
     * was newly created. tags_updated_at moves only when the set of tags changed. Each vCon is
     * logged in the same statement: created when it was new, else as `change.kind`.
     */
    async upsert(items: StoredVcon[], change: ChangeMark): Promise<Map<string, boolean>> {
      if (items.length === 0) return new Map();
      const result = await stage(
        'sql: upsert vcons',
        () => db<{ uuid: string; created: boolean }[]>`
        with u as (
        insert into vcons as v ${vconInsert(items)}
        on conflict (uuid) do update set
          doc = excluded.doc, kind = excluded.kind, subject = excluded.subject,
          created_at = excluded.created_at, updated_at = excluded.updated_at,
          parties_count = excluded.parties_count, dialog_count = excluded.dialog_count,
          analysis_count = excluded.analysis_count, attachments_count = excluded.attachments_count,
          tags_sig = excluded.tags_sig,
          tags_updated_at = case
            when excluded.tags_sig is null then null
            when excluded.tags_sig is distinct from v.tags_sig then now()
            else v.tags_updated_at end
        returning uuid, (xmax = 0) as created),
        c as (
          insert into change_log (uuid, kind, key_id)
          select uuid, case when created then 'created' else ${change.kind}::text end, ${change.keyId}::text from u)
        select uuid::text, created from u`,
      );
      await writeDerived(
        items,
        result.filter((r) => !r.created).map((r) => r.uuid),
      );
      return new Map(result.map((r) => [r.uuid, r.created]));
    },

    async get(uuid: string): Promise<VconRecord | undefined> {
      const [row] = await db<VconRecord[]>`
        select uuid::text, kind, doc, created_at, tags_updated_at from vcons where uuid = ${uuid}::uuid`;
      return row;
    },

    /**
     * The next documents after `after` in uuid order, as stored JSON text: at most `limit`, and no
     * more than `maxBytes` of text once the first is in (a page of large documents stays small).
     * Keyset paging over the primary key: each page is one short index scan, whatever the offset.
     */
    async exportPage(after: string | undefined, limit: number, maxBytes: number): Promise<{ uuid: string; doc: string }[]> {
      return db<{ uuid: string; doc: string }[]>`
        select uuid, doc from (
          select v.uuid::text as uuid, v.doc::text as doc,
                 sum(octet_length(v.doc::text)) over (order by v.uuid) - octet_length(v.doc::text) as before
          from (select uuid, doc from vcons
                where ${after === undefined ? db`true` : db`uuid > ${after}::uuid`}
                order by uuid limit ${limit}) v
        ) s
        where before < ${maxBytes}
        order by uuid`;
    },

    /**
     * The stored document as the bytes of its JSON text, exactly as written: no parse, no
     * re-serialisation, and not even decoded into a string (postgres.js `raw`: the column's bytes
     * as they came from the server), so a read goes from the row into the answer as one copy.
     */
    async getBytes(uuid: string): Promise<Buffer | undefined> {
      const [row] = await db`select doc from vcons where uuid = ${uuid}::uuid`.raw();
      return row?.[0] ?? undefined;
    },

    /**
     * Reads and locks one row until the transaction ends: concurrent appends serialise here. NO KEY
     * UPDATE, not UPDATE: an indexer holding the vCon for key share (its index rows' foreign keys)
     * doesn't block the write, so the write waiting on its queue row can't deadlock with it.
     */
    async lock(uuid: string): Promise<VconRecord | undefined> {
      const [row] = await stage(
        'sql: lock',
        () => db<VconRecord[]>`
        select uuid::text, kind, doc, created_at, tags_updated_at from vcons where uuid = ${uuid}::uuid for no key update`,
      );
      return row;
    },

    /**
     * Locks existing rows (as lock does) and returns each one's creation time as its document says
     * it (the stored text, when a string) or else as the column holds it: a replacement without a
     * created_at keeps it.
     */
    async lockCreatedAt(uuids: string[]): Promise<Map<string, string>> {
      if (uuids.length === 0) return new Map();
      const rows = await db<{ uuid: string; text: string | null; created_at: Date }[]>`
        select uuid::text, doc->>'created_at' as text, created_at from vcons where uuid = any(${uuids}::uuid[]) for no key update`;
      return new Map(rows.map((r) => [r.uuid, r.text ?? r.created_at.toISOString()]));
    },

    async exists(uuid: string): Promise<boolean> {
      const [row] = await db`select 1 from vcons where uuid = ${uuid}::uuid`;
      return row !== undefined;
    },

    /**
     * Deletes a vCon. Its derived rows go by the delete trigger (0001_schema.sql: they have no foreign
     * keys), its search rows by their cascade, in this statement: the row lock it takes makes a
     * concurrent write of the vCon finish first, and the trigger sees the rows that write committed.
     * The same statement logs the deletion.
     */
    async remove(uuid: string, keyId: string | null): Promise<boolean> {
      const rows = await db`
        with d as (delete from vcons where uuid = ${uuid}::uuid returning uuid),
        c as (insert into change_log (uuid, kind, key_id) select uuid, 'deleted', ${keyId}::text from d)
        select uuid from d`;
      return rows.length > 0;
    },

    async list(q: ListQuery, opts: { withDoc: boolean }): Promise<ListRow[]> {
      const byTags = q.tags && Object.keys(q.tags).length > 0;
      const tagConds = Object.entries(q.tags ?? {}).map(
        ([k, v]) => db`and exists (select 1 from vcon_tags t where t.vcon_uuid = v.uuid and t.key = ${k} and t.value = ${v})`,
      );
      const party = (column: 'name' | 'mailto' | 'tel', value: string | undefined) =>
        value === undefined
          ? db``
          : column === 'tel'
            ? db`and exists (select 1 from vcon_parties p where p.vcon_uuid = v.uuid and p.tel ilike ${likePattern(value)})`
            : db`and exists (select 1 from vcon_parties p where p.vcon_uuid = v.uuid and lower(p.${db(column)}) like lower(${likePattern(value)}))`;
      return db<ListRow[]>`
        select v.uuid::text, v.subject, v.created_at, v.updated_at,
               v.parties_count, v.dialog_count, v.analysis_count, v.attachments_count
               ${opts.withDoc ? db`, v.doc` : db``}
        from vcons v
        where true
        ${q.subject !== undefined ? db`and lower(v.subject) like lower(${likePattern(q.subject)})` : db``}
        ${party('name', q.party_name)}
        ${party('mailto', q.party_email)}
        ${party('tel', q.party_tel)}
        ${q.start_date ? db`and v.created_at >= ${q.start_date}` : db``}
        ${q.end_date ? db`and v.created_at < ${q.end_date}` : db``}
        ${byTags ? db`and v.tags_updated_at is not null` : db``}
        ${tagConds.reduce((acc, c) => db`${acc} ${c}`, db``)}
        order by ${byTags ? db`v.tags_updated_at desc, v.uuid desc` : db`v.created_at desc, v.uuid desc`}
        limit ${q.limit + 1} offset ${q.offset}`;
    },
  };
}

export type VconRepo = ReturnType<typeof createVconRepo>;

/** Runs fn in one transaction with a repo bound to it. */
export function createTransactor(sql: Sql) {
  return async <T>(fn: (repo: VconRepo, tx: TransactionSql) => Promise<T>): Promise<T> => {
    const begin = stageMark();
    let commit = begin;
    const out = (await sql.begin(async (tx) => {
      begin.end('sql: begin (pool turn)');
      const r = await fn(createVconRepo(tx), tx);
      commit = stageMark();
      return r;
    })) as T;
    commit.end('sql: commit');
    return out;
  };
}
