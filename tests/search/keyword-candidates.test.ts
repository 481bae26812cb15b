// The bounded work of ranked keyword search: candidates drawn from the rarest words
// first under a cap, exclusions and tag filters applied while drawing, and term counts taken from
// the planner's statistics once the table is analysed.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSearchRepo, type SearchRepo } from '../../src/db/search-repo.js';
import { createKeywordRanker } from '../../src/services/search-keyword.js';
import { internalCtx } from '../../src/services/context.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';

let t: TestSchema;
let repo: SearchRepo;

const doc = (turn: string, tags?: Record<string, string>) =>
  buildVcon({
    subject: 'Note',
    turns: [turn],
    attachments: tags ? [{ purpose: 'tags', encoding: 'json', body: Object.entries(tags).map(([k, v]) => `${k}:${v}`) }] : [],
  });
// "harbor" is rarer than "ferry": 4 vCons hold both, 6 only "ferry", 3 only "harbor".
const both = Array.from({ length: 4 }, (_, i) => doc(`The ferry left the harbor late, trip ${i}.`, i < 2 ? { desk: 'north' } : undefined));
const ferry = Array.from({ length: 6 }, (_, i) => doc(`The ferry was cancelled, trip ${i}.`, i < 2 ? { desk: 'north' } : undefined));
const harbor = Array.from({ length: 3 }, (_, i) => doc(`The harbor was closed, day ${i}.`));
// Every vCon with both words also says "storm": excluding it leaves the one-word vCons.
const stormy = Array.from({ length: 2 }, () => doc('A storm kept the ferry in the harbor.'));
const all = [...both, ...ferry, ...harbor, ...stormy];
const ids = (list: Record<string, unknown>[]) => new Set(list.map((v) => v.uuid as string));

beforeAll(async () => {
  t = await createTestSchema('kwcand');
  const services = createServices(t.sql, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
  const r = await services.vcons.batch(all, internalCtx, { waitFor: 'search' });
  expect(r.created).toBe(all.length);
  await services.stop();
  repo = createSearchRepo(t.sql);
});
afterAll(() => t?.drop());

/** The ranking of a query with a candidate cap of `cap` (no word is rare: all go through the cap). */
async function rank(q: string, cap: number, f = {}) {
  const ranker = createKeywordRanker({ repo, provider: {}, rareBudget: 0 });
  const p = await ranker.plan(q);
  return (await repo.keyword(p.terms, f, 100, 0, cap)).map((r) => r.uuid);
}

describe('candidates under a cap', () => {
  test('drawn from the vCons holding every word first', async () => {
    const got = await rank('ferry harbor', 6);
    expect(got).toHaveLength(6);
    // All 6 vCons with both words, none with one word only.
    expect(new Set(got)).toEqual(ids([...both, ...stormy]));
  });

  test('then those holding the rarer word, then the other words alone, while the cap allows', async () => {
    const got = await rank('ferry harbor', 9);
    expect(new Set(got.slice(0, 6))).toEqual(ids([...both, ...stormy]));
    expect(new Set(got.slice(6))).toEqual(ids(harbor));
    const wide = await rank('ferry harbor', 100);
    expect(new Set(wide)).toEqual(ids(all));
  });

  test('an exclusion is applied while drawing: the cap is not spent on excluded vCons', async () => {
    const got = await rank('ferry harbor -storm', 6);
    expect(got).toHaveLength(6);
    expect(got.some((u) => ids(stormy).has(u))).toBe(false);
    expect(new Set(got.slice(0, 4))).toEqual(ids(both));
  });

  test('a tag filter is applied while drawing', async () => {
    // Tagged: 2 vCons with both words, 2 with "ferry" only; the cap of 3 takes both of the first.
    const got = await rank('ferry harbor', 3, { tags: { desk: 'north' } });
    expect(got).toHaveLength(3);
    expect(new Set(got.slice(0, 2))).toEqual(ids(both.slice(0, 2)));
    expect(ids(ferry.slice(0, 2)).has(got[2])).toBe(true);
  });
});

describe('term counts', () => {
  test("a word among the planner's most common elements is estimated, others are counted up to the cap", async () => {
    const terms = [
      { kind: 'word' as const, text: 'ferry' },
      { kind: 'word' as const, text: 'harbor' },
      { kind: 'word' as const, text: 'zeppelin' },
    ];
    // Counted: stops at the cap.
    expect((await repo.termStats(terms, 2, all.length)).map((s) => s.df)).toEqual([2, 2, 0]);
    await t.sql`analyze vcon_search`;
    // Estimated from the statistics (every row is sampled here, so exact).
    expect((await repo.termStats(terms, 2, all.length)).map((s) => s.df)).toEqual([12, 9, 0]);
    // The sampled frequency scales with today's count, not the count at ANALYZE time.
    expect((await repo.termStats(terms, 2, 2 * all.length)).map((s) => s.df)).toEqual([24, 18, 0]);
    expect((await repo.termStats([{ kind: 'word', text: 'the' }], 2, all.length))[0]).toEqual({ content: false, df: 0 });
  });
});
