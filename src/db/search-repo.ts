// Search queries (keyword, vector candidates) and the vector writes that keep embeddings in step
// with the search units. ARCHITECTURE.md "Search".
import { createHash } from 'node:crypto';
import type { Db } from './client.js';
import type { DerivedWriter, StoredVcon } from './vcon-repo.js';
import type { SearchUnit } from '../domain/derive.js';
import { bytesToVector, signCode, vectorToBytes } from '../embeddings/code.js';

/** Filters every search accepts (API.md "Search"). */
export interface SearchFilters {
  tags?: Record<string, string>;
  start_date?: Date;
  end_date?: Date;
}

/** A vector space: provider id + model. Vectors of different spaces are never compared. */
export interface VectorSpace {
  id: string;
  model: string;
}

/** What the writer needs of a provider (structural, so db/ doesn't depend on a provider). */
export interface VectorEmbedder extends VectorSpace {
  inline: boolean;
  embed(texts: string[]): Promise<Float32Array[]>;
}

export interface KeywordRow {
  uuid: string;
  score: number;
}

export interface MatchRow {
  uuid: string;
  source: string;
  idx: number;
  snippet: string;
  rank: number;
}

export interface VconInfo {
  uuid: string;
  subject: string | null;
  /** As sent in the document, else the stored instant. */
  created_at: string;
  stored_created_at: Date;
}

export interface UnitVector {
  uuid: string;
  source: string;
  idx: number;
  vec: Float32Array;
}

/** Options of ts_headline: short fragments around the hits, ** around each hit (API.md: ≤ 300 chars). */
const HEADLINE_OPTS = 'MaxWords=28, MinWords=8, ShortWord=2, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**';
/** Text handed to ts_headline: its cost grows with the body, and a snippet needs only the start. */
const HEADLINE_CHARS = 30_000;

/**
 * The per-vCon ranking tsvector, one weight per source (subject A, party B, analysis C, dialog and
 * attachment D, as search_units). Units are joined with stop words in between: stop words take
 * positions, so a phrase never matches across two units.
 */
const UNIT_GAP = ' . the the the . ';
const weighted = (db: Db, source: 'subject' | 'party' | 'analysis' | 'dialog', weight: 'A' | 'B' | 'C' | 'D') =>
  source === 'dialog'
    ? db`setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${UNIT_GAP} order by su.source, su.idx) filter (where su.source in ('dialog', 'attachment')), ''), 200000)), ${weight}::"char")`
    : db`setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${UNIT_GAP} order by su.idx) filter (where su.source = ${source}), ''), 200000)), ${weight}::"char")`;

/** Signature of a vCon's searchable texts: unchanged texts are not re-embedded (tag writes). */
const unitsSig = (units: SearchUnit[]) =>
  createHash('sha1').update(JSON.stringify(units.map((u) => [u.source, u.idx, u.body]))).digest('base64');

export function createSearchRepo(db: Db) {
  const filterSql = (f: SearchFilters, createdCol: 'vs.created_at' | 'vv.created_at', uuidCol: 'vs.vcon_uuid' | 'vv.vcon_uuid') => {
    const created = createdCol === 'vs.created_at' ? db`vs.created_at` : db`vv.created_at`;
    const uuid = uuidCol === 'vs.vcon_uuid' ? db`vs.vcon_uuid` : db`vv.vcon_uuid`;
    const tags = Object.entries(f.tags ?? {}).map(
      ([k, v]) => db`and exists (select 1 from vcon_tags t where t.vcon_uuid = ${uuid} and t.key = ${k} and t.value = ${v})`,
    );
    return db`
      ${f.start_date ? db`and ${created} >= ${f.start_date}` : db``}
      ${f.end_date ? db`and ${created} < ${f.end_date}` : db``}
      ${tags.reduce((acc, c) => db`${acc} ${c}`, db``)}`;
  };

  return {
    /**
     * One row per matching vCon, best first: ts_rank of its weighted tsvector (subject A,
     * party B, analysis C, other text D), normalised to 0..1.
     */
    async keyword(q: string, f: SearchFilters, limit: number, offset: number): Promise<KeywordRow[]> {
      // ts_rank, not ts_rank_cd: every matching vCon is ranked, and for common words (10-20k
      // matches at 100k vCons) cover density cost 1.3-2x more (measured: 84 → 43 ms for 20k).
      // The query is inline so the planner sees it and takes the GIN bitmap scan.
      return db<KeywordRow[]>`
        select vs.vcon_uuid::text as uuid, ts_rank(vs.tsv, websearch_to_tsquery('english', ${q}), 32)::float8 as score
        from vcon_search vs
        where vs.tsv @@ websearch_to_tsquery('english', ${q}) ${filterSql(f, 'vs.created_at', 'vs.vcon_uuid')}
        order by score desc, vs.vcon_uuid desc
        limit ${limit} offset ${offset}`;
    },

    /** Rewrites the per-vCon ranking tsvector of some vCons from their (already written) units. */
    async writeSearchDocs(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await db`delete from vcon_search where vcon_uuid = any(${uuids}::uuid[])`;
      await db`
        insert into vcon_search (vcon_uuid, created_at, tsv)
        select su.vcon_uuid, v.created_at,
          ${weighted(db, 'subject', 'A')} || ${weighted(db, 'party', 'B')} || ${weighted(db, 'analysis', 'C')} || ${weighted(db, 'dialog', 'D')}
        from search_units su join vcons v on v.uuid = su.vcon_uuid
        where su.vcon_uuid = any(${uuids}::uuid[])
        group by su.vcon_uuid, v.created_at`;
    },

    /** Up to `per` best matching units of each vCon, with a ts_headline snippet. */
    async keywordMatches(q: string, uuids: string[], per = 3): Promise<MatchRow[]> {
      if (uuids.length === 0) return [];
      return db<MatchRow[]>`
        with q as (select websearch_to_tsquery('english', ${q}) as query),
        ranked as (
          select su.vcon_uuid, su.source, su.idx, su.body, ts_rank_cd(su.tsv, q.query, 32) as rank,
                 row_number() over (partition by su.vcon_uuid order by ts_rank_cd(su.tsv, q.query, 32) desc, su.source, su.idx) as n
          from search_units su, q
          where su.vcon_uuid = any(${uuids}::uuid[]) and su.tsv @@ q.query
        )
        select r.vcon_uuid::text as uuid, r.source, r.idx, r.rank::float8 as rank,
               ts_headline('english', left(r.body, ${HEADLINE_CHARS}), q.query, ${HEADLINE_OPTS}) as snippet
        from ranked r, q
        where r.n <= ${per}
        order by r.vcon_uuid, r.rank desc, r.source, r.idx`;
    },

    /** Subject and created_at (as sent, else the stored instant) of the vCons of a page. */
    async info(uuids: string[]): Promise<Map<string, VconInfo>> {
      if (uuids.length === 0) return new Map();
      const rows = await db<{ uuid: string; subject: string | null; doc_created_at: string | null; created_at: Date }[]>`
        select uuid::text, subject, doc->>'created_at' as doc_created_at, created_at
        from vcons where uuid = any(${uuids}::uuid[])`;
      return new Map(rows.map((r) => [r.uuid, { uuid: r.uuid, subject: r.subject, created_at: r.doc_created_at ?? r.created_at.toISOString(), stored_created_at: r.created_at }]));
    },

    /**
     * Candidates for the exact rerank: the `n` vCons of the space whose codes are nearest the
     * query's code in Hamming distance, with their vCon-level vectors.
     */
    async vectorCandidates(space: VectorSpace, query: Float32Array, f: SearchFilters, n: number): Promise<{ uuid: string; vec: Float32Array }[]> {
      const code = signCode(query);
      const rows = await db<{ uuid: string; vec: Buffer }[]>`
        select c.uuid, v.vec from (
          select vv.vcon_uuid, vv.vcon_uuid::text as uuid, bit_count(vv.code # ${code}::bit(256)) as distance
          from vcon_codes vv
          where vv.provider = ${space.id} and vv.model = ${space.model} ${filterSql(f, 'vv.created_at', 'vv.vcon_uuid')}
          order by distance, vv.vcon_uuid
          limit ${n}
        ) c join vcon_vectors v on v.vcon_uuid = c.vcon_uuid`;
      return rows.map((r) => ({ uuid: r.uuid, vec: bytesToVector(r.vec) }));
    },

    /**
     * Sign codes of a space for the in-memory index: all of them, or those written after `since`.
     * `code` is varbit_send's output (4-byte bit length, then the bytes).
     */
    async codes(space: VectorSpace, since: Date | null): Promise<{ now: Date; rows: { uuid: string; created_at: Date; code: Buffer }[] }> {
      // The clock is read first: a later sync asks for everything changed since (minus an overlap).
      const [{ now }] = await db<{ now: Date }[]>`select clock_timestamp() as now`;
      const rows = await db<{ uuid: string; created_at: Date; code: Buffer }[]>`
        select vcon_uuid::text as uuid, created_at, varbit_send(code) as code
        from vcon_codes
        where provider = ${space.id} and model = ${space.model} ${since ? db`and changed_at > ${since}` : db``}`;
      return { now, rows };
    },

    /** How many vCons carry the rarest of these tags (an upper bound of the filter's matches). */
    async tagCount(tags: Record<string, string>): Promise<number> {
      const counts = await Promise.all(
        Object.entries(tags).map(([k, v]) => db<{ n: number }[]>`select count(*)::int as n from vcon_tags where key = ${k} and value = ${v}`),
      );
      return Math.min(...counts.map(([r]) => r.n));
    },

    /** The uuids (in the given order) of those vCons that have every tag. */
    async withTags(uuids: string[], tags: Record<string, string>): Promise<string[]> {
      if (uuids.length === 0) return [];
      const conds = Object.entries(tags).map(
        ([k, v]) => db`and exists (select 1 from vcon_tags t where t.vcon_uuid = u.id and t.key = ${k} and t.value = ${v})`,
      );
      const rows = await db<{ uuid: string }[]>`
        select u.id::text as uuid from unnest(${uuids}::uuid[]) with ordinality as u(id, ord)
        where true ${conds.reduce((a, c) => db`${a} ${c}`, db``)}
        order by u.ord`;
      return rows.map((r) => r.uuid);
    },

    /** vCon vectors of some vCons in one space (the exact rerank); deleted vCons are absent. */
    async vconVectors(space: VectorSpace, uuids: string[]): Promise<{ uuid: string; vec: Float32Array }[]> {
      if (uuids.length === 0) return [];
      const rows = await db<{ uuid: string; vec: Buffer }[]>`
        select vcon_uuid::text as uuid, vec from vcon_vectors
        where vcon_uuid = any(${uuids}::uuid[]) and provider = ${space.id} and model = ${space.model}`;
      return rows.map((r) => ({ uuid: r.uuid, vec: bytesToVector(r.vec) }));
    },

    /** Unit vectors of the given vCons, in one space. */
    async unitVectors(space: VectorSpace, uuids: string[]): Promise<UnitVector[]> {
      if (uuids.length === 0) return [];
      const rows = await db<{ uuid: string; source: string; idx: number; vec: Buffer }[]>`
        select vcon_uuid::text as uuid, source, idx, vec from search_vectors
        where vcon_uuid = any(${uuids}::uuid[]) and provider = ${space.id} and model = ${space.model}`;
      return rows.map((r) => ({ uuid: r.uuid, source: r.source, idx: r.idx, vec: bytesToVector(r.vec) }));
    },

    /** Bodies of some units (for snippets of semantic matches), cut to `chars`. */
    async unitBodies(keys: { uuid: string; source: string; idx: number }[], chars = 4000): Promise<Map<string, string>> {
      if (keys.length === 0) return new Map();
      const rows = await db<{ uuid: string; source: string; idx: number; body: string }[]>`
        select su.vcon_uuid::text as uuid, su.source, su.idx, left(su.body, ${chars}) as body
        from search_units su
        join unnest(${keys.map((k) => k.uuid)}::uuid[], ${keys.map((k) => k.source)}::text[], ${keys.map((k) => k.idx)}::int[]) as k(u, s, i)
          on su.vcon_uuid = k.u and su.source = k.s and su.idx = k.i`;
      return new Map(rows.map((r) => [`${r.uuid}/${r.source}/${r.idx}`, r.body]));
    },

    /** The searchable units of some vCons, as stored (for background and re-embedding). */
    async units(uuids: string[]): Promise<Map<string, SearchUnit[]>> {
      const out = new Map<string, SearchUnit[]>(uuids.map((u) => [u, []]));
      if (uuids.length === 0) return out;
      const rows = await db<{ uuid: string; source: SearchUnit['source']; idx: number; body: string }[]>`
        select vcon_uuid::text as uuid, source, idx, body from search_units
        where vcon_uuid = any(${uuids}::uuid[]) order by vcon_uuid, source, idx`;
      for (const r of rows) out.get(r.uuid)?.push({ source: r.source, idx: r.idx, body: r.body });
      return out;
    },

    /**
     * Embeds and stores the vectors of the given vCons (replacing whatever they had, in any
     * space). vCons whose texts and space are unchanged are skipped.
     */
    async writeVectors(embedder: VectorEmbedder, items: { uuid: string; created_at: Date; units: SearchUnit[] }[], opts: { force?: boolean } = {}): Promise<number> {
      if (items.length === 0) return 0;
      const sigs = new Map(items.map((i) => [i.uuid, unitsSig(i.units)]));
      let todo = items;
      if (!opts.force) {
        const existing = await db<{ uuid: string; units_sig: string; created_at: Date }[]>`
          select vcon_uuid::text as uuid, units_sig, created_at from vcon_vectors
          where vcon_uuid = any(${items.map((i) => i.uuid)}::uuid[]) and provider = ${embedder.id} and model = ${embedder.model}`;
        const same = new Set(
          existing
            .filter((e) => {
              const item = items.find((i) => i.uuid === e.uuid);
              return e.units_sig === sigs.get(e.uuid) && item && item.created_at.getTime() === e.created_at.getTime();
            })
            .map((e) => e.uuid),
        );
        todo = items.filter((i) => !same.has(i.uuid));
      }
      if (todo.length === 0) return 0;
      const uuids = todo.map((i) => i.uuid);
      await db`delete from search_vectors where vcon_uuid = any(${uuids}::uuid[])`;
      await db`delete from vcon_vectors where vcon_uuid = any(${uuids}::uuid[])`;
      await db`delete from vcon_codes where vcon_uuid = any(${uuids}::uuid[])`;
      // Party names and addresses carry no meaning for an embedding (a generic "Customer" unit
      // matched everything); keyword search covers them.
      todo = todo.map((i) => ({ ...i, units: i.units.filter((u) => u.source !== 'party') }));
      const texts = todo.flatMap((i) => i.units.map((u) => u.body));
      const vectors = texts.length ? await embedder.embed(texts) : [];
      const unitRows: Record<string, unknown>[] = [];
      const docRows: Record<string, unknown>[] = [];
      const codeRows: Record<string, unknown>[] = [];
      let k = 0;
      for (const item of todo) {
        if (item.units.length === 0) continue;
        const dims = vectors[k].length;
        const mean = new Float32Array(dims);
        for (const u of item.units) {
          const v = vectors[k++];
          for (let d = 0; d < dims; d++) mean[d] += v[d];
          unitRows.push({ vcon_uuid: item.uuid, source: u.source, idx: u.idx, provider: embedder.id, model: embedder.model, vec: vectorToBytes(v) });
        }
        let s = 0;
        for (let d = 0; d < dims; d++) s += mean[d] * mean[d];
        if (s > 0) for (let d = 0; d < dims; d++) mean[d] /= Math.sqrt(s);
        docRows.push({
          vcon_uuid: item.uuid, provider: embedder.id, model: embedder.model, created_at: item.created_at,
          units_sig: sigs.get(item.uuid), vec: vectorToBytes(mean),
        });
        codeRows.push({ vcon_uuid: item.uuid, provider: embedder.id, model: embedder.model, created_at: item.created_at, code: signCode(mean) });
      }
      // Chunked: postgres.js allows at most 65,534 parameters per statement.
      for (let i = 0; i < unitRows.length; i += 5000) await db`insert into search_vectors ${db(unitRows.slice(i, i + 5000))}`;
      for (let i = 0; i < docRows.length; i += 5000) await db`insert into vcon_vectors ${db(docRows.slice(i, i + 5000))}`;
      for (let i = 0; i < codeRows.length; i += 5000) await db`insert into vcon_codes ${db(codeRows.slice(i, i + 5000))}`;
      return docRows.length;
    },

    /** Drops the vectors of some vCons and queues them for background embedding. */
    async enqueue(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await db`
        insert into embedding_queue (vcon_uuid)
        select u from unnest(${uuids}::uuid[]) as u
        on conflict (vcon_uuid) do update set enqueued_at = clock_timestamp(), claimed_until = null, attempts = 0, last_error = null`;
    },

    /**
     * Claims up to `n` queued vCons for `leaseSeconds` (SKIP LOCKED: concurrent workers take
     * different rows). Returns each claim with the enqueued_at it saw (its stamp).
     */
    async claim(n: number, leaseSeconds = 300): Promise<{ uuid: string; stamp: string }[]> {
      // The stamp is enqueued_at in whole microseconds: a JS Date would lose precision.
      return db<{ uuid: string; stamp: string }[]>`
        update embedding_queue q set claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds}), attempts = q.attempts + 1
        from (
          select vcon_uuid from embedding_queue
          where claimed_until is null or claimed_until < clock_timestamp()
          order by enqueued_at
          limit ${n}
          for update skip locked
        ) c
        where q.vcon_uuid = c.vcon_uuid
        returning q.vcon_uuid::text as uuid, (extract(epoch from q.enqueued_at) * 1000000)::bigint::text as stamp`;
    },

    /** Removes a claim only if the vCon wasn't re-queued meanwhile; true when it was removed. */
    async complete(uuid: string, stamp: string): Promise<boolean> {
      const rows = await db`
        delete from embedding_queue
        where vcon_uuid = ${uuid}::uuid and (extract(epoch from enqueued_at) * 1000000)::bigint = ${stamp}::bigint
        returning 1`;
      return rows.length > 0;
    },

    async fail(uuid: string, error: string): Promise<void> {
      await db`update embedding_queue set last_error = ${error.slice(0, 500)} where vcon_uuid = ${uuid}::uuid`;
    },

    /** Queue length and the age of its oldest entry (the embedding lag). */
    async queueStats(): Promise<{ pending: number; oldest_s: number | null }> {
      const [r] = await db<{ pending: number; oldest_s: number | null }[]>`
        select count(*)::int as pending, extract(epoch from clock_timestamp() - min(enqueued_at))::float8 as oldest_s from embedding_queue`;
      return r;
    },

    /** vCons with units but no vector in the given space (after a provider change), a page at a time. */
    async missingVectors(space: VectorSpace, limit: number, after: string | null): Promise<{ uuid: string; created_at: Date }[]> {
      return db<{ uuid: string; created_at: Date }[]>`
        select v.uuid::text, v.created_at from vcons v
        where exists (select 1 from search_units su where su.vcon_uuid = v.uuid and su.source <> 'party')
          and not exists (select 1 from vcon_vectors vv where vv.vcon_uuid = v.uuid and vv.provider = ${space.id} and vv.model = ${space.model})
          ${after ? db`and v.uuid > ${after}::uuid` : db``}
        order by v.uuid
        limit ${limit}`;
    },

    /** How many vCons have vectors, per space. */
    async spaces(): Promise<{ provider: string; model: string; vcons: number }[]> {
      return db<{ provider: string; model: string; vcons: number }[]>`
        select provider, model, count(*)::int as vcons from vcon_vectors group by provider, model order by vcons desc`;
    },
  };
}

export type SearchRepo = ReturnType<typeof createSearchRepo>;

/**
 * The DerivedWriter of the search vectors, run inside every write transaction after the search
 * units are rewritten. A local provider embeds right here (read-your-writes); a remote one only
 * queues the vCon, and the background worker embeds it.
 */
export function createVectorWriter(embedder: VectorEmbedder): DerivedWriter {
  return async (db: Db, items: StoredVcon[]) => {
    const repo = createSearchRepo(db);
    const list = items.map((i) => ({ uuid: i.uuid, created_at: i.derived.created_at, units: i.derived.units }));
    await repo.writeSearchDocs(list.map((i) => i.uuid));
    if (embedder.inline) {
      await repo.writeVectors(embedder, list);
      return;
    }
    // Changed texts drop their stale vectors now; unchanged ones (tag writes) keep theirs.
    const changed: string[] = [];
    const existing = await db<{ uuid: string; units_sig: string }[]>`
      select vcon_uuid::text as uuid, units_sig from vcon_vectors where vcon_uuid = any(${list.map((i) => i.uuid)}::uuid[])
        and provider = ${embedder.id} and model = ${embedder.model}`;
    const sig = new Map(existing.map((e) => [e.uuid, e.units_sig]));
    for (const i of list) if (sig.get(i.uuid) !== unitsSig(i.units)) changed.push(i.uuid);
    if (changed.length === 0) return;
    await db`delete from search_vectors where vcon_uuid = any(${changed}::uuid[])`;
    await db`delete from vcon_vectors where vcon_uuid = any(${changed}::uuid[])`;
    await db`delete from vcon_codes where vcon_uuid = any(${changed}::uuid[])`;
    await repo.enqueue(changed);
  };
}
