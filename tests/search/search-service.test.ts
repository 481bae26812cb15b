// The search service over real PostgreSQL: the labelled retrieval set through the SQL path,
// vector spaces kept apart, re-embedding, and the background queue of a remote provider.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSearch, reembedGroup } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { embedHashed } from '../../src/embeddings/hashing.js';
import { internalCtx } from '../../src/services/context.js';
import { loadRetrievalSet } from '../../scripts/embeddings/quality.js';
import { createSearchRepo } from '../../src/db/search-repo.js';
import { createIndexQueueRepo } from '../../src/db/index-queue-repo.js';
import { bytesToVector, signCodeBytes } from '../../src/embeddings/code.js';
import { createSearchService } from '../../src/services/search-service.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';
import { decodeBodies, extractUnits } from '../../src/search/units.js';
import { legacyUnitsSig } from '../../src/services/search-indexer.js';
import type { JsonObject } from '../../src/domain/vcon.js';
import { waitFor } from '../helpers/poll.js';

const configFor = (schema: string, env: Record<string, string> = {}) =>
  parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent', ...env });

describe('labelled retrieval set through the SQL path', () => {
  let t: TestSchema;
  const set = loadRetrievalSet();
  const ids = new Map<string, string>();

  beforeAll(async () => {
    t = await createTestSchema('search');
    const services = createServices(t.sql, configFor(t.schema));
    const docs = set.conversations.map((c) => {
      const v = buildVcon({ subject: c.subject, turns: c.turns });
      ids.set(v.uuid as string, c.id);
      return v;
    });
    const r = await services.vcons.batch(docs, internalCtx);
    expect(r.created).toBe(docs.length);
  });
  afterAll(() => t?.drop());

  test('the default provider finds paraphrases (R@1 ≥ 0.7) and beats hashing on them', async () => {
    const recall = async (services: ReturnType<typeof createServices>) => {
      const para = set.queries.filter((q) => q.kind === 'paraphrase');
      let hits = 0;
      for (const q of para) {
        const r = await services.search.semantic({ q: q.q, limit: '1' }, internalCtx);
        if (ids.get(r.results[0]?.uuid) === q.target) hits++;
      }
      return hits / para.length;
    };
    const glove = createServices(t.sql, configFor(t.schema));
    const def = await recall(glove);
    expect(def).toBeGreaterThanOrEqual(0.7);
    // Hashing vectors for the same vCons, in their own space beside nothing else: re-embed.
    const hashingServices = createServices(t.sql, configFor(t.schema, { EMBEDDINGS_PROVIDER: 'hashing' }));
    await reembedGroup(t.sql, createEmbeddingProvider(configFor(t.schema, { EMBEDDINGS_PROVIDER: 'hashing' })));
    const hashing = await recall(hashingServices);
    expect(def).toBeGreaterThan(hashing);
    // Back to the default space for the other tests.
    await reembedGroup(t.sql, createEmbeddingProvider(configFor(t.schema)));
  });

  test('the in-memory codes match the stored ones, and a tight candidate budget keeps the top results', async () => {
    const rows = await t.sql<{ code: Buffer; vec: Buffer }[]>`
      select varbit_send(c.code) as code, v.vec from vcon_codes c join vcon_vectors v using (vcon_uuid) limit 5`;
    for (const r of rows) expect([...r.code.subarray(4)]).toEqual([...signCodeBytes(bytesToVector(r.vec))]);
    const provider = createEmbeddingProvider(configFor(t.schema));
    const wide = createSearchService({ repo: createSearchRepo(t.sql), queue: createIndexQueueRepo(t.sql), provider, plugins: [] });
    // A first tier of 6 candidates out of 45 vCons (limit 1 needs no more): the Hamming stage has to pick the right ones.
    const tight = createSearchService({
      repo: createSearchRepo(t.sql),
      queue: createIndexQueueRepo(t.sql),
      provider,
      plugins: [],
      candidates: 6,
    });
    let same = 0;
    for (const q of set.queries) {
      const [a, b] = await Promise.all([wide.semantic({ q: q.q, limit: 1 }, internalCtx), tight.semantic({ q: q.q, limit: 1 }, internalCtx)]);
      if (a.results[0]?.uuid === b.results[0]?.uuid) same++;
    }
    expect(same / set.queries.length).toBeGreaterThanOrEqual(0.85);
  });

  test('a paraphrase with no shared keyword finds its conversation', async () => {
    const services = createServices(t.sql, configFor(t.schema));
    const q = 'unauthorized foreign transactions';
    const r = await services.search.semantic({ q }, internalCtx);
    expect(ids.get(r.results[0].uuid)).toBe('c20');
    const h = await services.search.hybrid({ q }, internalCtx);
    expect(ids.get(h.results[0].uuid)).toBe('c20');
    expect(h.results[0]).toMatchObject({ semantic_rank: 1 });
  });
});

describe('vector spaces', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('search');
  });
  afterAll(() => t?.drop());

  test('a query is never compared with vectors of another provider; re-embedding moves the group', async () => {
    const hashingCfg = configFor(t.schema, { EMBEDDINGS_PROVIDER: 'hashing' });
    const hashing = createServices(t.sql, hashingCfg);
    const glove = createServices(t.sql, configFor(t.schema));
    // Its index worker would index the hashing instance's write in its own space (one group runs one provider).
    await glove.stop();
    const v = buildVcon({ subject: 'Lost luggage', turns: ['My suitcase did not arrive on the carousel after the flight.'] });
    await hashing.vcons.create(v, internalCtx);
    expect((await hashing.search.semantic({ q: 'suitcase missing' }, internalCtx)).results.map((r) => r.uuid)).toEqual([v.uuid]);
    // Stored vectors are hashing ones: the GloVe query space must not see them.
    expect((await glove.search.semantic({ q: 'suitcase missing' }, internalCtx)).results).toEqual([]);
    // Keyword search doesn't depend on the space.
    expect((await glove.search.content({ q: 'suitcase' }, internalCtx)).results).toHaveLength(1);
    const report = await reembedGroup(t.sql, createEmbeddingProvider(configFor(t.schema)));
    expect(report.embedded).toBe(1);
    expect(report.spaces).toEqual([{ provider: 'glove', model: expect.any(String), vcons: 1 }]);
    expect((await glove.search.semantic({ q: 'suitcase missing' }, internalCtx)).results.map((r) => r.uuid)).toEqual([v.uuid]);
    expect((await hashing.search.semantic({ q: 'suitcase missing' }, internalCtx)).results).toEqual([]);
    // A second run has nothing left to do.
    expect((await reembedGroup(t.sql, createEmbeddingProvider(configFor(t.schema)))).embedded).toBe(0);
    // Its index worker would index the next tests' writes in the hashing space.
    await hashing.stop();
  });

  test('tag filters give the same answer through SQL (selective tag) and through the memory index (broad tag)', async () => {
    const glove = createServices(t.sql, configFor(t.schema));
    const docs = ['Lost luggage at the airport', 'Luggage delayed on my connecting flight', 'Suitcase damaged by the airline'].map((subject) =>
      buildVcon({ subject, turns: [`${subject}, please help.`] }),
    );
    for (const d of docs) await glove.vcons.create(d, internalCtx);
    await glove.tags.set(docs[1].uuid as string, 'desk', 'baggage', internalCtx);
    await glove.tags.set(docs[2].uuid as string, 'desk', 'baggage', internalCtx);
    const provider = createEmbeddingProvider(configFor(t.schema));
    const broad = createSearchService({
      repo: createSearchRepo(t.sql),
      queue: createIndexQueueRepo(t.sql),
      provider,
      plugins: [],
      selectiveTagVcons: 0,
    });
    const params = { q: 'luggage problem', tags: { desk: 'baggage' }, limit: 10 };
    const viaSql = (await glove.search.semantic(params, internalCtx)).results.map((r) => r.uuid);
    const viaMemory = (await broad.semantic(params, internalCtx)).results.map((r) => r.uuid);
    expect(new Set(viaSql)).toEqual(new Set([docs[1].uuid, docs[2].uuid]));
    expect(viaMemory).toEqual(viaSql);
  });

  test('a tag write does not re-embed unchanged texts', async () => {
    const glove = createServices(t.sql, configFor(t.schema));
    const v = buildVcon({ subject: 'Seat upgrade', turns: ['Can I move to business class?'] });
    await glove.vcons.create(v, internalCtx, { waitFor: 'search' });
    const [before] = await t.sql<{ xmin: string }[]>`select xmin::text from vcon_vectors where vcon_uuid = ${v.uuid as string}::uuid`;
    await glove.tags.set(v.uuid as string, 'tier', 'gold', internalCtx);
    // A search first indexes the tag write (the write queued the vCon again).
    await glove.search.content({ q: 'seat' }, internalCtx);
    const [queued] = await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`;
    expect(queued.n).toBe(0);
    const [after] = await t.sql<{ xmin: string }[]>`select xmin::text from vcon_vectors where vcon_uuid = ${v.uuid as string}::uuid`;
    expect(after.xmin).toBe(before.xmin);
  });

  test('nor does it re-embed texts whose vectors an earlier version signed (its signature form)', async () => {
    const glove = createServices(t.sql, configFor(t.schema));
    const v = buildVcon({ subject: 'Lounge access', turns: ['Does my ticket include the lounge?'] });
    await glove.vcons.create(v, internalCtx, { waitFor: 'search' });
    const uuid = v.uuid as string;
    const [fresh] = await t.sql<{ units_sig: string }[]>`select units_sig from vcon_vectors where vcon_uuid = ${uuid}::uuid`;
    expect(fresh.units_sig).toMatch(/^u2:/);
    // As an earlier version stored it: a signature of the units' own JSON.
    const units = extractUnits(v as JsonObject, await decodeBodies(v as JsonObject));
    await t.sql`update vcon_vectors set units_sig = ${legacyUnitsSig(units)} where vcon_uuid = ${uuid}::uuid`;
    const [before] = await t.sql<{ xmin: string }[]>`select xmin::text from vcon_vectors where vcon_uuid = ${uuid}::uuid`;
    await glove.tags.set(uuid, 'tier', 'silver', internalCtx);
    await glove.search.content({ q: 'lounge' }, internalCtx);
    const [after] = await t.sql<{ xmin: string }[]>`select xmin::text from vcon_vectors where vcon_uuid = ${uuid}::uuid`;
    expect(after.xmin).toBe(before.xmin);
    // A stored signature of other texts is not taken for theirs: the vCon is embedded again.
    await t.sql`update vcon_vectors set units_sig = ${legacyUnitsSig(units.slice(1))} where vcon_uuid = ${uuid}::uuid`;
    await glove.tags.set(uuid, 'tier', 'bronze', internalCtx);
    await glove.search.content({ q: 'lounge' }, internalCtx);
    const [redone] = await t.sql<
      { xmin: string; units_sig: string }[]
    >`select xmin::text, units_sig from vcon_vectors where vcon_uuid = ${uuid}::uuid`;
    expect(redone.xmin).not.toBe(before.xmin);
    expect(redone.units_sig).toBe(fresh.units_sig);
  });
});

describe('OpenAI-compatible provider', () => {
  let t: TestSchema;
  let server: Server;
  let calls = 0;
  let failing = false;

  beforeAll(async () => {
    t = await createTestSchema('search');
    // A stand-in for the embedding endpoint (the only thing tests fake: outbound HTTP).
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        calls++;
        if (failing) {
          res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"down"}}');
          return;
        }
        const { input, encoding_format } = JSON.parse(body) as { input: string[]; encoding_format: string };
        expect(encoding_format).toBe('float');
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            object: 'list',
            model: 'fake-embed',
            data: input.map((text, index) => ({ object: 'embedding', index, embedding: Array.from(embedHashed(text, 64)) })),
            usage: { prompt_tokens: 1, total_tokens: 1 },
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await t?.drop();
  });

  test('embeds in the background through the queue; the vCon is found once drained', async () => {
    const port = (server.address() as AddressInfo).port;
    const services = createServices(
      t.sql,
      configFor(t.schema, {
        EMBEDDINGS_PROVIDER: 'openai',
        EMBEDDINGS_URL: `http://127.0.0.1:${port}/v1`,
        EMBEDDINGS_MODEL: 'fake-embed',
      }),
    );
    const v = buildVcon({ subject: 'Broken umbrella', turns: ['The umbrella frame snapped in the wind.'] });
    await services.vcons.create(v, internalCtx);
    // A remote provider's rounds are the worker's (a search does not run them itself, and its catch-up
    // is bounded): keyword and semantic results both follow the worker's round.
    await waitFor(
      async () => (await services.search.content({ q: 'umbrella' }, internalCtx)).results.length === 1,
      60_000,
      100,
      'the worker to index the new vCon',
    );
    const found = await waitFor(
      async () => {
        const uuids = (await services.search.semantic({ q: 'umbrella frame snapped' }, internalCtx)).results.map((r) => r.uuid);
        return uuids.length ? uuids : undefined;
      },
      60_000,
      100,
      'the embedding worker to embed the new vCon',
    );
    expect(found).toEqual([v.uuid]);
    const [queue] = await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`;
    expect(queue.n).toBe(0);
    const [row] = await t.sql<{ provider: string; model: string }[]>`select provider, model from vcon_vectors`;
    expect(row).toEqual({ provider: 'openai', model: 'fake-embed' });
    expect(calls).toBeGreaterThan(0);

    // A failing endpoint: semantic search says so (503), keyword search still works.
    failing = true;
    await expect(services.search.semantic({ q: 'umbrella' }, internalCtx)).rejects.toMatchObject({ status: 503 });
    expect((await services.search.content({ q: 'umbrella' }, internalCtx)).results).toHaveLength(1);
    failing = false;
  });
});

describe('the indexer entry point and the worker lifecycle', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('search_indexer');
  });
  afterAll(() => t?.drop());

  test('indexVcons rebuilds the keyword and vector index of stored vCons from their units', async () => {
    const services = createServices(t.sql, configFor(t.schema));
    const v = buildVcon({ subject: 'Late parcel', turns: ['My parcel with the garden hose arrived three weeks late.'] });
    await services.vcons.create(v, internalCtx, { waitFor: 'search' });
    // Lose the index as a background indexer would find it before its first round.
    await t.sql`delete from vcon_search`;
    await t.sql`delete from search_vectors`;
    await t.sql`delete from vcon_vectors`;
    await t.sql`delete from vcon_codes`;
    expect((await services.search.content({ q: 'hose' }, internalCtx)).results).toHaveLength(0);
    const search = createSearch({ sql: t.sql, provider: createEmbeddingProvider(configFor(t.schema)), plugins: [], log: { info() {}, warn() {} } });
    await search.indexer.indexVcons([v.uuid as string, '00000000-0000-4000-8000-000000000000']);
    expect((await services.search.content({ q: 'hose' }, internalCtx)).results.map((r) => r.uuid)).toEqual([v.uuid]);
    expect((await services.search.semantic({ q: 'garden hose parcel late' }, internalCtx)).results[0]?.uuid).toBe(v.uuid);
    const [n] = await t.sql<{ n: number }[]>`select count(*)::int as n from vcon_vectors`;
    expect(n.n).toBe(1);
  });

  test('stop() ends the embedding worker of a remote provider: queued vCons stay queued', async () => {
    const services = createServices(
      t.sql,
      configFor(t.schema, {
        EMBEDDINGS_PROVIDER: 'openai',
        EMBEDDINGS_URL: 'http://127.0.0.1:9/v1',
        EMBEDDINGS_MODEL: 'never-called',
      }),
    );
    await services.stop();
    const v = buildVcon({ subject: 'Queued', turns: ['Nothing drains this one.'] });
    await services.vcons.create(v, internalCtx);
    const [q] = await t.sql<
      { n: number; attempts: number }[]
    >`select count(*)::int as n, coalesce(max(attempts), 0)::int as attempts from index_queue`;
    expect(q).toEqual({ n: 1, attempts: 0 });
  });
});
