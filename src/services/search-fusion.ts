// Fusion of the keyword and semantic rankings of hybrid search.

/** Reciprocal rank fusion constant (Cormack et al.): damps the head of each list. */
export const RRF_K = 60;

export interface Fused {
  uuid: string;
  score: number;
  keyword_rank: number | null;
  semantic_rank: number | null;
}

/** Reciprocal rank fusion of two rankings (uuids, best first); ties go to the keyword rank. */
export function fuseRankings(keyword: string[], semantic: string[]): Fused[] {
  const fused = new Map<string, Fused>();
  const entry = (uuid: string) => {
    let e = fused.get(uuid);
    if (!e) fused.set(uuid, (e = { uuid, score: 0, keyword_rank: null, semantic_rank: null }));
    return e;
  };
  keyword.forEach((uuid, i) => {
    const e = entry(uuid);
    e.keyword_rank = i + 1;
    e.score += 1 / (RRF_K + i + 1);
  });
  semantic.forEach((uuid, i) => {
    const e = entry(uuid);
    e.semantic_rank = i + 1;
    e.score += 1 / (RRF_K + i + 1);
  });
  return [...fused.values()].sort(
    (a, b) => b.score - a.score || (a.keyword_rank ?? Infinity) - (b.keyword_rank ?? Infinity) || (a.uuid < b.uuid ? 1 : -1),
  );
}
