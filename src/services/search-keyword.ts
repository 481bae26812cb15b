// Ranked keyword search (issue 16): the query's terms weighted by this group's own statistics
// (BM25's idf), unknown words corrected from the group's vocabulary, and a bounded candidate set,
// so common words cost a capped amount of work at any size.
import type { RankedTerm, SearchRepo, TermInput } from '../db/search-repo.js';
import type { EmbeddingProvider } from '../embeddings/types.js';
import { parseKeywordQuery, rewriteQuery } from './search-query.js';

/** vCons counted per term at most: a common word's count stops here. */
export const DF_CAP = 5_000;
/** Terms draw candidates rarest first while their counts sum to at most this. */
export const RARE_BUDGET = 5_000;
/** At most this many candidates holding every term, and (no rare term) holding any. */
export const CANDIDATE_CAP = 1_000;
/** The group's vCon count is re-read this often. */
const COUNT_TTL_MS = 30_000;
/** Shortest word that is corrected (shorter ones have too many neighbours). */
const MIN_CORRECTED = 4;

export interface KeywordPlan {
  terms: RankedTerm[];
  /** The query as searched, when a word was corrected; else null. */
  corrected_query: string | null;
}

export function createKeywordRanker(deps: { repo: SearchRepo; provider: Pick<EmbeddingProvider, 'suggest'> }) {
  const { repo, provider } = deps;
  let count: { n: number; at: number } | undefined;
  const docCount = async () => {
    if (!count || Date.now() - count.at > COUNT_TTL_MS) count = { n: await repo.docCount(), at: Date.now() };
    return count.n;
  };

  /**
   * Words found in no vCon of the group, replaced by their closest spelling neighbour that is
   * (most frequent on ties). A word the group contains is never corrected.
   */
  async function corrections(terms: TermInput[], stats: { content: boolean; df: number }[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (!provider.suggest) return out;
    const unknown = terms.filter((t, i) => t.kind === 'word' && stats[i].content && stats[i].df === 0 && t.text.length >= MIN_CORRECTED && /^\p{L}+$/u.test(t.text));
    if (unknown.length === 0) return out;
    const suggested = await Promise.all(unknown.map((t) => provider.suggest!(t.text)));
    const flat = suggested.flatMap((s) => s.words);
    const found = await repo.termStats(flat.map((text) => ({ kind: 'word', text })), DF_CAP);
    let k = 0;
    unknown.forEach((t, i) => {
      const words = suggested[i].words;
      const hit = words.findIndex((_, j) => found[k + j].df > 0);
      // A common word the group lacks is a real word, not a typo: it stays (and matches nothing).
      if (hit >= 0 && !suggested[i].known) out.set(t.text, words[hit]);
      k += words.length;
    });
    return out;
  }

  /** The terms of a query with their weights, after correction. */
  async function plan(q: string): Promise<KeywordPlan> {
    let terms: TermInput[] = parseKeywordQuery(q);
    if (terms.length === 0) return { terms: [], corrected_query: null };
    const [n, first] = await Promise.all([docCount(), repo.termStats(terms, DF_CAP)]);
    let stats = first;
    const fixed = await corrections(terms, stats);
    if (fixed.size > 0) {
      terms = terms.map((t) => (t.kind === 'word' && fixed.has(t.text) ? { ...t, text: fixed.get(t.text)! } : t));
      stats = await repo.termStats(terms, DF_CAP);
    }
    // Rarest first: their postings are the candidates, within the budget.
    const order = terms.map((_, i) => i).filter((i) => stats[i].content && stats[i].df > 0 && terms[i].kind !== 'not').sort((a, b) => stats[a].df - stats[b].df);
    const rare = new Set<number>();
    let budget = RARE_BUDGET;
    for (const i of order) {
      if (stats[i].df >= DF_CAP || stats[i].df > budget) break;
      budget -= stats[i].df;
      rare.add(i);
    }
    const total = Math.max(n, 1);
    const ranked = terms.flatMap((t, i) => {
      if (!stats[i].content) return [];
      // An excluded term keeps its place; a positive one found nowhere can match nothing.
      if (t.kind !== 'not' && stats[i].df === 0 && t.kind === 'word') return [];
      const df = stats[i].df;
      return [{ ...t, idf: Math.log(1 + (total - df + 0.5) / (df + 0.5)), rare: rare.has(i) }];
    });
    return { terms: ranked, corrected_query: fixed.size > 0 ? rewriteQuery(q, fixed) : null };
  }

  return { plan, cap: CANDIDATE_CAP };
}
