// Keyword, semantic and hybrid search (docs/api.md "Search"; docs/architecture.md "Search"): the use cases
// REST and MCP call. Parameters are validated here, hooks run here.
import { AppError } from '../domain/errors.js';
import { checkPagingCap, parseParams, SearchQuery as KeywordParams, VECTOR_PAGING_CAP, VectorSearchQuery } from '../domain/params.js';
import { runHook, type Plugin, type SearchCriteria } from '../plugins/hooks.js';
import type { RequestCtx } from './context.js';
import type { MatchRow, SearchFilters, SearchRepo, UnitVector } from '../db/search-repo.js';
import type { IndexQueueRepo } from '../db/index-queue-repo.js';
import type { EmbeddingProvider } from '../embeddings/types.js';
import { dot } from '../embeddings/text.js';
import { createCodeCache } from './search-code-cache.js';
import { classifyQuery, fuseRankings, keywordWeightOf } from './search-fusion.js';
import { clipSnippet, windowSnippet } from './search-snippets.js';
import { createKeywordRanker, type KeywordPlan } from './search-keyword.js';
import { embeddableUnits, type IndexState } from './search-indexer.js';
import { detectIdentifier, type Identifier } from './search-identifier.js';

export type SearchKind = 'content' | 'semantic' | 'hybrid';

/** The validated parameters of a search. */
export interface SearchQuery extends SearchFilters {
  q: string;
  limit: number;
  offset: number;
  /** Minimum cosine similarity of the semantic side (0..1). */
  threshold: number;
}

export interface SearchMatch {
  source: string;
  index: number;
  snippet: string;
}

export interface SearchResult {
  uuid: string;
  subject: string | null;
  created_at: string;
  score: number;
  matches: SearchMatch[];
  keyword_rank?: number | null;
  semantic_rank?: number | null;
}

export interface SearchResponse {
  /** Keyword and hybrid: the query as searched when words were corrected, else null. */
  corrected_query?: string | null;
  count: number;
  results: SearchResult[];
  pagination: { limit: number; offset: number; has_more: boolean };
  /** Whether the index held every vCon written before the search (set where the search waits for the index: src/search.ts). */
  index?: IndexState;
}

/** Raw parameters: strings from REST, typed values from MCP. */
export type SearchInput = Record<string, unknown>;

export { MAX_QUERY_CHARS, VECTOR_PAGING_CAP } from '../domain/params.js';
/** vCons of the first tier taken from the Hamming prefilter for the exact rerank. */
export const MIN_CANDIDATES = 200;
/** A tag filter matching at most this many vCons is searched in SQL through the tag index. */
export const SELECTIVE_TAG_VCONS = 5_000;
const MATCHES_PER_RESULT = 3;
/** A broad tag filter's vCon count is re-read this often. */
const TAG_COUNT_TTL_MS = 30_000;
const MAX_CACHED_TAG_COUNTS = 1_000;

/** Parses and validates the parameters of any of the three searches (domain/params.ts). */
export function parseSearchQuery(raw: SearchInput, kind: SearchKind): SearchQuery {
  if (kind === 'content') return { ...parseParams(KeywordParams, raw), threshold: 0 };
  const q = parseParams(VectorSearchQuery, raw);
  checkPagingCap(q, VECTOR_PAGING_CAP, `in ${kind} search`);
  return q;
}

interface SemanticHit {
  uuid: string;
  score: number;
  query: Float32Array;
}

export interface SearchServiceDeps {
  repo: SearchRepo;
  queue: Pick<IndexQueueRepo, 'stats'>;
  provider: EmbeddingProvider;
  plugins: readonly Plugin[];
  /** The first tier of candidates for the exact rerank (default MIN_CANDIDATES); each next tier doubles the total. */
  candidates?: number;
  /** Tag filters matching at most this many vCons take the SQL path (default SELECTIVE_TAG_VCONS). */
  selectiveTagVcons?: number;
}

/** The three searches. Each returns one result per vCon, best first, with its best matches. */
export function createSearchService(deps: SearchServiceDeps) {
  const { repo, provider, plugins } = deps;
  const space = () => ({ id: provider.id, model: provider.model });
  const codes = createCodeCache(repo, space());

  // Counts of broad tag filters, remembered a while: counting a tag a third of 100k vCons carry
  // takes ~5 ms, and a broad tag stays broad (it only picks the in-memory path and its widening).
  // A selective tag's count is cheap and decides the path, so it is always read.
  const tagCounts = new Map<string, { n: number; at: number }>();
  async function countTagged(tags: Record<string, string>): Promise<number> {
    const key = JSON.stringify(Object.entries(tags).sort(([a], [b]) => (a < b ? -1 : 1)));
    const hit = tagCounts.get(key);
    if (hit && Date.now() - hit.at <= TAG_COUNT_TTL_MS) return hit.n;
    const n = await repo.tagCount(tags);
    if (n > (deps.selectiveTagVcons ?? SELECTIVE_TAG_VCONS)) {
      if (tagCounts.size >= MAX_CACHED_TAG_COUNTS) tagCounts.clear();
      tagCounts.set(key, { n, at: Date.now() });
    }
    return n;
  }

  async function embedQuery(q: string): Promise<Float32Array> {
    try {
      const [v] = await provider.embed([q]);
      return v;
    } catch (err) {
      throw new AppError(503, 'embeddings_unavailable', `The embedding provider (${provider.id}) failed: ${(err as Error).message}`);
    }
  }

  /**
   * The candidates of the semantic ranking in tiers of fixed sizes: the `base` codes nearest the
   * query's, then the next `base`, the next 2·base, and so on (in memory, or in SQL when filtering
   * by a selective tag). Returns tier `[from, to)` of that order with the vCon vectors, and whether
   * no codes are left after it.
   */
  async function candidateTiers(q: SearchQuery, vec: Float32Array, likely: number) {
    const tagged = q.tags && Object.keys(q.tags).length > 0 ? q.tags : undefined;
    const tagCount = tagged ? await countTagged(tagged) : 0;
    if (tagged && tagCount <= (deps.selectiveTagVcons ?? SELECTIVE_TAG_VCONS)) {
      // A selective tag: SQL reaches its few vCons through the tag index and compares their codes.
      return async (from: number, to: number) => {
        const cands = await repo.vectorCandidates(space(), vec, q, to - from, from);
        return { cands, last: cands.length < to - from };
      };
    }
    await codes.sync();
    const window = { from: q.start_date?.getTime(), to: q.end_date?.getTime() };
    // The nearest codes in order (each read scans every code): first as deep as the ranking
    // likely reaches, deeper when a threshold or a broad tag left too few.
    let order: string[] = [];
    let all = false;
    let want = 0;
    const extend = async (to: number) => {
      want = to;
      if (tagged) {
        // A broad tag: proportionally more nearest codes, those with the tags kept (in order).
        const widen = Math.min(codes.size, Math.ceil((want * 1.5 * codes.size) / Math.max(1, tagCount)));
        const near = codes.nearest(vec, widen, window);
        order = await repo.withTags(near, tagged);
        all = near.length < widen || widen >= codes.size;
      } else {
        order = codes.nearest(vec, want, window);
        all = order.length < want;
      }
    };
    return async (from: number, to: number) => {
      while (order.length < to && !all) await extend(Math.max(to, likely, want * 2));
      const uuids = order.slice(from, to);
      const cands = await repo.vconVectors(space(), uuids);
      // Deleted or re-embedded vCons have no vector here any more: forget them.
      if (cands.length < uuids.length) {
        const found = new Set(cands.map((c) => c.uuid));
        codes.remove(uuids.filter((u) => !found.has(u)));
      }
      return { cands, last: all && order.length <= to };
    };
  }

  /**
   * The semantic ranking: the candidate tiers (candidateTiers), each ranked by the exact cosine of
   * the vCon vectors read from PostgreSQL, one tier after the other until `depth` results, or
   * until 3 candidates per result of the paging cap were ranked (a threshold that drops most
   * candidates must not rank the whole group). A vCon's place depends on the query and the data
   * only, never on the page asked for (a deeper page only ranks more tiers), so pages neither
   * repeat nor skip a vCon. The vCon vector (the embedding of its whole text, search-indexer.ts)
   * ranked better than its best unit on the development set and needs no unit vectors until the
   * page is known.
   */
  async function semanticRanked(q: SearchQuery, depth: number): Promise<SemanticHit[]> {
    const vec = await embedQuery(q.q);
    const base = deps.candidates ?? MIN_CANDIDATES;
    const tierEnd = (n: number) => {
      let end = base;
      while (end < n) end *= 2;
      return end;
    };
    const tier = await candidateTiers(q, vec, tierEnd(depth * 3));
    const reach = tierEnd((VECTOR_PAGING_CAP + 1) * 3);
    const hits: SemanticHit[] = [];
    for (let from = 0, to = base; hits.length < depth && from < reach; from = to, to *= 2) {
      const { cands, last } = await tier(from, to);
      hits.push(
        ...cands
          .map((c) => ({ uuid: c.uuid, score: dot(vec, c.vec), query: vec }))
          // No similarity is no result, whatever the threshold: a query the embedder has no word
          // of (a phone number) embeds to nothing and would otherwise list every vCon at 0.
          .filter((h) => h.score > 0 && h.score >= q.threshold)
          .sort((a, b) => b.score - a.score || (a.uuid < b.uuid ? 1 : -1)),
      );
      if (last) break;
    }
    return hits.slice(0, depth);
  }

  /**
   * Vectors of the embeddable units of some vCons. A local provider embeds the page's units now
   * (a few hundred texts, the same vectors as at indexing): storing a vector for every unit of
   * every vCon cost each indexing round more than the page's embed costs a search. A
   * remote provider's were stored by the indexer: a call to its API in every search would cost more.
   */
  async function unitVectors(uuids: string[]): Promise<UnitVector[]> {
    if (!provider.inline) return repo.unitVectors(space(), uuids);
    const units = embeddableUnits(await repo.units(uuids));
    const vecs = await provider.embed(units.map((u) => u.body));
    return units.map((u, i) => ({ uuid: u.uuid, source: u.source, idx: u.idx, vec: vecs[i] }));
  }

  /** The units of each hit closest to the query, with a snippet around the first query word. */
  async function semanticMatches(q: string, hits: SemanticHit[], threshold: number): Promise<Map<string, SearchMatch[]>> {
    if (hits.length === 0) return new Map();
    const units = await unitVectors(hits.map((h) => h.uuid));
    const qv = hits[0].query;
    const byVcon = new Map<string, { source: string; idx: number; score: number }[]>();
    for (const u of units) {
      const list = byVcon.get(u.uuid) ?? [];
      list.push({ source: u.source, idx: u.idx, score: dot(qv, u.vec) });
      byVcon.set(u.uuid, list);
    }
    const picks = hits.map((h) => ({
      uuid: h.uuid,
      units: (byVcon.get(h.uuid) ?? [])
        .filter((u) => u.score >= threshold)
        .sort((a, b) => b.score - a.score)
        .slice(0, MATCHES_PER_RESULT),
    }));
    const bodies = await repo.unitBodies(picks.flatMap((p) => p.units.map((u) => ({ uuid: p.uuid, source: u.source, idx: u.idx }))));
    return new Map(
      picks.map((p) => [
        p.uuid,
        p.units.flatMap((u) => {
          const body = bodies.get(`${p.uuid}/${u.source}/${u.idx}`);
          return body === undefined ? [] : [{ source: u.source, index: u.idx, snippet: windowSnippet(body, q) }];
        }),
      ]),
    );
  }

  const keywordMatchMap = (rows: MatchRow[]) => {
    const out = new Map<string, SearchMatch[]>();
    for (const r of rows) {
      const list = out.get(r.uuid) ?? [];
      list.push({ source: r.source, index: r.idx, snippet: clipSnippet(r.snippet) });
      out.set(r.uuid, list);
    }
    return out;
  };

  type Run = { results: SearchResult[]; has_more: boolean; corrected_query?: string | null };
  async function withHooks(kind: SearchKind, raw: SearchInput, ctx: RequestCtx, run: (q: SearchQuery) => Promise<Run>): Promise<SearchResponse> {
    const parsed = parseSearchQuery(raw, kind);
    const criteria: SearchCriteria = await runHook(plugins, 'beforeSearch', { kind, query: parsed as unknown as Record<string, unknown> }, ctx);
    // A hook may narrow the query; validate what it returns like any input.
    const q = criteria.query === (parsed as unknown) ? parsed : parseSearchQuery(hookedInput(criteria.query), kind);
    const { results, has_more, corrected_query } = await run(q);
    const out = (await runHook(plugins, 'afterSearch', results, { ...ctx, criteria })) as SearchResult[];
    const page = { count: out.length, results: out, pagination: { limit: q.limit, offset: q.offset, has_more } };
    return corrected_query === undefined ? page : { corrected_query, ...page };
  }

  /** Dates in a hook's query may be Date objects: turn them back into parameter strings. */
  const hookedInput = (query: Record<string, unknown>): SearchInput =>
    Object.fromEntries(Object.entries(query).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : v]));

  async function info(uuids: string[]) {
    return repo.info(uuids);
  }

  const keyword = createKeywordRanker({ repo, provider });
  /** The keyword ranking of a planned query (empty when no term can match). */
  const keywordRanked = (p: KeywordPlan, q: SearchQuery, limit: number, offset: number) =>
    p.terms.length === 0 ? Promise.resolve([]) : repo.keyword(p.terms, q, limit, offset, keyword.cap);
  /** BM25 sums grow with the query: scores are mapped to 0..1, order kept. */
  const unitScore = (s: number) => s / (1 + s);

  /**
   * The vCons an identifier query names, at most `depth`: those a party of which has the phone
   * number or e-mail address, or whose uuid it is (most recent first), then those whose text holds
   * it as written (a reference such as ORD-12345, an address or number in a transcript), by keyword
   * score. `terms` find its matches (snippets).
   */
  async function exactHits(id: Identifier, q: SearchQuery, depth: number): Promise<{ uuids: string[]; terms: KeywordPlan['terms'] }> {
    const forms = [...new Set([id.text, ...(id.digits ? [id.digits] : [])])];
    const [holders, ...plans] = await Promise.all([
      id.kind === 'reference' ? Promise.resolve([]) : repo.identifierVcons({ kind: id.kind, text: id.text, digits: id.digits }, q, depth),
      ...forms.map((f) => keyword.plan(`"${f}"`)),
    ]);
    const texts = await Promise.all(plans.map((p) => keywordRanked(p, q, depth, 0)));
    const uuids = [...new Set([...holders, ...texts.flat().map((r) => r.uuid)])].slice(0, depth);
    return { uuids, terms: plans.flatMap((p) => p.terms) };
  }

  /** A ranking with the exact hits first (marked `exact`) and the rest after them, each once. */
  function withExactFirst<T extends { uuid: string; score: number }>(exact: string[], ranked: T[]): (T & { exact?: boolean })[] {
    if (exact.length === 0) return ranked;
    const first = new Set(exact);
    const byUuid = new Map(ranked.map((r) => [r.uuid, r]));
    return [
      ...exact.map((uuid) => ({ ...(byUuid.get(uuid) ?? ({ uuid, score: 1 } as T)), exact: true })),
      ...ranked.filter((r) => !first.has(r.uuid)),
    ];
  }

  /** An identifier query's exact hits, or none: every route puts them first. */
  const exactFirst = (q: SearchQuery, depth: number) => {
    const id = detectIdentifier(q.q);
    return id ? exactHits(id, q, depth) : Promise.resolve({ uuids: [], terms: [] });
  };

  return {
    /**
     * Ranked keyword search: vCons matching more of the query's words, and rarer ones, first;
     * phrases required, -exclusions excluded, unknown words corrected (`corrected_query`).
     */
    content(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('content', raw, ctx, async (q) => {
        const want = q.offset + q.limit + 1;
        const [p, exact] = await Promise.all([keyword.plan(q.q), exactFirst(q, want)]);
        // An identifier's exact hits come first: the keyword ranking after them is read from the
        // top, as deep as the page reaches past them.
        const rows: { uuid: string; score: number; exact?: boolean }[] =
          exact.uuids.length === 0
            ? await keywordRanked(p, q, q.limit + 1, q.offset)
            : withExactFirst(exact.uuids, await keywordRanked(p, q, want + exact.uuids.length, 0)).slice(q.offset);
        const page = rows.slice(0, q.limit);
        const uuids = page.map((r) => r.uuid);
        const [meta, matchRows] = await Promise.all([info(uuids), repo.keywordMatches([...exact.terms, ...p.terms], uuids, MATCHES_PER_RESULT)]);
        const matches = keywordMatchMap(matchRows);
        const results = page.flatMap((r) => {
          const m = meta.get(r.uuid);
          return m
            ? [
                {
                  uuid: r.uuid,
                  subject: m.subject,
                  created_at: m.created_at,
                  score: r.exact ? 1 : unitScore(r.score),
                  matches: matches.get(r.uuid) ?? [],
                },
              ]
            : [];
        });
        return { results, has_more: rows.length > q.limit, corrected_query: p.corrected_query };
      });
    },

    /**
     * Embedding similarity (cosine); `threshold` (0..1, default DEFAULT_THRESHOLD) drops weaker
     * results. An identifier query's exact hits come first (score 1).
     */
    semantic(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('semantic', raw, ctx, async (q) => {
        const want = q.offset + q.limit + 1;
        const exact = await exactFirst(q, want);
        const ranked = withExactFirst(exact.uuids, await semanticRanked(q, want + exact.uuids.length));
        const page = ranked.slice(q.offset, q.offset + q.limit);
        const uuids = page.map((h) => h.uuid);
        const [meta, matches, exactRows] = await Promise.all([
          info(uuids),
          semanticMatches(
            q.q,
            page.filter((h) => !h.exact),
            q.threshold,
          ),
          repo.keywordMatches(
            exact.terms,
            page.filter((h) => h.exact).map((h) => h.uuid),
            MATCHES_PER_RESULT,
          ),
        ]);
        const exactMatches = keywordMatchMap(exactRows);
        const results = page.flatMap((h) => {
          const m = meta.get(h.uuid);
          if (!m) return [];
          const shown = (h.exact ? exactMatches : matches).get(h.uuid) ?? [];
          return [{ uuid: h.uuid, subject: m.subject, created_at: m.created_at, score: h.exact ? 1 : h.score, matches: shown }];
        });
        return { results, has_more: ranked.length > q.offset + q.limit };
      });
    },

    /**
     * The keyword and semantic rankings fused by their scaled scores, weighted by what the query
     * is (search-fusion.ts), after an identifier query's exact hits (score 1); a corrected query
     * is searched corrected on both sides.
     */
    hybrid(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('hybrid', raw, ctx, async (q) => {
        const want = q.offset + q.limit + 1;
        const exact = await exactFirst(q, want);
        const depth = Math.min(VECTOR_PAGING_CAP + 1, Math.max(100, 2 * want)) + exact.uuids.length;
        // The semantic side starts at once with the query as typed (the keyword plan of a
        // first-time query takes a few ms); a corrected query is searched again corrected.
        const asTyped = semanticRanked(q, depth);
        asTyped.catch(() => undefined);
        const p = await keyword.plan(q.q);
        const semantic = p.corrected_query ? semanticRanked({ ...q, q: p.corrected_query }, depth) : asTyped;
        const [kw, sem] = await Promise.all([keywordRanked(p, q, depth, 0), semantic]);
        const positive = p.terms.filter((t) => t.kind !== 'not').length;
        const kind = classifyQuery(p.corrected_query !== null, positive, kw[0]?.cover);
        const ranked = withExactFirst(exact.uuids, fuseRankings(kw, sem, keywordWeightOf(kind)));
        const page = ranked.slice(q.offset, q.offset + q.limit);
        const uuids = page.map((e) => e.uuid);
        const semHits = new Map(sem.map((h) => [h.uuid, h]));
        const [meta, kwRows, semMatches] = await Promise.all([
          info(uuids),
          repo.keywordMatches(
            [...exact.terms, ...p.terms],
            page.filter((e) => e.exact || e.keyword_rank !== null).map((e) => e.uuid),
            MATCHES_PER_RESULT,
          ),
          semanticMatches(
            q.q,
            page.flatMap((e) => (semHits.has(e.uuid) ? [semHits.get(e.uuid)!] : [])),
            q.threshold,
          ),
        ]);
        const kwMatches = keywordMatchMap(kwRows);
        const results = page.flatMap((e) => {
          const m = meta.get(e.uuid);
          if (!m) return [];
          // Keyword matches first (they show the hit words), then semantic ones on other units.
          const list = [...(kwMatches.get(e.uuid) ?? [])];
          for (const s of semMatches.get(e.uuid) ?? []) {
            if (list.length >= MATCHES_PER_RESULT) break;
            if (!list.some((x) => x.source === s.source && x.index === s.index)) list.push(s);
          }
          return [
            {
              uuid: e.uuid,
              subject: m.subject,
              created_at: m.created_at,
              score: e.exact ? 1 : e.score,
              matches: list,
              keyword_rank: e.keyword_rank ?? null,
              semantic_rank: e.semantic_rank ?? null,
            },
          ];
        });
        return { results, has_more: ranked.length > q.offset + q.limit, corrected_query: p.corrected_query };
      });
    },

    /** The vector space queries are compared in, and how many vCons each stored space holds. */
    async status() {
      return { provider: provider.id, model: provider.model, inline: provider.inline, spaces: await repo.spaces(), queue: await deps.queue.stats() };
    },
  };
}

export type SearchService = ReturnType<typeof createSearchService>;
