// The writes that keep a vCon's search index in step with its search units: the per-vCon ranking
// tsvector and the stored vectors (unit vectors, the vCon vector and its sign code). What to embed
// and how the vCon vector is made is the indexer's decision (src/services/search-indexer.ts).
import type { Db } from './client.js';
import type { SearchUnit } from '../domain/derive.js';
import type { JsonObject, VconKind } from '../domain/vcon.js';
import { signCodeBytes, vectorToBytes } from '../embeddings/code.js';
import { copyBinary } from './copy-binary.js';
import type { VectorSpace } from './search-repo.js';
import { stage, stageSync } from '../stages.js';

/**
 * The per-vCon ranking tsvector, one weight per source (subject A, party B, analysis C, dialog and
 * attachment D, as search_units). Units are joined with stop words in between: stop words take
 * positions, so a phrase never matches across two units. Keep in step with migration 0012.
 */
const UNIT_GAP = ' . the the the . ';
const weighted = (db: Db, source: 'subject' | 'party' | 'analysis' | 'dialog', weight: 'A' | 'B' | 'C' | 'D') =>
  source === 'dialog'
    ? db`setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${UNIT_GAP} order by su.source, su.idx) filter (where su.source in ('dialog', 'attachment')), ''), 200000)), ${weight}::"char")`
    : db`setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${UNIT_GAP} order by su.idx) filter (where su.source = ${source}), ''), 200000)), ${weight}::"char")`;

/** The vectors of one vCon in one space, ready to store. */
export interface VconVectors {
  uuid: string;
  created_at: Date;
  /** Signature of the texts they were made from (unchanged texts are not re-embedded). */
  units_sig: string;
  units: { source: string; idx: number; vec: Float32Array }[];
  vec: Float32Array;
}

export function createSearchIndexRepo(db: Db) {
  return {
    /** The stored documents of some vCons, to index them; deleted vCons are absent. */
    async docs(uuids: string[]): Promise<{ uuid: string; kind: VconKind; doc: JsonObject; created_at: Date }[]> {
      if (uuids.length === 0) return [];
      return stage(
        'sql: read documents',
        () => db<{ uuid: string; kind: VconKind; doc: JsonObject; created_at: Date }[]>`
        select uuid::text, kind, doc, created_at from vcons where uuid = any(${uuids}::uuid[]) order by uuid`,
      );
    },

    /** Replaces the search units of some vCons (their unit tsvectors are generated columns). */
    async writeUnits(items: { uuid: string; units: SearchUnit[] }[]): Promise<void> {
      if (items.length === 0) return;
      const uuids = items.map((i) => i.uuid);
      const rows = items.flatMap((i) => i.units.map((u) => ({ vcon_uuid: i.uuid, source: u.source, idx: u.idx, body: u.body })));
      // Two statements: a CTE's delete may run after the insert of the same statement.
      await stage('sql: delete search_units', () => db`delete from search_units where vcon_uuid = any(${uuids}::uuid[])`);
      if (rows.length === 0) return;
      await stage(
        'sql: insert search_units',
        () => db`
        insert into search_units (vcon_uuid, source, idx, body)
        select * from json_to_recordset(${rows as never}::json) as x(vcon_uuid uuid, source text, idx int, body text)`,
      );
    },

    /** Rewrites the per-vCon ranking tsvector of some vCons from their (already written) units. */
    async writeSearchDocs(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await stage('sql: delete vcon_search', () => db`delete from vcon_search where vcon_uuid = any(${uuids}::uuid[])`);
      await stage(
        'sql: insert vcon_search',
        () => db`
        insert into vcon_search (vcon_uuid, created_at, tsv)
        select su.vcon_uuid, v.created_at,
          ${weighted(db, 'subject', 'A')} || ${weighted(db, 'party', 'B')} || ${weighted(db, 'analysis', 'C')} || ${weighted(db, 'dialog', 'D')}
        from search_units su join vcons v on v.uuid = su.vcon_uuid
        where su.vcon_uuid = any(${uuids}::uuid[])
        group by su.vcon_uuid, v.created_at`,
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
      if (uuids.length === 0) return out;
      const rows = await db<{ uuid: string; source: SearchUnit['source']; idx: number; body: string }[]>`
        select vcon_uuid::text as uuid, source, idx, body from search_units
        where vcon_uuid = any(${uuids}::uuid[]) order by vcon_uuid, source, idx`;
      for (const r of rows) out.get(r.uuid)?.push({ source: r.source, idx: r.idx, body: r.body });
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

    /** Stores the vectors of some vCons (whose old vectors were dropped) with the vCon vector's sign code. */
    async insertVectors(space: VectorSpace, items: VconVectors[]): Promise<void> {
      const prepared = stageSync('vectors to rows', () => ({
        units: items.flatMap((i) => i.units.map((u) => [i.uuid, u.source, u.idx, space.id, space.model, vectorToBytes(u.vec)])),
        docs: items.map((i) => [i.uuid, space.id, space.model, i.created_at, i.units_sig, vectorToBytes(i.vec)]),
        codes: items.map((i) => [i.uuid, space.id, space.model, i.created_at, signCodeBytes(i.vec)]),
      }));
      // Binary COPY: each vector is its 4·d raw bytes on the wire (not hex text in bind parameters).
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
          prepared.units,
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
          prepared.docs,
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
          prepared.codes,
        ),
      );
    },

    /** vCons with embeddable units but no vector in the given space (after a provider change), a page at a time. */
    async missingVectors(space: VectorSpace, limit: number, after: string | null): Promise<string[]> {
      const rows = await db<{ uuid: string }[]>`
        select v.uuid::text from vcons v
        where exists (select 1 from search_units su where su.vcon_uuid = v.uuid and su.source <> 'party')
          and not exists (select 1 from vcon_vectors vv where vv.vcon_uuid = v.uuid and vv.provider = ${space.id} and vv.model = ${space.model})
          ${after ? db`and v.uuid > ${after}::uuid` : db``}
        order by v.uuid
        limit ${limit}`;
      return rows.map((r) => r.uuid);
    },
  };
}

export type SearchIndexRepo = ReturnType<typeof createSearchIndexRepo>;
