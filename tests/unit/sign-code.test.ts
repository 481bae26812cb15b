// The sign code (src/embeddings/code.ts) is stored for every vCon and compared with the query's:
// a faster computation must give every code bit for bit as the first one did, or stored codes and
// new ones would disagree near zero. The reference below is that first computation.
import { describe, expect, it } from 'vitest';
import { CODE_BITS, signCode, signCodeBytes } from '../../src/embeddings/code.js';

/** The first implementation: one dimension at a time across all 256 sums. */
const matrices = new Map<number, Int8Array>();
function reference(v: Float32Array): string {
  const dims = v.length;
  let p = matrices.get(dims);
  if (!p) {
    p = new Int8Array(dims * CODE_BITS);
    let s = 0x9e3779b9 ^ dims;
    for (let i = 0; i < p.length; i++) {
      s = (s + 0x6d2b79f5) | 0;
      let t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      p[i] = ((t ^ (t >>> 14)) >>> 0) & 1 ? 1 : -1;
    }
    matrices.set(dims, p);
  }
  const acc = new Float64Array(CODE_BITS);
  for (let d = 0; d < dims; d++) {
    const x = v[d];
    if (x === 0) continue;
    for (let b = 0; b < CODE_BITS; b++) acc[b] += p[d * CODE_BITS + b] * x;
  }
  let out = '';
  for (let b = 0; b < CODE_BITS; b++) out += acc[b] > 0 ? '1' : '0';
  return out;
}

const toBits = (bytes: Uint8Array) => Array.from(bytes, (x) => x.toString(2).padStart(8, '0')).join('');

// Fixed seeds and counts: the same inputs every run, compared with the reference implementation.
// Alone a test takes seconds to half a minute; beside a second full run on 2 cores, minutes: the
// timeout is a ceiling for a hang, not a speed bound.
describe('the sign code', { timeout: 600_000 }, () => {
  it('is bit for bit the first implementation on dense, sparse and tiny vectors of several lengths', () => {
    let seed = 7;
    const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff - 0.5;
    const vectors: Float32Array[] = [];
    for (const dims of [8, 100, 356, 1536])
      for (let k = 0; k < 150; k++) {
        // Sparse ones (a short text's hashing half), and tiny values whose sums sit near zero.
        const scale = k % 5 === 0 ? 1e-30 : 1;
        vectors.push(Float32Array.from({ length: dims }, () => (k % 3 === 0 && rnd() > 0.2 ? 0 : rnd() * scale)));
      }
    vectors.push(
      new Float32Array(356),
      Float32Array.from({ length: 356 }, (_, i) => (i === 5 ? 1 : 0)),
    );
    let ones = 0;
    for (const v of vectors) {
      const want = reference(v);
      expect(signCode(v)).toBe(want);
      expect(toBits(signCodeBytes(v))).toBe(want);
      ones += [...want].filter((c) => c === '1').length;
    }
    // Not trivially all zeros.
    expect(ones).toBeGreaterThan(vectors.length * 50);
  });

  it('is the first implementation for sums that round differently by order and sums near zero', () => {
    let seed = 11;
    const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff - 0.5;
    const vectors: Float32Array[] = [];
    for (const dims of [5, 8, 13, 356, 1536])
      for (let k = 0; k < 200; k++) {
        // Components spread over up to `spread` decades: the wider, the likelier a sum rounds.
        const spread = k % 20;
        const v = Float32Array.from({ length: dims }, () => rnd() * 10 ** -Math.floor(Math.abs(rnd()) * 2 * spread));
        // Sums that cancel to (nearly) zero: a vector and its pairs negated.
        if (k % 7 === 0) for (let d = 1; d < dims; d += 2) v[d] = -v[d - 1];
        vectors.push(v);
      }
    // Two components that cancel, then a tiny one: in dimension order the tiny one decides the
    // sign; summed in another order it can be lost (the first implementation's result must win).
    for (let at = 0; at < 40; at += 3) {
      const v = new Float32Array(356);
      v[at] = 1;
      v[at + 1] = -1;
      v[at + 2] = 1e-20;
      vectors.push(v);
    }
    // Infinite and NaN components.
    vectors.push(
      Float32Array.from({ length: 356 }, (_, d) => (d === 7 ? Infinity : rnd())),
      Float32Array.from({ length: 356 }, (_, d) => (d === 7 ? Infinity : d === 100 ? -Infinity : rnd())),
      Float32Array.from({ length: 356 }, (_, d) => (d === 9 ? NaN : rnd())),
    );
    // A single component below 2⁻¹⁴⁹·2²⁴ next to ones: float32 subnormals.
    vectors.push(Float32Array.from({ length: 356 }, (_, d) => (d === 3 ? 1e-45 : d % 2 ? 1e-44 : -1e-44)));
    // Found by an adversarial search (review of 4722b44): small components between integers whose
    // sums cancel, so several bits' table sums round to the wrong sign unless re-summed in order.
    const adversarial = [
      0, 1.5145678339334917e-16, 3, 4, 2, 6.46017867538768e-17, 0, 0, -3, 0, 0, -3, -2.592930237439415e-19, 6.807280266065727e-20, 3, -4,
    ];
    for (const dims of [16, 356]) vectors.push(Float32Array.from({ length: dims }, (_, d) => adversarial[d % adversarial.length]));
    for (const v of vectors) expect(toBits(signCodeBytes(v))).toBe(reference(v));
  });
});
