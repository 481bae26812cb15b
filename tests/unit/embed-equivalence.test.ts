// The fast default embedder (features.ts) must give the vectors of the plain algorithm it
// replaced, or stored vectors stop matching new queries. The REFERENCE below is that algorithm as
// it was (regex tokeniser, string keys in a Map); the encoder is compared with it on every text
// the indexer embeds for the fixture vCons, the search dev set and the bench corpus, plus edge cases.
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { embedTextSets } from '../../scripts/bench/embed.js';
import { ensureCache, openCache, sifWeight, type WordVectors } from '../../src/embeddings/glove-cache.js';
import { createSifEncoder } from '../../src/embeddings/glove.js';
import { embedHashed } from '../../src/embeddings/hashing.js';
import { createFeaturizer } from '../../src/embeddings/features.js';
import { embeddingsCacheDir } from '../../src/embeddings/index.js';
import { contentTokens, hash32, normalize, stem, STOP_WORDS, tokenize } from '../../src/embeddings/text.js';
import { packageRoot } from '../../src/paths.js';

// ---- REFERENCE: the embedder before the speed-up, kept as the definition of the vectors. ----

const REF_TOKEN_RE = /[\p{L}\p{N}]+(?:['’][\p{L}]+)*/gu;

function refTokenize(text: string): string[] {
  const out: string[] = [];
  for (const m of text.toLowerCase().matchAll(REF_TOKEN_RE)) {
    let t = m[0].replace(/’/g, "'");
    if (t.endsWith("'s")) t = t.slice(0, -2);
    t = t.replace(/'/g, '');
    if (t) out.push(t);
  }
  return out;
}

const refContentTokens = (text: string) => refTokenize(text).filter((t) => t.length > 1 && !STOP_WORDS.has(t) && !/^\d{3,}$/.test(t));

/** hash32 as it was, pinned by values computed before the speed-up (the word table's lookups use it too). */
const HASH32_BEFORE: [string, number, number][] = [
  ['', 2872998923, 2628190328],
  ['w:refund', 2317228571, 2374725967],
  ['c:<re', 2058914932, 707845104],
  ['b:refund invoice', 1990618375, 577285066],
  ['straße', 2742966876, 82975714],
  ['😀', 1787143206, 93504839],
];
const refFnv = (s: string) => hash32(s);

/** Hashed features with one string key per feature in a Map, weights 1 + ln(tf). */
function refHashed(text: string, out: Float32Array): Float32Array {
  const counts = new Map<string, number>();
  const add = (key: string, w: number) => counts.set(key, (counts.get(key) ?? 0) + w);
  const tokens = refContentTokens(text).map(stem);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    add(`w:${t}`, 1);
    if (i + 1 < tokens.length) add(`b:${t} ${tokens[i + 1]}`, 0.6);
    const padded = `<${t}>`;
    const grams: string[] = [];
    for (let n = 3; n <= 5; n++) for (let j = 0; j + n <= padded.length; j++) grams.push(padded.slice(j, j + n));
    for (const g of grams) add(`c:${g}`, 0.35 / Math.sqrt(grams.length));
  }
  for (const [key, w] of counts) {
    const h = refFnv(key);
    const weight = w >= 1 ? 1 + Math.log(w) : w;
    out[h % out.length] += h & 0x80000000 ? -weight : weight;
  }
  return normalize(out);
}

/** The whole vector: SIF GloVe half (common component removed) and hashing half, 0.6 : 0.4. */
function refEncode(wv: WordVectors, wordRow: (t: string) => number, text: string): Float32Array {
  const g = new Float32Array(wv.dims);
  let n = 0;
  for (const t of refContentTokens(text)) {
    const row = wordRow(t);
    if (row < 0) continue;
    const r = wv.readRow(row);
    const k = sifWeight(1e-3, r.rank, wv.sourceSize) * r.scale;
    for (let d = 0; d < wv.dims; d++) g[d] += k * r.data[d];
    n++;
  }
  if (n > 0) {
    const common = wv.common!.vector;
    let proj = 0;
    for (let d = 0; d < wv.dims; d++) proj += g[d] * common[d];
    for (let d = 0; d < wv.dims; d++) g[d] -= proj * common[d];
    normalize(g);
  }
  const h = refHashed(text, new Float32Array(256));
  const out = new Float32Array(wv.dims + 256);
  for (let d = 0; d < wv.dims; d++) out[d] = g[d] * Math.sqrt(0.6);
  for (let d = 0; d < 256; d++) out[wv.dims + d] = h[d] * Math.sqrt(0.4);
  return normalize(out);
}

// ---- end of REFERENCE ----

const maxDiff = (a: Float32Array, b: Float32Array) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};

// Two different words whose `w:` keys share a 32-bit hash: summing features by hash alone would
// merge them (weight 1 + ln 3 instead of 1 + ln 2 and 1).
const COLLIDING = ['lszqwxfaq', 'pdvwau'];

const EDGE_CASES = [
  '',
  '   \n\t ',
  'the and of a i it is was would could',
  'Café naïve résumé ÉCOLE Straße İstanbul ΣΊΣΥΦΟΣ Ǆungla',
  "don't can’t it's James's rock'n'roll o'clock 'quoted' it’s we’re ’s abc' a'b'c'd 12's 123's x'1 y’",
  '12 123 4567 2024 a1b2 42nd 3rd 007 ٣٤٥ ² ½ ª º ＡＢＣ１２３',
  'supercalifragilisticexpialidocious'.repeat(6) + ' ' + 'x'.repeat(300),
  'pasword refnud recieve acount delivry shiping subscripton cancelation',
  '𝐀𝐁𝐂 𝟏𝟐𝟑 😀 test 東京 日本語テキスト \ud800abc lone\udc00 ﬁle e\u0301te Kelvin',
  'refund '.repeat(50) + 'invoice invoices invoiced invoicing',
  'e-mail follow-up snake_case_word john.doe@example.com https://x.y/z?q=1&r=2',
  `${COLLIDING[0]} ${COLLIDING[1]} ${COLLIDING[0]}`,
];

/** Seeded random texts over letters, digits, apostrophes, accents, astral and stop words. */
function fuzzTexts(count: number): string[] {
  const parts = [
    'a',
    'b',
    'e',
    's',
    'ing',
    'ed',
    'ies',
    "'",
    '’',
    "'s",
    ' ',
    ' ',
    '1',
    '2',
    '345',
    'é',
    'Ä',
    'ß',
    'ǅ',
    '𝐀',
    '😀',
    '\ud800',
    '-',
    '.',
    'the',
    'refund',
    'İ',
  ];
  let x = 42;
  const rnd = (n: number) => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8) % n;
  return Array.from({ length: count }, () => Array.from({ length: 1 + rnd(40) }, () => parts[rnd(parts.length)]).join(''));
}

// Fixed seeds and counts: the same inputs every run, compared with the reference implementation.
// Alone a test takes seconds to half a minute; beside a second full run on 2 cores, minutes: the
// timeout is a ceiling for a hang, not a speed bound.
describe('fast embedder equals the reference', { timeout: 600_000 }, () => {
  let wv: WordVectors;
  let texts: string[];
  beforeAll(async () => {
    wv = openCache(await ensureCache(embeddingsCacheDir(path.join(packageRoot, '.vcon'))));
    texts = [...(await embedTextSets()).flatMap((s) => s.texts), ...EDGE_CASES, ...fuzzTexts(2000)];
  }, 600_000);

  test('hash32 gives the values it gave before', () => {
    for (const [s, h, seeded] of HASH32_BEFORE) expect([hash32(s), hash32(s, 0x2545f491)]).toEqual([h, seeded]);
  });

  test('the colliding pair really collides', () => {
    expect(hash32(`w:${COLLIDING[0]}`)).toBe(hash32(`w:${COLLIDING[1]}`));
  });

  test('tokens are those of the regex tokeniser', () => {
    for (const t of texts) {
      expect(tokenize(t)).toEqual(refTokenize(t));
      expect(contentTokens(t)).toEqual(refContentTokens(t));
    }
  });

  // A word's features are added once with its count as weight (one rounding instead of one per
  // occurrence, and buckets summed in another order): equal to the reference up to float32 rounding.
  test('the hashing half differs by at most 1e-6 per component, with a warm cache, an evicting one and a fresh one', () => {
    const warm = createFeaturizer<never>(8192);
    // Four words and 64 feature ids: the cache evicts and the ids start afresh all the time.
    const tiny = createFeaturizer<never>(4, 64);
    let worst = 0;
    for (const t of texts) {
      const ref = refHashed(t, new Float32Array(256));
      for (const v of [embedHashed(t, 256, warm), embedHashed(t, 256, tiny), embedHashed(t)]) worst = Math.max(worst, maxDiff(v, ref));
    }
    expect(worst).toBeLessThan(1e-6);
  });

  test('a repeated word weighs 1 + ln(count), its n-grams their share times its count', () => {
    // Words in the text that are each other's n-gram neighbours: counts must add per feature.
    for (const t of [
      'refund refund refund invoice',
      'refund invoice refund invoices refunded refund',
      `${COLLIDING[0]} ${COLLIDING[1]} ${COLLIDING[0]}`,
    ])
      expect(maxDiff(embedHashed(t), refHashed(t, new Float32Array(256)))).toBeLessThan(1e-7);
  });

  // The reference sums the GloVe half in float32 once per occurrence; the encoder once per distinct
  // word (count × weight), which rounds less: a text repeating a few words many times differs by
  // a few 1e-6 (a cosine within 1e-9 of the reference's).
  test('whole vectors differ by at most 1e-5 per component, cold and warm', () => {
    const enc = createSifEncoder(wv);
    for (const round of ['cold', 'warm']) {
      for (const t of texts) {
        const d = maxDiff(enc.encode(t), refEncode(wv, enc.wordRow, t));
        if (d > 1e-5) throw new Error(`${round}: ${d} on ${JSON.stringify(t.slice(0, 80))}`);
      }
    }
    expect(enc.encode('')).toEqual(new Float32Array(enc.dimensions));
  });
});
