// Search queries: keyword ranking and matches, vector candidates and vectors, page metadata
// (docs/architecture.md "Search"). The index writes are in search-index-repo.ts, the embedding queue
// in embedding-queue-repo.ts.
import type { Db } from './client.js';
import { bytesToVector, signCode } from '../embeddings/code.js';
import { unitRows, unitsOf, type UnitRow } from './search-index-repo.js';

/** Filters every search accepts (docs/api.md "Search"). */
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

/** One term of a keyword query: a word, a "phrase", or an excluded word or phrase. */
export interface TermInput {
  kind: 'word' | 'phrase' | 'not';
  text: string;
}

/** A term with its weight, and whether it is rare enough to draw candidates from. */
export interface RankedTerm extends TermInput {
  idf: number;
  rare: boolean;
  /** A word's place among the query's words, rarest first (1..); 0 for phrases and exclusions. */
  step: number;
}

/**
 * ts_rank's weights of {dialog and attachments (D), analysis (C), parties (B), subject (A)}: a
 * subject word counts 2.5 dialog words, a summary's 1.5, a party name's less than one.
 */
const FIELD_WEIGHTS = '{0.4, 0.6, 0.3, 1.0}';

/** The tsquery of a term `t(txt, kind)`: a phrase keeps its word order. */
const termQuery = (db: Db) => db`case when t.kind = 'word' then plainto_tsquery('english', t.txt) else phraseto_tsquery('english', t.txt) end`;

export interface KeywordRow {
  uuid: string;
  score: number;
  /** The share of the query's weight (idf) in the terms this vCon holds: 1 when it holds every term. */
  cover: number;
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

/** The rare terms' vCons scored at most (their counts are estimates: a wrong one can't unbound the work). */
const RARE_ROWS = 2_000;

/** Digits of a phone number's end that the party index holds: the literal 7 of migration 0002 and identifierVcons. */
export const PHONE_KEY_DIGITS = 7;

/** Below this many vCons (by the planner's estimate) docCount counts them. */
const EXACT_COUNT_BELOW = 20_000;

/** Options of ts_headline: short fragments around the hits, ** around each hit (docs/api.md: ≤ 300 chars). */
const HEADLINE_OPTS = 'MaxWords=28, MinWords=8, ShortWord=2, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**';
/** Text handed to ts_headline: its cost grows with the body, and a snippet needs only the start. */
const HEADLINE_CHARS = 30_000;

/**
 * A unit's tsvector, weighted by its source (subject A, party B, analysis C, dialog and attachment
 * D): the expression the generated column search_units.tsv had before search units became one row per vCon.
 */
const unitTsv = (db: Db) =>
  db`setweight(to_tsvector('english'::regconfig, su.body), (case su.source when 'subject' then 'A' when 'party' then 'B' when 'analysis' then 'C' else 'D' end)::"char")`;

export function createSearchRepo(db: Db) {
  /**
   * The filters as SQL conditions. `perRow` tests each tag row by row (offset 0 keeps the planner
   * from turning the test into a join): a scan that stops at a limit then stops early, instead of
   * hashing every match of a common word first.
   */
  const filterSql = (f: SearchFilters, createdCol: 'vs.created_at' | 'vv.created_at', uuidCol: 'vs.vcon_uuid' | 'vv.vcon_uuid', perRow = false) => {
    const created = createdCol === 'vs.created_at' ? db`vs.created_at` : db`vv.created_at`;
    const uuid = uuidCol === 'vs.vcon_uuid' ? db`vs.vcon_uuid` : db`vv.vcon_uuid`;
    const tags = Object.entries(f.tags ?? {}).map(
      ([k, v]) =>
        db`and exists (select 1 from vcon_tags t where t.vcon_uuid = ${uuid} and t.key = ${k} and t.value = ${v} ${perRow ? db`offset 0` : db``})`,
    );
    return db`
      ${f.start_date ? db`and ${created} >= ${f.start_date}` : db``}
      ${f.end_date ? db`and ${created} < ${f.end_date}` : db``}
      ${tags.reduce((acc, c) => db`${acc} ${c}`, db``)}`;
  };

  return {
    /**
     * Searchable vCons of the group (the N of the term weights): counted while few, else the
     * planner's row estimate (counting 100k rows takes ~10 ms; the weights need no exact N).
     */
    async docCount(): Promise<number> {
      const [r] = await db<{ n: number }[]>`
        select case when c.reltuples >= ${EXACT_COUNT_BELOW} then c.reltuples::int else (select count(*)::int from vcon_search) end as n
        from pg_class c where c.oid = 'vcon_search'::regclass`;
      return r.n;
    },

    /**
     * For each term: whether it has a content word (stop words alone have none) and how many of the
     * group's `docs` vCons contain it. A one-lexeme word among the planner's most common elements of vcon_search.tsv
     * (pg_stats, kept by ANALYZE) is estimated from its sampled frequency, at no cost; any other
     * term is counted up to `cap` (a GIN lookup that stops early). Counting a common word visits
     * a heap row per match, ~6 ms per word at the cap: the estimate keeps a cold query cheap.
     */
    async termStats(terms: TermInput[], cap: number, docs: number): Promise<{ content: boolean; df: number }[]> {
      if (terms.length === 0) return [];
      // The sampled frequency is scaled by today's count `docs`: the table may have grown since
      // ANALYZE, and an old small count would make a common word look rare.
      const rows = await db<{ content: boolean; df: number | null }[]>`
        with st as (
          -- pg_stats filtered by name (the view's own columns) so the catalogs are read by index;
          -- joining it by oid made the planner hash every pg_class row (~8 ms with 40k relations).
          select u.lexeme, u.freq * ${docs}::float8 as n
          from pg_stats s
          cross join lateral unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) as u(lexeme, freq)
          where s.schemaname = (select ns.nspname from pg_class c join pg_namespace ns on ns.oid = c.relnamespace where c.oid = 'vcon_search'::regclass)
            and s.tablename = 'vcon_search' and s.attname = 'tsv' and u.lexeme is not null
        )
        select numnode(x.q) > 0 as content,
          case when numnode(x.q) = 0 then null
               when e.n is not null then greatest(round(e.n), 1)::int
               else (select count(*)::int from (select 1 from vcon_search vs where vs.tsv @@ x.q limit ${cap}) s) end as df
        from unnest(${terms.map((t) => t.text)}::text[], ${terms.map((t) => t.kind)}::text[]) with ordinality as t(txt, kind, ord)
        cross join lateral (select ${termQuery(db)} as q) x
        cross join lateral (select case when t.kind = 'word' then tsvector_to_array(to_tsvector('english', t.txt)) end as lx) l
        left join st e on cardinality(l.lx) = 1 and e.lexeme = l.lx[1]
        order by t.ord`;
      return rows.map((r) => ({ content: r.content, df: r.df ?? 0 }));
    },

    /**
     * vCons a party of which has this phone number, e-mail address, or whose uuid this is, most
     * recent first. Phone numbers compare by their digits (leading zeros dropped, so a trunk prefix
     * does not count), the one ending with the other: +1 (234) 567-8901 is 12345678901 and
     * 2345678901; the index holds the last PHONE_KEY_DIGITS of each (migration 0002).
     */
    async identifierVcons(
      id: { kind: 'phone' | 'email' | 'uuid'; text: string; digits?: string },
      f: SearchFilters,
      limit: number,
    ): Promise<string[]> {
      const filters = filterSql(f, 'vs.created_at', 'vs.vcon_uuid');
      let holders;
      if (id.kind === 'uuid') holders = db`select ${id.text}::uuid`;
      else if (id.kind === 'email')
        holders = db`select p.vcon_uuid from vcon_parties p where lower(p.mailto) in (${id.text}, ${`mailto:${id.text}`})`;
      else {
        const digits = id.digits ?? '';
        holders = db`
          select p.vcon_uuid from vcon_parties p
          cross join lateral (select ltrim(regexp_replace(p.tel, '[^0-9]', '', 'g'), '0') as d) t
          where right(regexp_replace(p.tel, '[^0-9]', '', 'g'), 7) = ${digits.slice(-PHONE_KEY_DIGITS)}
            and (t.d = ${digits} or t.d like ${`%${digits}`} or ${digits} like '%' || t.d)`;
      }
      const rows = await db<{ uuid: string }[]>`
        select vs.vcon_uuid::text as uuid from vcon_search vs
        where vs.vcon_uuid in (${holders}) ${filters}
        order by vs.created_at desc, vs.vcon_uuid desc
        limit ${limit}`;
      return rows.map((r) => r.uuid);
    },

    /** Whether some vCon contains each word (a spelling suggestion is only taken if one does). */
    async present(words: string[]): Promise<boolean[]> {
      if (words.length === 0) return [];
      const rows = await db<{ found: boolean }[]>`
        select exists (select 1 from vcon_search vs where vs.tsv @@ plainto_tsquery('english', t.w)) as found
        from unnest(${words}::text[]) with ordinality as t(w, ord)
        order by t.ord`;
      return rows.map((r) => r.found);
    },

    /**
     * Ranked keyword search, best first: the sum over the query's terms of idf × ts_rank (a
     * saturating, field-weighted term frequency). Only candidates are scored, so a common word
     * costs a bounded amount of work: every vCon holding a `rare` term, and at most `cap` drawn
     * from the rarest words first: those holding every word, then (while fewer than `cap`) those
     * holding all but the most common one, and so on down to the rarest word alone, then each
     * other word without the rarer ones. Each step is one GIN lookup (the conjunction is driven
     * by its rarest posting list); the steps after the cap is reached never run. Phrases are
     * required and exclusions excluded.
     */
    async keyword(terms: RankedTerm[], f: SearchFilters, limit: number, offset: number, cap: number): Promise<KeywordRow[]> {
      if (!terms.some((t) => t.kind !== 'not')) return [];
      const filters = filterSql(f, 'vs.created_at', 'vs.vcon_uuid');
      const rowFilters = filterSql(f, 'vs.created_at', 'vs.vcon_uuid', true);
      const words = terms.filter((t) => t.kind === 'word').length;
      return db<KeywordRow[]>`
        with t as materialized (
          select t.kind, t.idf, t.rare = 1 as rare, t.step, ${termQuery(db)} as q
          from unnest(${terms.map((t) => t.text)}::text[], ${terms.map((t) => t.kind)}::text[], ${terms.map((t) => t.idf)}::float8[],
                      ${terms.map((t) => (t.rare ? 1 : 0))}::int[], ${terms.map((t) => t.step)}::int[])
            as t(txt, kind, idf, rare, step)
          where numnode(${termQuery(db)}) > 0
        ),
        pos as materialized (select * from t where kind <> 'not'),
        steps as materialized (
          select s.ord, (
            select string_agg(case when t.kind = 'not' or (t.kind = 'word' and t.step not between s.lo and s.hi) then '!(' || t.q::text || ')'
                                   else '(' || t.q::text || ')' end, ' & ')::tsquery
            from t where t.kind <> 'word' or t.step <= s.top
          ) as q
          from (
            select ${words} - k as ord, 1 as lo, k as hi, k + 1 as top from generate_series(${words}, least(${words}, 1), -1) as k
            union all
            select ${words} + j, j, j, j from generate_series(2, ${words}) as j
          ) s
          order by s.ord
        ),
        ladder as (
          select l.vcon_uuid, l.tsv from steps cross join lateral (
            select vs.vcon_uuid, vs.tsv from vcon_search vs where vs.tsv @@ steps.q ${rowFilters} limit ${cap}
          ) l
          limit ${cap}
        ),
        -- Each candidate's tsv is carried along: reading it again by key costs more than the scans.
        cand as (
          select distinct on (c.vcon_uuid) c.vcon_uuid, c.tsv from (
            (select vs.vcon_uuid, vs.tsv from vcon_search vs
             where vs.tsv @@ (select string_agg('(' || q::text || ')', ' | ')::tsquery from pos where rare) ${filters}
             limit ${RARE_ROWS})
            union all
            select vcon_uuid, tsv from ladder
          ) c
          order by c.vcon_uuid
        ),
        req as (
          select (
            select string_agg(case when kind = 'not' then '!(' || q::text || ')' else '(' || q::text || ')' end, ' & ')::tsquery
            from t where kind in ('phrase', 'not')
          ) as q, (select sum(idf) from pos) as idf
        )
        select c.vcon_uuid::text as uuid,
          (select sum(pos.idf * ts_rank(${FIELD_WEIGHTS}::float4[], c.tsv, pos.q, 0)) from pos where c.tsv @@ pos.q)::float8 as score,
          coalesce((select sum(pos.idf) from pos where c.tsv @@ pos.q) / nullif(req.idf, 0), 0)::float8 as cover
        from cand c, req
        where req.q is null or c.tsv @@ req.q
        order by score desc, c.vcon_uuid desc
        limit ${limit} offset ${offset}`;
    },

    /** Up to `per` best matching units of each vCon, with a ts_headline snippet. */
    async keywordMatches(terms: TermInput[], uuids: string[], per = 3): Promise<MatchRow[]> {
      const words = terms.filter((t) => t.kind !== 'not');
      if (uuids.length === 0 || words.length === 0) return [];
      return db<MatchRow[]>`
        with q as (
          select string_agg('(' || x.q::text || ')', ' | ')::tsquery as query
          from unnest(${words.map((t) => t.text)}::text[], ${words.map((t) => t.kind)}::text[]) as t(txt, kind)
          cross join lateral (select ${termQuery(db)} as q) x
          where numnode(x.q) > 0
        ),
        -- The unit tsvectors are made here, for the page's few units only (read by primary key),
        -- not stored: the indexing rounds wrote one for every unit (migration 0003). Materialized,
        -- so each is made once and not again for every use below.
        units as materialized (
          select su.vcon_uuid, su.source, su.idx, su.body, ${unitTsv(db)} as tsv
          from ${unitRows(db)} su where su.vcon_uuid = any(${uuids}::uuid[])
        ),
        ranked as (
          select su.vcon_uuid, su.source, su.idx, su.body, ts_rank_cd(su.tsv, q.query, 32) as rank,
                 row_number() over (partition by su.vcon_uuid order by ts_rank_cd(su.tsv, q.query, 32) desc, su.source, su.idx) as n
          from units su, q
          where su.tsv @@ q.query
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
      return new Map(
        rows.map((r) => [
          r.uuid,
          { uuid: r.uuid, subject: r.subject, created_at: r.doc_created_at ?? r.created_at.toISOString(), stored_created_at: r.created_at },
        ]),
      );
    },

    /**
     * Candidates for the exact rerank: the vCons of the space whose codes are nearest the query's
     * code in Hamming distance (equal distances in uuid order), the `n` after the first `skip`,
     * with their vCon-level vectors.
     */
    async vectorCandidates(
      space: VectorSpace,
      query: Float32Array,
      f: SearchFilters,
      n: number,
      skip = 0,
    ): Promise<{ uuid: string; vec: Float32Array }[]> {
      const code = signCode(query);
      const rows = await db<{ uuid: string; vec: Buffer }[]>`
        select c.uuid, v.vec from (
          select vv.vcon_uuid, vv.vcon_uuid::text as uuid, bit_count(vv.code # ${code}::bit(256)) as distance
          from vcon_codes vv
          where vv.provider = ${space.id} and vv.model = ${space.model} ${filterSql(f, 'vv.created_at', 'vv.vcon_uuid')}
          order by distance, vv.vcon_uuid
          limit ${n} offset ${skip}
        ) c join vcon_vectors v on v.vcon_uuid = c.vcon_uuid`;
      return rows.map((r) => ({ uuid: r.uuid, vec: bytesToVector(r.vec) }));
    },

    /**
     * Sign codes of a space for the in-memory index: all of them, or those written after `since`.
     * `code` is varbit_send's output (4-byte bit length, then the bytes).
     */
    async codes(space: VectorSpace, since: Date | null): Promise<{ now: Date; rows: { uuid: string; created_at: Date; code: Buffer }[] }> {
      // One round trip (a catch-up runs before every semantic query). `now` is the statement's start,
      // when its snapshot was taken: a later sync asks for everything changed since (minus an
      // overlap for writes that committed after it).
      const rows = await db<{ now: Date; uuid: string | null; created_at: Date; code: Buffer }[]>`
        select c.now, v.uuid, v.created_at, v.code
        from (select statement_timestamp() as now) c
        left join lateral (
          select vcon_uuid::text as uuid, created_at, varbit_send(code) as code
          from vcon_codes
          where provider = ${space.id} and model = ${space.model} ${since ? db`and changed_at > ${since}` : db``}
        ) v on true`;
      return { now: rows[0].now, rows: rows.filter((r): r is typeof r & { uuid: string } => r.uuid !== null) };
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

    /** Stored unit vectors of the given vCons, in one space (a remote provider's; local ones embed at query time). */
    async unitVectors(space: VectorSpace, uuids: string[]): Promise<UnitVector[]> {
      if (uuids.length === 0) return [];
      const rows = await db<{ uuid: string; source: string; idx: number; vec: Buffer }[]>`
        select vcon_uuid::text as uuid, source, idx, vec from search_vectors
        where vcon_uuid = any(${uuids}::uuid[]) and provider = ${space.id} and model = ${space.model}`;
      return rows.map((r) => ({ uuid: r.uuid, source: r.source, idx: r.idx, vec: bytesToVector(r.vec) }));
    },

    /** The search units of some vCons, whole (a local provider embeds them for semantic matches). */
    units(uuids: string[]): Promise<UnitRow[]> {
      return unitsOf(db, uuids);
    },

    /** Bodies of some units (for snippets of semantic matches), cut to `chars`. */
    async unitBodies(keys: { uuid: string; source: string; idx: number }[], chars = 4000): Promise<Map<string, string>> {
      if (keys.length === 0) return new Map();
      const rows = await db<{ uuid: string; source: string; idx: number; body: string }[]>`
        select su.vcon_uuid::text as uuid, su.source, su.idx, left(su.body, ${chars}) as body
        from ${unitRows(db)} su
        join unnest(${keys.map((k) => k.uuid)}::uuid[], ${keys.map((k) => k.source)}::text[], ${keys.map((k) => k.idx)}::int[]) as k(u, s, i)
          on su.vcon_uuid = k.u and su.source = k.s and su.idx = k.i`;
      return new Map(rows.map((r) => [`${r.uuid}/${r.source}/${r.idx}`, r.body]));
    },

    /** Whether some vCon has vectors of a space other than this one (a cheap scan of the codes). */
    async otherSpaces(space: VectorSpace): Promise<boolean> {
      const [r] = await db<{ other: boolean }[]>`
        select exists (select 1 from vcon_codes where provider <> ${space.id} or model <> ${space.model}) as other`;
      return r.other;
    },

    /** How many vCons have vectors, per space. */
    async spaces(): Promise<{ provider: string; model: string; vcons: number }[]> {
      return db<{ provider: string; model: string; vcons: number }[]>`
        select provider, model, count(*)::int as vcons from vcon_vectors group by provider, model order by vcons desc`;
    },
  };
}

export type SearchRepo = ReturnType<typeof createSearchRepo>;
