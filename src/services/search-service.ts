// Keyword, semantic and hybrid search (API.md "Search"; ARCHITECTURE.md "Search"): the use cases
// REST and MCP call. Parameters are validated here, hooks run here.
import { z } from 'zod';
import { AppError, InvalidParameterError } from '../domain/errors.js';
import { dateParam, intParam, MAX_PAGE, stringParam, tagsParam } from '../domain/queries.js';
import { runHook, type Plugin, type SearchCriteria } from '../plugins/hooks.js';
import type { RequestCtx } from './context.js';
import type { MatchRow, SearchFilters, SearchRepo, VectorSpace } from '../db/search-repo.js';
import type { EmbeddingProvider } from '../embeddings/types.js';
import { codeWords, createCodeIndex } from '../embeddings/code-index.js';
import { signCodeBytes } from '../embeddings/code.js';

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
  count: number;
  results: SearchResult[];
  pagination: { limit: number; offset: number; has_more: boolean };
}

/** Raw parameters: strings from REST, typed values from MCP. */
export type SearchInput = Record<string, unknown>;

export const MAX_QUERY_CHARS = 1000;
/** Semantic and hybrid rank a bounded candidate list; pages must end inside it. */
export const VECTOR_PAGING_CAP = 1000;
/** vCons taken from the Hamming prefilter for the exact rerank (at least). */
export const MIN_CANDIDATES = 200;
/** A tag filter matching at most this many vCons is searched in SQL through the tag index. */
export const SELECTIVE_TAG_VCONS = 5_000;
/** The in-memory code index is rebuilt from PostgreSQL this often (drops stale entries). */
export const CODE_RELOAD_MS = 10 * 60_000;
/**
 * Catching up re-reads codes written this long before the previous sync began, so a write whose
 * transaction committed just after that sync read the table is still picked up.
 */
export const CODE_OVERLAP_MS = 2_000;
/** Reciprocal rank fusion constant (Cormack et al.): damps the head of each list. */
export const RRF_K = 60;
export const SNIPPET_CHARS = 300;
const MATCHES_PER_RESULT = 3;

/** The search parameters as typed input (MCP inputSchema); parseSearchQuery still validates them. */
export const SearchInputSchema = z.object({
  q: z.string().min(1).max(MAX_QUERY_CHARS).describe('What to search for; keyword search understands "phrases", OR and -word'),
  limit: z.number().int().min(1).optional().describe('Results per page, default 10, capped at 100'),
  offset: z.number().int().min(0).optional().describe('Results to skip, default 0'),
  tags: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional().describe('Only vCons having every one of these tags'),
  start_date: z.string().optional().describe('YYYY-MM-DD or RFC 3339; on created_at'),
  end_date: z.string().optional().describe('YYYY-MM-DD (whole day) or RFC 3339; on created_at'),
  threshold: z.number().min(0).max(1).optional().describe('Semantic and hybrid only: minimum cosine similarity, default 0'),
});

/** Parses and validates the parameters of any of the three searches. */
export function parseSearchQuery(raw: SearchInput, kind: SearchKind): SearchQuery {
  const q = stringParam('q', raw.q, { min: 1, max: MAX_QUERY_CHARS });
  if (q === undefined) throw new InvalidParameterError('q', 'is required: the text to search for (1 to 1000 characters)');
  if (q.trim() === '') throw new InvalidParameterError('q', 'must not be blank');
  const limit = Math.min(intParam('limit', raw.limit, { def: 10, min: 1 }), MAX_PAGE);
  const offset = intParam('offset', raw.offset, { def: 0, min: 0 });
  let threshold = 0;
  if (raw.threshold !== undefined && raw.threshold !== null && raw.threshold !== '') {
    const t = typeof raw.threshold === 'number' ? raw.threshold : typeof raw.threshold === 'string' && /^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/.test(raw.threshold) ? Number(raw.threshold) : NaN;
    if (!Number.isFinite(t) || t < 0 || t > 1) throw new InvalidParameterError('threshold', `must be a number from 0 to 1, got ${JSON.stringify(raw.threshold)}`);
    threshold = t;
  }
  if (kind !== 'content' && offset + limit > VECTOR_PAGING_CAP) {
    throw new AppError(400, 'paging_cap_exceeded', `offset + limit may not pass ${VECTOR_PAGING_CAP} in ${kind} search`, [
      { path: 'offset', message: `offset + limit must be ≤ ${VECTOR_PAGING_CAP}` },
    ]);
  }
  return {
    q,
    limit,
    offset,
    threshold,
    tags: tagsParam('tags', raw.tags),
    start_date: dateParam('start_date', raw.start_date, 'start'),
    end_date: dateParam('end_date', raw.end_date, 'end'),
  };
}

const dot = (a: Float32Array, b: Float32Array) => {
  let s = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) s += a[i] * b[i];
  return s;
};

/** Collapses whitespace and cuts at a word boundary, marking cuts with an ellipsis. */
export function clipSnippet(text: string, max = SNIPPET_CHARS): string {
  const s = text.replace(/\s+/g, ' ').trim();
  if (s.length <= max) return s;
  const cut = s.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${space > max * 0.6 ? cut.slice(0, space) : cut}…`;
}

/** A window of a unit's text around the first query word it contains (its start otherwise). */
export function windowSnippet(body: string, q: string, max = SNIPPET_CHARS): string {
  const text = body.replace(/\s+/g, ' ').trim();
  if (text.length <= max) return text;
  const lower = text.toLowerCase();
  const words = q.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? [];
  let at = -1;
  for (const w of words) {
    const i = lower.indexOf(w.length > 5 ? w.slice(0, w.length - 2) : w);
    if (i >= 0 && (at < 0 || i < at)) at = i;
  }
  if (at < 0) return clipSnippet(text, max);
  let start = Math.max(0, at - Math.floor(max / 3));
  const sp = text.lastIndexOf(' ', start);
  if (start > 0 && sp > start - 20) start = sp + 1;
  const head = start > 0 ? '…' : '';
  return head + clipSnippet(text.slice(start), max - head.length);
}

interface SemanticHit {
  uuid: string;
  score: number;
  query: Float32Array;
}

export interface SearchServiceDeps {
  repo: SearchRepo;
  provider: EmbeddingProvider;
  plugins: readonly Plugin[];
  /** Candidates for the exact rerank (default MIN_CANDIDATES, more for deep pages). */
  candidates?: number;
  /** Tag filters matching at most this many vCons take the SQL path (default SELECTIVE_TAG_VCONS). */
  selectiveTagVcons?: number;
}

/** The three searches. Each returns one result per vCon, best first, with its best matches. */
export function createSearchService(deps: SearchServiceDeps) {
  const { repo, provider, plugins } = deps;
  const space = (): VectorSpace => ({ id: provider.id, model: provider.model });

  async function embedQuery(q: string): Promise<Float32Array> {
    try {
      const [v] = await provider.embed([q]);
      return v;
    } catch (err) {
      throw new AppError(503, 'embeddings_unavailable', `The embedding provider (${provider.id}) failed: ${(err as Error).message}`);
    }
  }

  // The candidate stage: the sign codes of this space, in memory, caught up before every query.
  let index = createCodeIndex();
  let loadedAt = 0;
  /** Database clock at the start of the last sync. */
  let syncedAt = 0;
  let fullLoad: Promise<void> | null = null;

  async function syncCodes(): Promise<void> {
    if (Date.now() - loadedAt > CODE_RELOAD_MS) {
      fullLoad ??= (async () => {
        const { now, rows } = await repo.codes(space(), null);
        const fresh = createCodeIndex();
        for (const r of rows) fresh.upsert(r.uuid, r.created_at.getTime(), codeWords(r.code.subarray(4)));
        index = fresh;
        syncedAt = Math.max(syncedAt, now.getTime());
        loadedAt = Date.now();
      })().finally(() => {
        fullLoad = null;
      });
      await fullLoad;
    }
    // Always catch up, also after a shared full load that began before this request's own writes.
    const { now, rows } = await repo.codes(space(), new Date(syncedAt - CODE_OVERLAP_MS));
    for (const r of rows) index.upsert(r.uuid, r.created_at.getTime(), codeWords(r.code.subarray(4)));
    syncedAt = Math.max(syncedAt, now.getTime());
  }

  /**
   * The semantic ranking: the nearest codes (in memory, or in SQL when filtering by tags), then the
   * exact cosine of the vCon vectors read from PostgreSQL. The vCon vector (the mean of its unit
   * vectors) ranked as well as the best unit on the labelled set and needs no unit vectors until
   * the page is known.
   */
  async function semanticRanked(q: SearchQuery, depth: number): Promise<SemanticHit[]> {
    const vec = await embedQuery(q.q);
    const n = Math.max(deps.candidates ?? MIN_CANDIDATES, depth * 3);
    let cands: { uuid: string; vec: Float32Array }[];
    const tagged = q.tags && Object.keys(q.tags).length > 0 ? q.tags : undefined;
    const tagCount = tagged ? await repo.tagCount(tagged) : 0;
    if (tagged && tagCount <= (deps.selectiveTagVcons ?? SELECTIVE_TAG_VCONS)) {
      // A selective tag: SQL reaches its few vCons through the tag index and compares their codes.
      cands = await repo.vectorCandidates(space(), vec, q, n);
    } else {
      await syncCodes();
      const window = { from: q.start_date?.getTime(), to: q.end_date?.getTime() };
      let uuids: string[];
      if (tagged) {
        // A broad tag: take proportionally more nearest codes, keep those with the tags.
        const widen = Math.min(index.size, Math.ceil((n * 1.5 * index.size) / Math.max(1, tagCount)));
        uuids = (await repo.withTags(index.nearest(codeWords(signCodeBytes(vec)), widen, window), tagged)).slice(0, n);
      } else {
        uuids = index.nearest(codeWords(signCodeBytes(vec)), n, window);
      }
      cands = await repo.vconVectors(space(), uuids);
      // Deleted or re-embedded vCons have no vector here any more: forget them.
      if (cands.length < uuids.length) {
        const found = new Set(cands.map((c) => c.uuid));
        for (const u of uuids) if (!found.has(u)) index.remove(u);
      }
    }
    return cands
      .map((c) => ({ uuid: c.uuid, score: dot(vec, c.vec) }))
      .filter((h) => h.score >= q.threshold)
      .sort((a, b) => b.score - a.score || (a.uuid < b.uuid ? 1 : -1))
      .slice(0, depth)
      .map((h) => ({ ...h, query: vec }));
  }

  /** The units of each hit closest to the query, with a snippet around the first query word. */
  async function semanticMatches(q: string, hits: SemanticHit[], threshold: number): Promise<Map<string, SearchMatch[]>> {
    if (hits.length === 0) return new Map();
    const units = await repo.unitVectors(space(), hits.map((h) => h.uuid));
    const qv = hits[0].query;
    const byVcon = new Map<string, { source: string; idx: number; score: number }[]>();
    for (const u of units) {
      const list = byVcon.get(u.uuid) ?? [];
      list.push({ source: u.source, idx: u.idx, score: dot(qv, u.vec) });
      byVcon.set(u.uuid, list);
    }
    const picks = hits.map((h) => ({
      uuid: h.uuid,
      units: (byVcon.get(h.uuid) ?? []).filter((u) => u.score >= threshold).sort((a, b) => b.score - a.score).slice(0, MATCHES_PER_RESULT),
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

  async function withHooks(kind: SearchKind, raw: SearchInput, ctx: RequestCtx, run: (q: SearchQuery) => Promise<{ results: SearchResult[]; has_more: boolean }>): Promise<SearchResponse> {
    const parsed = parseSearchQuery(raw, kind);
    const criteria: SearchCriteria = await runHook(plugins, 'beforeSearch', { kind, query: parsed as unknown as Record<string, unknown> }, ctx);
    // A hook may narrow the query; validate what it returns like any input.
    const q = criteria.query === (parsed as unknown) ? parsed : parseSearchQuery(hookedInput(criteria.query), kind);
    const { results, has_more } = await run(q);
    const out = (await runHook(plugins, 'afterSearch', results, { ...ctx, criteria })) as SearchResult[];
    return { count: out.length, results: out, pagination: { limit: q.limit, offset: q.offset, has_more } };
  }

  /** Dates in a hook's query may be Date objects: turn them back into parameter strings. */
  const hookedInput = (query: Record<string, unknown>): SearchInput =>
    Object.fromEntries(Object.entries(query).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : v]));

  async function info(uuids: string[]) {
    return repo.info(uuids);
  }

  return {
    /** Full-text search over the search units: websearch syntax, ts_rank_cd, ts_headline snippets. */
    content(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('content', raw, ctx, async (q) => {
        const rows = await repo.keyword(q.q, q, q.limit + 1, q.offset);
        const page = rows.slice(0, q.limit);
        const uuids = page.map((r) => r.uuid);
        const [meta, matchRows] = await Promise.all([info(uuids), repo.keywordMatches(q.q, uuids, MATCHES_PER_RESULT)]);
        const matches = keywordMatchMap(matchRows);
        const results = page.flatMap((r) => {
          const m = meta.get(r.uuid);
          return m ? [{ uuid: r.uuid, subject: m.subject, created_at: m.created_at, score: r.score, matches: matches.get(r.uuid) ?? [] }] : [];
        });
        return { results, has_more: rows.length > q.limit };
      });
    },

    /** Embedding similarity (cosine); `threshold` (0..1, default 0) drops weaker results. */
    semantic(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('semantic', raw, ctx, async (q) => {
        const ranked = await semanticRanked(q, q.offset + q.limit + 1);
        const page = ranked.slice(q.offset, q.offset + q.limit);
        const uuids = page.map((h) => h.uuid);
        const [meta, matches] = await Promise.all([info(uuids), semanticMatches(q.q, page, q.threshold)]);
        const results = page.flatMap((h) => {
          const m = meta.get(h.uuid);
          return m ? [{ uuid: h.uuid, subject: m.subject, created_at: m.created_at, score: h.score, matches: matches.get(h.uuid) ?? [] }] : [];
        });
        return { results, has_more: ranked.length > q.offset + q.limit };
      });
    },

    /** Reciprocal rank fusion (k = 60) of the keyword and semantic rankings. */
    hybrid(raw: SearchInput, ctx: RequestCtx): Promise<SearchResponse> {
      return withHooks('hybrid', raw, ctx, async (q) => {
        const depth = Math.min(VECTOR_PAGING_CAP + 1, Math.max(100, 2 * (q.offset + q.limit + 1)));
        const [kw, sem] = await Promise.all([repo.keyword(q.q, q, depth, 0), semanticRanked(q, depth)]);
        const fused = new Map<string, { uuid: string; score: number; keyword_rank: number | null; semantic_rank: number | null }>();
        const entry = (uuid: string) => {
          let e = fused.get(uuid);
          if (!e) fused.set(uuid, (e = { uuid, score: 0, keyword_rank: null, semantic_rank: null }));
          return e;
        };
        kw.forEach((r, i) => {
          const e = entry(r.uuid);
          e.keyword_rank = i + 1;
          e.score += 1 / (RRF_K + i + 1);
        });
        sem.forEach((h, i) => {
          const e = entry(h.uuid);
          e.semantic_rank = i + 1;
          e.score += 1 / (RRF_K + i + 1);
        });
        const ranked = [...fused.values()].sort(
          (a, b) => b.score - a.score || (a.keyword_rank ?? Infinity) - (b.keyword_rank ?? Infinity) || (a.uuid < b.uuid ? 1 : -1),
        );
        const page = ranked.slice(q.offset, q.offset + q.limit);
        const uuids = page.map((e) => e.uuid);
        const semHits = new Map(sem.map((h) => [h.uuid, h]));
        const [meta, kwRows, semMatches] = await Promise.all([
          info(uuids),
          repo.keywordMatches(q.q, page.filter((e) => e.keyword_rank !== null).map((e) => e.uuid), MATCHES_PER_RESULT),
          semanticMatches(q.q, page.flatMap((e) => (semHits.has(e.uuid) ? [semHits.get(e.uuid)!] : [])), q.threshold),
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
          return [{ uuid: e.uuid, subject: m.subject, created_at: m.created_at, score: e.score, matches: list, keyword_rank: e.keyword_rank, semantic_rank: e.semantic_rank }];
        });
        return { results, has_more: ranked.length > q.offset + q.limit };
      });
    },

    /** The vector space queries are compared in, and how many vCons each stored space holds. */
    async status() {
      return { provider: provider.id, model: provider.model, inline: provider.inline, spaces: await repo.spaces(), queue: await repo.queueStats() };
    },
  };
}

export type SearchService = ReturnType<typeof createSearchService>;

interface WorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * Drains the embedding queue for a remote provider: claims a batch (SKIP LOCKED, so several
 * instances share the work), embeds the stored units, writes the vectors, and logs the lag.
 */
export function createEmbeddingWorker(deps: {
  repo: SearchRepo;
  transact: <T>(fn: (repo: SearchRepo) => Promise<T>) => Promise<T>;
  provider: EmbeddingProvider;
  log: WorkerLog;
  batch?: number;
  idleMs?: number;
}) {
  const { repo, transact, provider, log } = deps;
  const batch = deps.batch ?? 32;
  const idleMs = deps.idleMs ?? 1000;
  let timer: NodeJS.Timeout | undefined;
  let stopped = true;
  let running: Promise<number> | undefined;

  /** One round: returns how many vCons were embedded. */
  async function drainOnce(): Promise<number> {
    const claims = await repo.claim(batch);
    if (claims.length === 0) return 0;
    const units = await repo.units(claims.map((c) => c.uuid));
    let done = 0;
    try {
      await transact(async (tx) => {
        const meta = await tx.info(claims.map((c) => c.uuid));
        const items = claims.flatMap((c) => {
          const m = meta.get(c.uuid);
          return m ? [{ uuid: c.uuid, created_at: m.stored_created_at, units: units.get(c.uuid) ?? [] }] : [];
        });
        // Only vCons not re-queued meanwhile get these vectors; the rest go round again.
        const current: typeof items = [];
        for (const it of items) {
          const claim = claims.find((c) => c.uuid === it.uuid)!;
          if (await tx.complete(it.uuid, claim.stamp)) current.push(it);
        }
        done = await tx.writeVectors(provider, current, { force: true });
      });
    } catch (err) {
      for (const c of claims) await repo.fail(c.uuid, (err as Error).message).catch(() => undefined);
      throw err;
    }
    const stats = await repo.queueStats();
    log.info({ embedded: done, pending: stats.pending, lag_s: stats.oldest_s }, 'embedding queue drained a batch');
    return done;
  }

  const loop = async () => {
    if (stopped) return;
    let n = 0;
    try {
      running = drainOnce();
      n = await running;
    } catch (err) {
      // The instance closed its pool: nothing more to drain in this process.
      if ((err as { code?: string }).code === 'CONNECTION_ENDED') stopped = true;
      else if (!stopped) log.warn({ err: (err as Error).message }, 'embedding worker round failed');
    } finally {
      running = undefined;
    }
    if (!stopped) {
      timer = setTimeout(loop, n > 0 ? 0 : idleMs);
      timer.unref();
    }
  };

  return {
    drainOnce,
    start() {
      if (!stopped) return;
      stopped = false;
      timer = setTimeout(loop, 0);
      timer.unref();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
    },
  };
}
