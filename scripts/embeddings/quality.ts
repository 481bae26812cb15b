// Retrieval quality of the embedding providers on the labelled set in tests/fixtures/retrieval
// (npm run bench:quality): recall@1 and MRR per provider, overall and per query kind. Scores the
// way the semantic search does: the cosine of the query with the vCon vector (the mean of its
// non-party unit vectors).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import { extractUnits } from '../../src/search/units.js';
import { embeddingsCacheDir } from '../../src/embeddings/index.js';
import { ensureCache, loadCache, type WordVectors } from '../../src/embeddings/glove-cache.js';
import { createGloveProvider, type SifOptions } from '../../src/embeddings/glove.js';
import { createHashingProvider } from '../../src/embeddings/hashing.js';
import { createOpenAiProvider } from '../../src/embeddings/openai.js';
import type { EmbeddingProvider } from '../../src/embeddings/types.js';
import { packageRoot } from '../../src/paths.js';
import { isMain } from './util.js';

interface Conversation {
  id: string;
  subject: string;
  turns: string[];
}
interface Query {
  q: string;
  target: string;
  kind: string;
}

export interface QualityRow {
  provider: string;
  model: string;
  kind: string;
  queries: number;
  r1: number;
  mrr: number;
}

const FIXTURES = path.join(packageRoot, 'tests', 'fixtures', 'retrieval');

export function loadRetrievalSet(dir = FIXTURES): { conversations: Conversation[]; queries: Query[] } {
  return {
    conversations: JSON.parse(readFileSync(path.join(dir, 'conversations.json'), 'utf8')) as Conversation[],
    queries: JSON.parse(readFileSync(path.join(dir, 'queries.json'), 'utf8')) as Query[],
  };
}

const dot = (a: Float32Array, b: Float32Array) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};

/** Embeds the set with one provider and ranks every query; returns R@1 and MRR per kind and overall. */
export async function evaluateProvider(provider: EmbeddingProvider, set = loadRetrievalSet(), label = provider.id): Promise<QualityRow[]> {
  const docs: { id: string; doc: Float32Array }[] = [];
  for (const c of set.conversations) {
    const units = extractUnits({
      subject: c.subject,
      parties: [{ name: 'Customer', mailto: 'customer@example.com' }, { name: 'Agent' }],
      dialog: c.turns.map((body) => ({ type: 'text', encoding: 'none', mediatype: 'text/plain', body })),
    });
    const vecs = await provider.embed(units.filter((u) => u.source !== 'party').map((u) => u.body));
    const mean = new Float32Array(vecs[0].length);
    for (const v of vecs) for (let d = 0; d < v.length; d++) mean[d] += v[d];
    const n = Math.sqrt(dot(mean, mean)) || 1;
    for (let d = 0; d < mean.length; d++) mean[d] /= n;
    docs.push({ id: c.id, doc: mean });
  }
  const qv = await provider.embed(set.queries.map((q) => q.q));
  const per = new Map<string, { n: number; r1: number; rr: number }>();
  set.queries.forEach((q, i) => {
    const scored = docs.map((d) => ({ id: d.id, s: dot(qv[i], d.doc) })).sort((a, b) => b.s - a.s);
    const rank = scored.findIndex((x) => x.id === q.target) + 1;
    for (const k of [q.kind, 'all']) {
      const agg = per.get(k) ?? { n: 0, r1: 0, rr: 0 };
      agg.n++;
      if (rank === 1) agg.r1++;
      agg.rr += rank > 0 ? 1 / rank : 0;
      per.set(k, agg);
    }
  });
  return [...per].map(([kind, a]) => ({ provider: label, model: provider.model, kind, queries: a.n, r1: a.r1 / a.n, mrr: a.rr / a.n }));
}

/**
 * The comparison of the note: hashing vs the default provider (and variants of it with
 * `variants`), plus the OpenAI-compatible provider when EMBEDDINGS_URL is configured.
 */
export async function runQualityBench(opts: { variants?: boolean; dataDir?: string } = {}): Promise<QualityRow[]> {
  const config = loadConfig();
  const dataDir = opts.dataDir ?? config.dataDir;
  const set = loadRetrievalSet();
  const file = await ensureCache(embeddingsCacheDir(dataDir));
  const wv: WordVectors = loadCache(file);
  const glove = (o: SifOptions = {}) => createGloveProvider(async () => wv, o);
  const rows: QualityRow[] = [];
  rows.push(...(await evaluateProvider(createHashingProvider(), set, 'hashing')));
  rows.push(...(await evaluateProvider(glove(), set, 'glove (default)')));
  if (opts.variants) {
    const variants: [string, SifOptions][] = [
      ['glove only', { hashDims: 0 }],
      ['glove, no common component', { removeCommon: false }],
      ['glove, no spelling back-off', { spelling: false }],
      ['glove share 0.65', { gloveShare: 0.65 }],
      ['glove share 0.35', { gloveShare: 0.35 }],
      ['glove + fh384', { hashDims: 384 }],
    ];
    for (const [label, o] of variants) rows.push(...(await evaluateProvider(glove(o), set, label)));
  }
  if (config.embeddings.url) {
    const e = config.embeddings;
    rows.push(
      ...(await evaluateProvider(
        createOpenAiProvider({ url: e.url, model: e.model, apiKey: e.apiKey, dimensions: e.dimensions || undefined }),
        set,
        'openai',
      )),
    );
  }
  return rows;
}

/** A plain-text table: one line per provider, columns per query kind. */
export function formatQuality(rows: QualityRow[]): string {
  const kinds = ['all', ...new Set(rows.map((r) => r.kind).filter((k) => k !== 'all'))];
  const providers = [...new Set(rows.map((r) => r.provider))];
  const head = ['provider'.padEnd(30), ...kinds.map((k) => `${k} (n=${rows.find((r) => r.kind === k)?.queries}) R@1 / MRR`.padEnd(28))].join(' ');
  const lines = providers.map((p) =>
    [
      p.padEnd(30),
      ...kinds.map((k) => {
        const r = rows.find((x) => x.provider === p && x.kind === k);
        return (r ? `${r.r1.toFixed(2)} / ${r.mrr.toFixed(2)}` : '-').padEnd(28);
      }),
    ].join(' '),
  );
  return [head, ...lines].join('\n');
}

if (isMain(import.meta.url)) {
  runQualityBench({ variants: process.argv.includes('--variants') }).then(
    (rows) => process.stdout.write(`${formatQuality(rows)}\n`),
    (err: Error) => {
      process.stderr.write(`bench:quality failed: ${err.stack ?? err.message}\n`);
      process.exitCode = 1;
    },
  );
}
