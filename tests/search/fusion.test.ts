// Hybrid fusion by what the query is (search-fusion.ts): the keyword side dominates a keyword-like
// or misspelt query, the semantic side a descriptive one, and a semantic hit of zero similarity
// adds nothing. Pure functions: the rankings are given, no database.
import { describe, expect, test } from 'vitest';
import { classifyQuery, fuseRankings, keywordWeightOf } from '../../src/services/search-fusion.js';

const kw = (...scores: [string, number][]) => scores.map(([uuid, score]) => ({ uuid, score }));
const order = (fused: { uuid: string }[]) => fused.map((f) => f.uuid);

describe('fusion by query kind', () => {
  test('what a query is: misspelt when corrected, keyword-like when the best keyword match holds all of two or more terms', () => {
    expect(classifyQuery(true, 3, 0.4)).toBe('misspelt');
    expect(classifyQuery(false, 4, 1)).toBe('keyword');
    // One word is held whole by any vCon that has it; a partial cover is a description.
    expect(classifyQuery(false, 1, 1)).toBe('descriptive');
    expect(classifyQuery(false, 4, 0.6)).toBe('descriptive');
    expect(classifyQuery(false, 0, undefined)).toBe('descriptive');
  });

  // The keyword route's best holds every term far ahead of the rest; the semantic route prefers
  // another vCon a little.
  const keyword = kw(['exact', 4], ['partial', 1], ['other', 0.9]);
  const semantic = kw(['partial', 0.6], ['exact', 0.35], ['other', 0.3], ['far', 0.2]);

  test('the keyword side decides a keyword-like or misspelt query, the semantic side a descriptive one', () => {
    for (const kind of [classifyQuery(false, 4, 1), classifyQuery(true, 4, 0.7)]) {
      expect(order(fuseRankings(keyword, semantic, keywordWeightOf(kind)))[0], kind).toBe('exact');
    }
    // Close keyword scores: the keyword side barely tells them apart, the semantic side does.
    const flat = kw(['exact', 1.1], ['partial', 1], ['other', 0.9]);
    expect(order(fuseRankings(flat, semantic, keywordWeightOf(classifyQuery(false, 4, 0.5))))[0]).toBe('partial');
  });

  test('a semantic hit of zero similarity never ranks above a keyword match', () => {
    // Every semantic hit at 0: a query the embedder has no word of.
    const zero = ['a', 'b', 'c', 'd'].map((uuid) => ({ uuid, score: 0 }));
    for (const kind of ['keyword', 'misspelt', 'descriptive'] as const) {
      const fused = fuseRankings(kw(['match', 2]), zero, keywordWeightOf(kind));
      expect(fused[0].uuid).toBe('match');
      expect(fused.slice(1).every((f) => f.score === 0)).toBe(true);
    }
  });
});
