// Offset paging of the three searches (docs/api.md: a page never repeats a result of another page):
// many vCons that rank equal, or nearly, for the query. Paging through every page must serve each
// vCon exactly once, on every candidate path of semantic search (in-memory codes, a broad tag,
// a selective tag through SQL) and in hybrid search.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { internalCtx } from '../../src/services/context.js';
import { createSearchRepo } from '../../src/db/search-repo.js';
import { createIndexQueueRepo } from '../../src/db/index-queue-repo.js';
import { createSearchService, type SearchResponse } from '../../src/services/search-service.js';
import { createCodeIndex } from '../../src/embeddings/code-index.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';

const IDENTICAL = 300;
const NUMBERED = 60;

describe('paging through vCons that rank (nearly) equal', () => {
  let t: TestSchema;
  let services: ReturnType<typeof createServices>;
  const all = new Set<string>();

  beforeAll(async () => {
    t = await createTestSchema('paging');
    services = createServices(t.sql, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
    // Identical text (equal codes, equal scores), then text that differs only by a number
    // (near ties), the shape of E's reproduction (coord.md 01:31).
    const docs = [
      ...Array.from({ length: IDENTICAL }, () => buildVcon({ subject: 'Refund request', turns: ['I want a refund because the blender broke'] })),
      ...Array.from({ length: NUMBERED }, (_, i) =>
        buildVcon({ subject: `Refund request ${i}`, turns: [`I want a refund for order ${1000 + i} because the blender broke`] }),
      ),
    ];
    for (const d of docs) all.add(d.uuid as string);
    // Indexed before the first page: a search waits for the index at most SEARCH_CATCH_UP_MS.
    for (let i = 0; i < docs.length; i += 100)
      expect((await services.vcons.batch(docs.slice(i, i + 100), internalCtx, { waitFor: 'search' })).created).toBe(Math.min(100, docs.length - i));
  }, 120_000);
  afterAll(async () => {
    await services?.stop();
    await t?.drop();
  });

  /** Every page of a search, `limit` at a time, until has_more is false. */
  async function pageThrough(search: (p: Record<string, unknown>) => Promise<SearchResponse>, params: Record<string, unknown>, limit: number) {
    const seen: string[] = [];
    for (let offset = 0; ; offset += limit) {
      const r = await search({ ...params, limit, offset });
      seen.push(...r.results.map((x) => x.uuid));
      if (!r.pagination.has_more) return seen;
      expect(r.results).toHaveLength(limit);
    }
  }

  const expectEachOnce = (seen: string[], expected: Set<string>) => {
    const dup = seen.filter((u, i) => seen.indexOf(u) !== i);
    expect(dup, 'served twice').toEqual([]);
    expect(
      [...expected].filter((u) => !seen.includes(u)),
      'never served',
    ).toEqual([]);
    expect(seen).toHaveLength(expected.size);
  };

  test.each([100, 45])('semantic and hybrid pages of %i serve every vCon exactly once', async (limit) => {
    const q = 'blender refund';
    expectEachOnce(await pageThrough((p) => services.search.semantic(p, internalCtx), { q }, limit), all);
    expectEachOnce(await pageThrough((p) => services.search.hybrid(p, internalCtx), { q }, limit), all);
    expectEachOnce(await pageThrough((p) => services.search.content(p, internalCtx), { q }, limit), all);
  });

  test('the same pages from any depth: page k alone equals page k of a walk, and one deep page equals the pages before it', async () => {
    for (const kind of ['semantic', 'hybrid'] as const) {
      const search = (p: Record<string, unknown>) => services.search[kind]({ q: 'refund for order', ...p }, internalCtx);
      const deep = (await search({ limit: 100, offset: 0 })).results.map((r) => r.uuid);
      const walked: string[] = [];
      for (let offset = 0; offset < 100; offset += 10) walked.push(...(await search({ limit: 10, offset })).results.map((r) => r.uuid));
      expect(walked, kind).toEqual(deep);
      const fourth = (await search({ limit: 10, offset: 30 })).results.map((r) => r.uuid);
      expect(fourth, kind).toEqual(deep.slice(30, 40));
    }
  });

  test('semantic pages with a tag filter: through SQL (selective tag) and in memory (broad tag) alike', async () => {
    const tagged = new Set([...all].filter((_, i) => i % 3 !== 0));
    await Promise.all([...tagged].map((u) => services.tags.set(u, 'team', 'billing', internalCtx)));
    const provider = createEmbeddingProvider(parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
    const service = (selectiveTagVcons: number) =>
      createSearchService({ repo: createSearchRepo(t.sql), queue: createIndexQueueRepo(t.sql), provider, plugins: [], selectiveTagVcons });
    const params = { q: 'blender refund', tags: JSON.stringify({ team: 'billing' }) };
    for (const selective of [10_000, 0]) {
      const s = service(selective);
      expectEachOnce(await pageThrough((p) => s.semantic(p, internalCtx), params, 30), tagged);
      expectEachOnce(await pageThrough((p) => s.hybrid(p, internalCtx), params, 30), tagged);
    }
  });
});

describe('the in-memory code index', () => {
  const code = (bits: number[]) => {
    const w = new Uint32Array(8);
    for (const b of bits) w[b >> 5] |= 1 << (31 - (b & 31));
    return w;
  };

  test('nearest: closer codes first, equal distances in uuid order whatever the load order; a shorter answer is a prefix of a longer one', () => {
    const uuids = Array.from({ length: 40 }, (_, i) => `00000000-0000-4000-8000-${String(1000 + ((i * 17) % 40)).padStart(12, '0')}`);
    const build = (order: string[]) => {
      const idx = createCodeIndex();
      // Every 4th vCon one bit away from the query, the rest three bits away (ties within each).
      for (const u of order) idx.upsert(u, 0, code(uuids.indexOf(u) % 4 === 0 ? [1] : [1, 2, 3]));
      return idx;
    };
    const q = code([]);
    const a = build(uuids);
    const b = build([...uuids].reverse());
    const near = uuids.filter((_, i) => i % 4 === 0).sort();
    const far = uuids.filter((_, i) => i % 4 !== 0).sort();
    expect(a.nearest(q, 40)).toEqual([...near, ...far]);
    expect(b.nearest(q, 40)).toEqual([...near, ...far]);
    for (const k of [1, 5, 10, 11, 23]) {
      expect(a.nearest(q, k)).toEqual([...near, ...far].slice(0, k));
      expect(b.nearest(q, k)).toEqual(a.nearest(q, k));
    }
  });
});
