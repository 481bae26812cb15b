// The writes that keep a vCon's search index in step with its search units: the per-vCon ranking
// tsvector and the stored vectors (unit vectors, the vCon vector and its sign code). What to embed
// and how the vCon vector is made is the indexer's decision (src/services/search-indexer.ts).
import type { Db } from './client.js';
import { sortedUnits, unitsJson, type SearchUnit } from '../search/units.js';
import type { JsonObject, VconKind } from '../domain/vcon.js';
import { signCodeBytes, vectorToBytes } from '../embeddings/code.js';
import { copyBinary, type CopyValue } from './copy-binary.js';
import type { VectorSpace } from './search-repo.js';
import { stage, stageSync } from '../stages.js';
import { createLexicon, joinTsvectors, parseTsvector, tsvectorText, type Lexicon, type Tsv } from '../search/tsvector.js';

/**
 * The per-vCon ranking tsvector is one weight per source (subject A, party B, analysis C, dialog and
 * attachment D, as a unit's tsvector in keywordMatches). Units are joined with stop words in
 * between: stop words take positions, so a phrase never matches across two units.
 */
const UNIT_GAP = ' . the the the . ';
const WEIGHT_OF: Record<SearchUnit['source'], number> = { subject: 0, party: 1, analysis: 2, dialog: 3, attachment: 3 };

const WEIGHTS = ['A', 'B', 'C', 'D'] as const;

/** The lexemes the tsvectors of this process are made from (ts_lexize, learnt once a word). */
const processLexicon = createLexicon();

/** Teaches the lexicon some words: one query. */
async function learnWords(db: Db, lexicon: Lexicon, words: string[]): Promise<void> {
  const rows = await stage(
    'sql: lexemes',
    () => db<{ l: string[] | null }[]>`select ts_lexize('english_stem', w) as l from unnest(${words}::text[]) with ordinality as t(w, n) order by n`,
  );
  lexicon.learn(
    words,
    rows.map((r) => r.l),
  );
}

/**
 * The four texts of a vCon's ranking tsvector (A, B, C, D), each its units joined in index order;
 * D holds the attachments, then the dialogs (what string_agg ordered by source, idx made of the
 * stored units before they became one row per vCon, so the tsvectors of re-indexed vCons are unchanged).
 */
function weightTexts(units: SearchUnit[]): [string, string, string, string] {
  const parts: string[][] = [[], [], [], []];
  for (const u of sortedUnits(units)) parts[WEIGHT_OF[u.source]].push(u.body);
  return parts.map((p) => p.join(UNIT_GAP)) as [string, string, string, string];
}

/**
 * The search units as rows (vcon_uuid, source, idx, body): stored one row per vCon, its units a
 * JSON array (migration 0004), so a round writes 100 rows, not ~2,000. For `from ... su`.
 */
export const unitRows = (db: Db) =>
  db`(select s.vcon_uuid, u.source, u.idx, u.body from search_units s cross join lateral json_to_recordset(s.units) as u(source text, idx int, body text))`;

/** A stored search unit with its vCon. */
export type UnitRow = SearchUnit & { uuid: string };

/** The search units of some vCons, whole, in (vCon, source, idx) order; deleted vCons have none. */
export const unitsOf = (db: Db, uuids: string[]): Promise<UnitRow[]> =>
  uuids.length === 0
    ? Promise.resolve([])
    : db<UnitRow[]>`
        select su.vcon_uuid::text as uuid, su.source, su.idx, su.body from ${unitRows(db)} su
        where su.vcon_uuid = any(${uuids}::uuid[]) order by su.vcon_uuid, su.source, su.idx`;

/** A stored document to index. */
export interface StoredDoc {
  uuid: string;
  kind: VconKind;
  doc: JsonObject;
  created_at: Date;
  /** Whether the vCon has index rows (units, tsvector, vectors) from an earlier round. */
  indexed: boolean;
}

/**
 * What a vCon's index rows are written from. `indexed: false` says it has none (a fresh vCon):
 * nothing to delete first. Unknown (undefined) counts as indexed.
 */
export interface IndexRows {
  uuid: string;
  units: SearchUnit[];
  indexed?: boolean;
  /** The stored vCon's created_at, for its vcon_search row (without it the statement reads it). */
  created_at?: Date;
  /** unitsJson(units), when the caller made it already (the indexer signs it too). */
  json?: string;
}

/** The vCons that may have rows to delete before theirs are written. */
const stale = (items: { uuid: string; indexed?: boolean }[]) => items.filter((i) => i.indexed !== false).map((i) => i.uuid);

/** The vectors of one vCon in one space, ready to store. */
export interface VconVectors {
  uuid: string;
  created_at: Date;
  /** Signature of the texts they were made from (unchanged texts are not re-embedded). */
  units_sig: string;
  units: { source: string; idx: number; vec: Float32Array }[];
  vec: Float32Array;
}

/** The COPY rows of some vCons' vectors in one space: unit vectors, vCon vectors, sign codes. */
export interface VconRows {
  count: number;
  units: CopyValue[][];
  docs: CopyValue[][];
  codes: CopyValue[][];
}

/** The rows that store some vCons' vectors. */
const vectorRows = (space: VectorSpace, items: VconVectors[]): VconRows =>
  stageSync('vectors to rows', () => ({
    count: items.length,
    units: items.flatMap((i) => i.units.map((u) => [i.uuid, u.source, u.idx, space.id, space.model, vectorToBytes(u.vec)])),
    docs: items.map((i) => [i.uuid, space.id, space.model, i.created_at, i.units_sig, vectorToBytes(i.vec)]),
    codes: items.map((i) => [i.uuid, space.id, space.model, i.created_at, signCodeBytes(i.vec)]),
  }));

export function createSearchIndexRepo(db: Db, lexicon: Lexicon = processLexicon) {
  /** setweight(to_tsvector('english', text), weight) of each text, made by the database (sent back in binary). */
  const madeByDatabase = async (texts: string[], weights: string[]): Promise<Tsv[]> => {
    if (texts.length === 0) return [];
    const rows = await db<{ t: Uint8Array }[]>`
      select tsvectorsend(setweight(to_tsvector('english', left(x.t, 200000)), x.w::"char")) as t
      from unnest(${texts}::text[], ${weights}::text[]) with ordinality as x(t, w, n) order by x.n`;
    return rows.map((r) => parseTsvector(r.t));
  };

  return {
    /**
     * The stored documents of some vCons, to index them; deleted vCons are absent. `indexed`: the
     * vCon has index rows to replace. Units, ranking tsvector and vectors are written together (a
     * vCon without units has none of them), so any of them tells; a fresh vCon has none. All three
     * are looked at: a stray row of one would otherwise fail every retry of its round on a key.
     */
    async docs(uuids: string[]): Promise<StoredDoc[]> {
      if (uuids.length === 0) return [];
      return stage(
        'sql: read documents',
        () => db<StoredDoc[]>`
        select v.uuid::text, v.kind, v.doc, v.created_at,
          exists (select 1 from search_units s where s.vcon_uuid = v.uuid) or exists (select 1 from vcon_vectors vv where vv.vcon_uuid = v.uuid)
            or exists (select 1 from vcon_search vs where vs.vcon_uuid = v.uuid) as indexed
        from vcons v where v.uuid = any(${uuids}::uuid[]) order by v.uuid`,
      );
    },

    /** Replaces the search units of some vCons: a row each (none without units), one binary COPY. */
    async writeUnits(items: IndexRows[]): Promise<void> {
      if (items.length === 0) return;
      const uuids = stale(items);
      const rows = items.filter((i) => i.units.length > 0).map((i): CopyValue[] => [i.uuid, i.json ?? unitsJson(i.units)]);
      // Delete, then append: COPY only appends.
      if (uuids.length > 0) await stage('sql: delete search_units', () => db`delete from search_units where vcon_uuid = any(${uuids}::uuid[])`);
      await stage('sql: copy search_units', () =>
        copyBinary(
          db,
          'search_units',
          [
            ['vcon_uuid', 'uuid'],
            ['units', 'json'],
          ],
          rows,
        ),
      );
    },

    /**
     * Rewrites the per-vCon ranking tsvector of some vCons from their units (vCons without units
     * get no row): per weight, the tsvector made here from the text's tokens (plainTokens: party
     * texts with their e-mail addresses and phone numbers too), else
     * the database's to_tsvector of the text (one query, in binary); the four are joined here as
     * || joins them and sent in binary by COPY (parsing tsvector text was most of the database's
     * time in this write). The rare vCon whose join would cap positions goes through the statement
     * that joins in the database.
     */
    async writeSearchDocs(items: IndexRows[]): Promise<void> {
      if (items.length === 0) return;
      const uuids = stale(items);
      if (uuids.length > 0) await stage('sql: delete vcon_search', () => db`delete from vcon_search where vcon_uuid = any(${uuids}::uuid[])`);
      const rows = items.filter((i) => i.units.length > 0);
      if (rows.length === 0) return;
      const texts = rows.map((r) => weightTexts(r.units));
      const unknown = new Set<string>();
      const tsvs = stageSync('tsvector: make', () => texts.map((t) => t.map((x, k) => lexicon.tsvector(x, WEIGHTS[k], unknown))));
      // The texts the database makes (not plain, or refused here), asked for now: it works on them
      // while this thread learns new words and makes their texts.
      const theirs = tsvs.flatMap((t, n) => t.flatMap((x, k) => (x === null ? [[n, k]] : [])));
      const made = madeByDatabase(
        theirs.map(([n, k]) => texts[n][k]),
        theirs.map(([, k]) => WEIGHTS[k]),
      );
      made.catch(() => undefined);
      let late: number[][] = [];
      // Words seen for the first time in this process: learnt, then the texts that had them are made.
      if (unknown.size > 0) {
        await learnWords(db, lexicon, [...unknown]);
        // Only those texts again. One still lacking a word (the lexicon started afresh at its bound
        // meanwhile) goes to the database too: undefined must never reach a row.
        const still = new Set<string>();
        late = tsvs.flatMap((t, n) =>
          t.flatMap((x, k) => {
            if (x !== undefined) return [];
            t[k] = lexicon.tsvector(texts[n][k], WEIGHTS[k], still) ?? null;
            return t[k] === null ? [[n, k]] : [];
          }),
        );
      }
      // Timed only when asked: a round whose texts were all made here shows no such stage.
      const [early, more] = await Promise.all([
        theirs.length > 0 ? stage('sql: to_tsvector', () => made) : made,
        madeByDatabase(
          late.map(([n, k]) => texts[n][k]),
          late.map(([, k]) => WEIGHTS[k]),
        ),
      ]);
      theirs.forEach(([n, k], j) => (tsvs[n][k] = early[j]));
      late.forEach(([n, k], j) => (tsvs[n][k] = more[j]));
      const binary: CopyValue[][] = [];
      const rest: number[] = [];
      stageSync('tsvector: join', () =>
        rows.forEach((r, n) => {
          const joined = r.created_at ? joinTsvectors(tsvs[n] as Tsv[]) : null;
          if (joined) binary.push([r.uuid, r.created_at!, joined]);
          else rest.push(n);
        }),
      );
      if (binary.length > 0)
        await stage('sql: copy vcon_search', () =>
          copyBinary(
            db,
            'vcon_search',
            [
              ['vcon_uuid', 'uuid'],
              ['created_at', 'timestamptz'],
              ['tsv', 'tsvector'],
            ],
            binary,
          ),
        );
      if (rest.length === 0) return;
      const tsv = (k: number) => rest.map((n) => tsvectorText(tsvs[n][k]!));
      await stage(
        'sql: insert vcon_search',
        () => db`
        insert into vcon_search (vcon_uuid, created_at, tsv)
        select v.uuid, v.created_at, x.ta::tsvector || x.tb::tsvector || x.tc::tsvector || x.td::tsvector
        from unnest(${rest.map((n) => rows[n].uuid)}::uuid[], ${tsv(0)}::text[], ${tsv(1)}::text[], ${tsv(2)}::text[], ${tsv(3)}::text[])
          as x(u, ta, tb, tc, td)
        join vcons v on v.uuid = x.u`,
      );
    },

    /** The searchable units and stored created_at of some vCons; deleted vCons are absent. */
    async stored(uuids: string[]): Promise<{ uuid: string; created_at: Date; units: SearchUnit[] }[]> {
      if (uuids.length === 0) return [];
      const vcons = await db<{ uuid: string; created_at: Date }[]>`
        select uuid::text, created_at from vcons where uuid = any(${uuids}::uuid[]) order by uuid`;
      const units = await this.units(vcons.map((v) => v.uuid));
      return vcons.map((v) => ({ ...v, units: units.get(v.uuid) ?? [] }));
    },

    /** The searchable units of some vCons, as stored. */
    async units(uuids: string[]): Promise<Map<string, SearchUnit[]>> {
      const out = new Map<string, SearchUnit[]>(uuids.map((u) => [u, []]));
      for (const r of await unitsOf(db, uuids)) out.get(r.uuid)?.push({ source: r.source, idx: r.idx, body: r.body });
      return out;
    },

    /** The text signature and created_at of the stored vCon vectors of some vCons in one space. */
    async vectorSigs(space: VectorSpace, uuids: string[]): Promise<Map<string, { units_sig: string; created_at: Date }>> {
      if (uuids.length === 0) return new Map();
      const rows = await stage(
        'sql: vector sigs',
        () => db<{ uuid: string; units_sig: string; created_at: Date }[]>`
        select vcon_uuid::text as uuid, units_sig, created_at from vcon_vectors
        where vcon_uuid = any(${uuids}::uuid[]) and provider = ${space.id} and model = ${space.model}`,
      );
      return new Map(rows.map((r) => [r.uuid, { units_sig: r.units_sig, created_at: r.created_at }]));
    },

    /** Drops every stored vector of some vCons, in every space. */
    async dropVectors(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await stage('sql: delete search_vectors', () => db`delete from search_vectors where vcon_uuid = any(${uuids}::uuid[])`);
      await stage('sql: delete vcon_vectors', () => db`delete from vcon_vectors where vcon_uuid = any(${uuids}::uuid[])`);
      await stage('sql: delete vcon_codes', () => db`delete from vcon_codes where vcon_uuid = any(${uuids}::uuid[])`);
    },

    /** The rows that store some vCons' vectors (no statement: made while other statements run). */
    vectorRows,

    /** Stores the vectors of some vCons (whose old vectors were dropped) with the vCon vector's sign code. */
    async insertVectors(space: VectorSpace, items: VconVectors[]): Promise<void> {
      await this.writeVectorRows(vectorRows(space, items));
    },

    /** Stores vector rows (vectorRows); the vCons' old vectors were dropped. */
    async writeVectorRows(rows: VconRows): Promise<void> {
      // Binary COPY: each vector is its 4·d raw bytes on the wire (not hex text in bind parameters).
      // A local provider stores no unit vectors (search-indexer.ts).
      if (rows.units.length > 0)
        await stage('sql: copy search_vectors', () =>
          copyBinary(
            db,
            'search_vectors',
            [
              ['vcon_uuid', 'uuid'],
              ['source', 'text'],
              ['idx', 'int4'],
              ['provider', 'text'],
              ['model', 'text'],
              ['vec', 'bytea'],
            ],
            rows.units,
          ),
        );
      await stage('sql: copy vcon_vectors', () =>
        copyBinary(
          db,
          'vcon_vectors',
          [
            ['vcon_uuid', 'uuid'],
            ['provider', 'text'],
            ['model', 'text'],
            ['created_at', 'timestamptz'],
            ['units_sig', 'text'],
            ['vec', 'bytea'],
          ],
          rows.docs,
        ),
      );
      await stage('sql: copy vcon_codes', () =>
        copyBinary(
          db,
          'vcon_codes',
          [
            ['vcon_uuid', 'uuid'],
            ['provider', 'text'],
            ['model', 'text'],
            ['created_at', 'timestamptz'],
            ['code', 'bit'],
          ],
          rows.codes,
        ),
      );
    },

    /** vCons with embeddable units but no vector in the given space (after a provider change), a page at a time. */
    async missingVectors(space: VectorSpace, limit: number, after: string | null): Promise<string[]> {
      const rows = await db<{ uuid: string }[]>`
        select v.uuid::text from vcons v
        where exists (select 1 from ${unitRows(db)} su where su.vcon_uuid = v.uuid and su.source <> 'party')
          and not exists (select 1 from vcon_vectors vv where vv.vcon_uuid = v.uuid and vv.provider = ${space.id} and vv.model = ${space.model})
          ${after ? db`and v.uuid > ${after}::uuid` : db``}
        order by v.uuid
        limit ${limit}`;
      return rows.map((r) => r.uuid);
    },
  };
}

export type SearchIndexRepo = ReturnType<typeof createSearchIndexRepo>;
