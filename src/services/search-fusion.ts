// Fusion of the keyword and semantic rankings of hybrid search: a weighted sum of each side's
// scaled scores, the weights chosen by what the query is (docs/search.md "The three searches"):
//   - keyword-like: the best keyword match holds every one of two or more query terms: keyword
//     ranking serves these best, its side weighs 0.8;
//   - misspelt: a word was corrected: the keyword side, which searched the corrected words, weighs 0.9;
//   - descriptive (anything else, a paraphrase of the conversation): the semantic side weighs 0.7.
// (An identifier query's exact hits come before either, search-service.ts.)
// Measured on the development set, every shape (MRR, 70 queries): chat 0.677, call 0.674, email
// 0.653, against 0.672, 0.665 and 0.643 for one fixed rule; per query type hybrid is at least the
// better of the two routes in every shape.

/** Each side is scaled over its first this many results. */
export const FUSION_DEPTH = 50;
/** The keyword side's share of the fused score for a descriptive query. */
export const DESCRIPTIVE_KEYWORD_WEIGHT = 0.3;
/** Its share for a keyword-like query. */
export const KEYWORD_LIKE_KEYWORD_WEIGHT = 0.8;
/** Its share for a misspelt query: the keyword side has the corrected words, the semantic side the query's meaning only. */
export const MISSPELT_KEYWORD_WEIGHT = 0.9;
/** A query's terms the best keyword match must hold all of to make the query keyword-like. */
export const KEYWORD_LIKE_MIN_TERMS = 2;

export type QueryKind = 'keyword' | 'misspelt' | 'descriptive';

export interface Fused {
  uuid: string;
  score: number;
  keyword_rank: number | null;
  semantic_rank: number | null;
}

interface Scored {
  uuid: string;
  score: number;
}

/**
 * What a query is, judged from the query and its keyword ranking: `corrected` (a word was
 * corrected), how many positive terms it searched, and the share of them (by weight) that the
 * best keyword match holds.
 */
export function classifyQuery(corrected: boolean, terms: number, bestCover: number | undefined): QueryKind {
  if (corrected) return 'misspelt';
  // A single word is held whole by any vCon that has it: it says nothing about the query's kind.
  return terms >= KEYWORD_LIKE_MIN_TERMS && (bestCover ?? 0) >= 1 - 1e-9 ? 'keyword' : 'descriptive';
}

/** The keyword side's weight for a kind of query. */
export const keywordWeightOf = (kind: QueryKind) =>
  kind === 'descriptive' ? DESCRIPTIVE_KEYWORD_WEIGHT : kind === 'misspelt' ? MISSPELT_KEYWORD_WEIGHT : KEYWORD_LIKE_KEYWORD_WEIGHT;

/**
 * Keyword scores scaled by the best one (0..1]: every keyword match adds to the fused score, in
 * proportion to its weight against the best's.
 */
function scaledKeyword(list: Scored[]): Map<string, number> {
  const best = list[0]?.score ?? 0;
  return new Map(list.slice(0, FUSION_DEPTH).map((h) => [h.uuid, best > 0 ? Math.max(0, h.score) / best : 0]));
}

/**
 * Similarities scaled from a floor (0) to the best (1). Unrelated texts are not at cosine 0 (the
 * embeddings share words and a common direction), so the floor is the head's last similarity or
 * half the best, whichever is lower; a similarity at or below it, and any of zero, adds nothing.
 */
function scaledSemantic(list: Scored[]): Map<string, number> {
  const head = list.slice(0, FUSION_DEPTH);
  if (head.length === 0) return new Map();
  const best = head[0].score;
  const floor = Math.max(0, Math.min(head[head.length - 1].score, best / 2));
  return new Map(head.map((h) => [h.uuid, best > floor && h.score > 0 ? Math.max(0, (h.score - floor) / (best - floor)) : 0]));
}

/**
 * Fuses two rankings (best first) with the keyword side weighted `keywordWeight`. A semantic hit
 * of zero similarity adds nothing, so it never ranks above a keyword match. Equal scores (those
 * below both heads score 0) go by the better of the two ranks, the keyword side first on a tie: so
 * the fused order of the first N is the same whether the sides were read N deep or deeper (each
 * at least FUSION_DEPTH), and pages of hybrid search neither repeat nor skip a vCon.
 */
export function fuseRankings(keyword: Scored[], semantic: Scored[], keywordWeight: number): Fused[] {
  const fused = new Map<string, Fused>();
  const entry = (uuid: string) => {
    let e = fused.get(uuid);
    if (!e) fused.set(uuid, (e = { uuid, score: 0, keyword_rank: null, semantic_rank: null }));
    return e;
  };
  const k = scaledKeyword(keyword);
  const s = scaledSemantic(semantic);
  keyword.forEach((h, i) => {
    const e = entry(h.uuid);
    e.keyword_rank = i + 1;
    e.score += keywordWeight * (k.get(h.uuid) ?? 0);
  });
  semantic.forEach((h, i) => {
    const e = entry(h.uuid);
    e.semantic_rank = i + 1;
    e.score += (1 - keywordWeight) * (s.get(h.uuid) ?? 0);
  });
  const best = (e: Fused) => Math.min(e.keyword_rank ?? Infinity, e.semantic_rank ?? Infinity);
  const bySide = (e: Fused) => (e.keyword_rank === best(e) ? 0 : 1);
  return [...fused.values()].sort((a, b) => b.score - a.score || best(a) - best(b) || bySide(a) - bySide(b) || (a.uuid < b.uuid ? 1 : -1));
}
