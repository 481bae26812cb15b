// Vectors of an older model id (a group embedded before a MODEL_VERSION bump, here the bump to 2
// for whole-text vCon vectors, d5bcd54): semantic search never compares them with new queries,
// the instance says so at start, and `npm run reembed` (reembedGroup) moves the group.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { reembedGroup, warnOtherSpaces } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { MODEL_VERSION } from '../../src/embeddings/text.js';
import { internalCtx } from '../../src/services/context.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';

describe('vectors of a model before the current one', () => {
  let t: TestSchema;
  const config = () => parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' });
  const uuids: string[] = [];

  beforeAll(async () => {
    t = await createTestSchema('reembed');
    const services = createServices(t.sql, config());
    const docs = ['The blender broke after a week', 'My parcel never arrived', 'Refund for a double charge'].map((text) =>
      buildVcon({ subject: text, turns: [text] }),
    );
    expect((await services.vcons.batch(docs, internalCtx, { waitFor: 'search' })).created).toBe(3);
    uuids.push(...docs.map((d) => d.uuid as string));
    await services.stop();
  });
  afterAll(() => t?.drop());

  test('a group embedded with whole-text vectors under the old id is found again only after reembed, and is warned about until then', async () => {
    const provider = createEmbeddingProvider(config());
    // The vCon vector recipe changed (whole text, not the mean of units): the model id must differ
    // from the one those vectors were stored under, or reembed would never redo them.
    expect(MODEL_VERSION).toBeGreaterThanOrEqual(2);
    const before = provider.model.replace(/-v\d+$/, '-v1');
    expect(before).not.toBe(provider.model);
    for (const table of ['search_vectors', 'vcon_vectors', 'vcon_codes']) await t.sql`update ${t.sql(table)} set model = ${before}`;

    // A fresh instance each time (its in-memory codes are loaded from scratch).
    const search = async () => {
      const services = createServices(t.sql, config());
      try {
        return await services.search.semantic({ q: 'broken blender' }, internalCtx);
      } finally {
        await services.stop();
      }
    };
    expect((await search()).results).toEqual([]);
    const warned: string[] = [];
    const log = { info: () => undefined, warn: (_: object, msg: string) => void warned.push(msg) };
    expect(await warnOtherSpaces(t.sql, provider, log)).toBe(true);
    expect(warned[0]).toMatch(/npm run reembed/);

    const r = await reembedGroup(t.sql, provider);
    expect(r.embedded).toBe(3);
    expect(r.spaces).toEqual([{ provider: provider.id, model: provider.model, vcons: 3 }]);
    expect((await search()).results[0]?.uuid).toBe(uuids[0]);
    expect(await warnOtherSpaces(t.sql, provider, log)).toBe(false);
    expect((await reembedGroup(t.sql, provider)).embedded).toBe(0);
    // docs/search.md's step for a provider whose id did not change (OpenAI-compatible): drop the vCon vectors, reembed.
    await t.sql`delete from vcon_vectors`;
    expect((await reembedGroup(t.sql, provider)).embedded).toBe(3);
    expect((await search()).results[0]?.uuid).toBe(uuids[0]);
  });
});
