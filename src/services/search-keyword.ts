// Ranked keyword search: the query's terms weighted by this group's own statistics
// (BM25's idf), unknown words corrected from the group's vocabulary, and a bounded candidate set,
// so common words cost a capped amount of work at any size.
import type { RankedTerm, SearchRepo, TermInput } from '../db/search-repo.js';
import type { EmbeddingProvider } from '../embeddings/types.js';
import { parseKeywordQuery, rewriteQuery } from './search-query.js';

/** vCons counted per term at most: a common word's count stops here. */
export const DF_CAP = 1_000;
/** Terms draw candidates rarest first while their counts sum to at most this. */
export const RARE_BUDGET = 500;
/** At most this many candidates drawn from the words rarest first, beside those of the rare terms. */
export const CANDIDATE_CAP = 100;
/** The group's vCon count and term counts are re-read this often (a count moves slowly). */
const COUNT_TTL_MS = 30_000;
/** Term counts remembered at most. */
const MAX_CACHED_TERMS = 10_000;
/** Shortest word that is corrected (shorter ones have too many neighbours). */
const MIN_CORRECTED = 4;

export interface KeywordPlan {
  terms: RankedTerm[];
  /** The query as searched, when a word was corrected; else null. */
  corrected_query: string | null;
}

export function createKeywordRanker(deps: {
  repo: SearchRepo;
  provider: Pick<EmbeddingProvider, 'suggest'>;
  /** The counts of the rare terms may sum to this (default RARE_BUDGET). */
  rareBudget?: number;
}) {
  const { repo, provider } = deps;
  let count: { n: Promise<number>; at: number } | undefined;
  const docCount = () => {
    if (!count || Date.now() - count.at > COUNT_TTL_MS) {
      const n = repo.docCount();
      count = { n, at: Date.now() };
      // A failed count is not remembered.
      n.catch(() => (count = undefined));
    }
    return count.n;
  };
  // Term counts of recent queries: a repeated word costs no posting-list walk. A word found in no
  // vCon is not remembered, so a vCon written a moment ago is found (and not "corrected") at once.
  const cached = new Map<string, { content: boolean; df: number; at: number }>();
  async function termStats(terms: TermInput[]): Promise<{ content: boolean; df: number }[]> {
    const now = Date.now();
    const key = (t: TermInput) => `${t.kind === 'word' ? 'w' : 'p'}:${t.text.toLowerCase()}`;
    const fresh = (t: TermInput) => {
      const c = cached.get(key(t));
      return c && now - c.at <= COUNT_TTL_MS ? c : undefined;
    };
    const missing = terms.filter((t) => !fresh(t));
    if (missing.length > 0) {
      const got = await repo.termStats(missing, DF_CAP, await docCount());
      if (cached.size > MAX_CACHED_TERMS) cached.clear();
      missing.forEach((t, i) => {
        if (got[i].df > 0 || !got[i].content) cached.set(key(t), { ...got[i], at: now });
      });
      const byKey = new Map(missing.map((t, i) => [key(t), got[i]]));
      return terms.map((t) => fresh(t) ?? byKey.get(key(t))!);
    }
    return terms.map((t) => fresh(t)!);
  }

  // A word's spelling neighbours depend on the provider alone: remembered (a lookup in the
  // provider's on-disk table took 1-30 ms, and a word no vCon has is looked up on every query).
  const suggestions = new Map<string, Promise<{ known: boolean; words: string[] }>>();
  function suggest(word: string) {
    let s = suggestions.get(word);
    if (!s) {
      if (suggestions.size >= MAX_CACHED_TERMS) suggestions.clear();
      s = provider.suggest!(word);
      suggestions.set(word, s);
      s.catch(() => suggestions.delete(word));
    }
    return s;
  }

  /**
   * Words found in no vCon of the group, replaced by their closest spelling neighbour that is
   * (most frequent on ties). A word the group contains is never corrected.
   */
  async function corrections(terms: TermInput[], stats: { content: boolean; df: number }[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (!provider.suggest) return out;
    const unknown = terms.filter(
      (t, i) => t.kind === 'word' && stats[i].content && stats[i].df === 0 && t.text.length >= MIN_CORRECTED && /^\p{L}+$/u.test(t.text),
    );
    if (unknown.length === 0) return out;
    const suggested = await Promise.all(unknown.map((t) => suggest(t.text.toLowerCase())));
    // A common word the group lacks is a real word, not a typo: it stays (and matches nothing).
    const candidates = suggested.map((s) => (s.known ? [] : s.words));
    const found = await repo.present(candidates.flat());
    let k = 0;
    unknown.forEach((t, i) => {
      const hit = candidates[i].findIndex((_, j) => found[k + j]);
      if (hit >= 0) out.set(t.text, candidates[i][hit]);
      k += candidates[i].length;
    });
    return out;
  }

  /** The terms of a query with their weights, after correction. */
  async function plan(q: string): Promise<KeywordPlan> {
    let terms: TermInput[] = parseKeywordQuery(q);
    if (terms.length === 0) return { terms: [], corrected_query: null };
    const [n, first] = await Promise.all([docCount(), termStats(terms)]);
    let stats = first;
    const fixed = await corrections(terms, stats);
    if (fixed.size > 0) {
      terms = terms.map((t) => (t.kind === 'word' && fixed.has(t.text) ? { ...t, text: fixed.get(t.text)! } : t));
      stats = await termStats(terms);
    }
    // Rarest first: their postings are the candidates, within the budget.
    const order = terms
      .map((_, i) => i)
      .filter((i) => stats[i].content && stats[i].df > 0 && terms[i].kind !== 'not')
      .sort((a, b) => stats[a].df - stats[b].df);
    const rare = new Set<number>();
    let budget = deps.rareBudget ?? RARE_BUDGET;
    for (const i of order) {
      if (stats[i].df >= DF_CAP || stats[i].df > budget) break;
      budget -= stats[i].df;
      rare.add(i);
    }
    // Candidates are drawn from the words rarest first (search-repo.ts keyword).
    const step = new Map(order.filter((i) => terms[i].kind === 'word').map((i, k) => [i, k + 1]));
    const total = Math.max(n, 1);
    const ranked = terms.flatMap((t, i) => {
      if (!stats[i].content) return [];
      // An excluded term keeps its place; a positive one found nowhere can match nothing.
      if (t.kind !== 'not' && stats[i].df === 0 && t.kind === 'word') return [];
      const df = stats[i].df;
      return [{ ...t, idf: Math.log(1 + (total - df + 0.5) / (df + 0.5)), rare: rare.has(i), step: step.get(i) ?? 0 }];
    });
    return { terms: ranked, corrected_query: fixed.size > 0 ? rewriteQuery(q, fixed) : null };
  }

  return { plan, cap: CANDIDATE_CAP };
}
