// Leaner indexing rounds: search units one row per vCon, no stored unit tsvector (keywordMatches makes
// the page's), no stored unit vectors for a local provider (semanticMatches embeds the page's
// units), and the ranking tsvector made from the units' texts sent as parameters. Results and
// matches must be what the stored columns gave. Real PostgreSQL, a schema per case.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import type { Sql } from '../../src/db/client.js';
import { unitRows } from '../../src/db/search-index-repo.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { dot } from '../../src/embeddings/text.js';
import { internalCtx } from '../../src/services/context.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { buildVcon } from './builders.js';

const configFor = (schema: string) => parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent' });

/** A vCon with units of every source, several of some (the order of units in a weight matters). */
const rich = () =>
  buildVcon({
    subject: 'Broken kettle refund',
    parties: [{ name: 'Ottoline Brisk', mailto: 'ottoline@example.org' }, { name: 'Agent Pim' }],
    turns: [
      'My kettle stopped heating after two days and the switch light flickers.',
      'Sorry to hear that. Is the base plugged in firmly?',
      'Yes, I tried another socket and the kettle still will not boil water.',
    ],
    analysis: [
      { type: 'summary', body: 'Customer wants a refund for a faulty kettle.', encoding: 'none' },
      { type: 'sentiment', body: 'frustrated but polite', encoding: 'none' },
    ],
    attachments: [
      { purpose: 'notes', mediatype: 'text/plain', encoding: 'none', body: 'Receipt shows purchase at the Leeds store.' },
      { purpose: 'notes', mediatype: 'text/plain', encoding: 'none', body: 'Warranty card enclosed with the kettle.' },
    ],
  });

/** The best three units holding "kettle" in rich(): by weight (subject A, analysis C, the rest D), then cover density. */
const KETTLE_MATCHES = [
  ['subject', 0],
  ['analysis', 0],
  ['attachment', 1],
];

/** The ranking tsvector as the indexer before migration 0003 aggregated it from the unit rows `su`. */
const GAP = ' . the the the . ';
const OLD_TSV = (sql: Sql) => sql`
  setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'subject'), ''), 200000)), 'A')
  || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'party'), ''), 200000)), 'B')
  || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.idx) filter (where su.source = 'analysis'), ''), 200000)), 'C')
  || setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ${GAP} order by su.source, su.idx) filter (where su.source in ('dialog', 'attachment')), ''), 200000)), 'D')`;

describe('indexing without stored unit tsvectors and local unit vectors', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('lean_index');
  });
  afterAll(() => t?.drop());

  /** Services on the schema without their background worker, and rich() written and indexed. */
  const indexedRich = async () => {
    const services = createServices(t.sql, configFor(t.schema));
    await services.stop();
    const v = rich();
    await services.vcons.create(v, internalCtx, { waitFor: 'search' });
    return { services, v };
  };

  test('the ranking tsvector equals the aggregate of the stored units it was made from before', async () => {
    const { v } = await indexedRich();
    // The statement that wrote vcon_search before migration 0003, over the stored units.
    const [r] = await t.sql<{ same: boolean; lexemes: number }[]>`
      with old as (
        select ${OLD_TSV(t.sql)} as tsv from ${unitRows(t.sql)} su where su.vcon_uuid = ${v.uuid as string}::uuid
      )
      select vs.tsv = old.tsv as same, length(vs.tsv) as lexemes from vcon_search vs, old where vs.vcon_uuid = ${v.uuid as string}::uuid`;
    expect(r).toEqual({ same: true, lexemes: expect.any(Number) });
    expect(r.lexemes).toBeGreaterThan(20);
  });

  test('keyword matches come from unit tsvectors made at query time', async () => {
    const { services, v } = await indexedRich();
    const [col] = await t.sql`
      select 1 from information_schema.columns where table_schema = ${t.schema} and table_name = 'search_units' and column_name = 'tsv'`;
    expect(col).toBeUndefined();
    const r = await services.search.content({ q: 'kettle' }, internalCtx);
    const hit = r.results.find((x) => x.uuid === v.uuid)!;
    // The best three units holding the word, by weight (subject A, analysis C, the rest D) and
    // cover density; each snippet marks the word.
    expect(hit.matches.map((m) => [m.source, m.index])).toEqual(KETTLE_MATCHES);
    for (const m of hit.matches) expect(m.snippet.toLowerCase()).toContain('**kettle**');
    // A word only in a party's name: that unit, weight B.
    const party = await services.search.content({ q: 'Ottoline' }, internalCtx);
    expect(party.results.find((x) => x.uuid === v.uuid)!.matches).toEqual([expect.objectContaining({ source: 'party', index: 0 })]);
  });

  test('a local provider stores no unit vectors: semantic matches embed the page units at query time', async () => {
    const { services, v } = await indexedRich();
    const [n] = await t.sql<{ units: number; vcons: number }[]>`
      select (select count(*)::int from search_vectors) as units, (select count(*)::int from vcon_vectors where vcon_uuid = ${v.uuid as string}::uuid) as vcons`;
    expect(n).toEqual({ units: 0, vcons: 1 });

    const q = 'the kettle will not boil';
    const r = await services.search.semantic({ q, threshold: 0.2 }, internalCtx);
    const hit = r.results.find((x) => x.uuid === v.uuid)!;
    // What stored unit vectors gave: the embeddable (non-party) units closest to the query, best three above the threshold.
    const provider = createEmbeddingProvider(configFor(t.schema));
    const units = await t.sql<{ source: string; idx: number; body: string }[]>`
      select su.source, su.idx, su.body from ${unitRows(t.sql)} su where su.vcon_uuid = ${v.uuid as string}::uuid and su.source <> 'party'`;
    const [qv, ...uv] = await provider.embed([q, ...units.map((u) => u.body)]);
    const expected = units
      .map((u, i) => ({ source: u.source, index: u.idx, score: dot(qv, uv[i]) }))
      .filter((u) => u.score >= 0.2)
      .sort((a, b) => b.score - a.score)
      .slice(0, 3)
      .map((u) => [u.source, u.index]);
    expect(expected.length).toBeGreaterThan(0);
    expect(hit.matches.map((m) => [m.source, m.index])).toEqual(expected);
    expect(hit.matches[0].snippet.toLowerCase()).toContain('kettle');
  });
});
