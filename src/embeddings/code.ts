// The sign-bit code of a vector for the SQL prefilter: the signs of a fixed random projection
// (SimHash), so the Hamming distance between two codes estimates the angle between the vectors
// for dense and sparse vectors alike. The projection depends only on the length and the seed.

export const CODE_BITS = 256;

/** The projection of one vector length, in the two forms signCodeBytes uses. */
interface Projection {
  /** Bit-major: row b holds the ±1 weight of each dimension for bit b. */
  rows: Int8Array;
  /** Per bit, per group of eight dimensions: the group's signs as a byte (bit j set: +1 for dimension 8g + j). */
  masks: Uint8Array;
  groups: number;
}

const projections = new Map<number, Projection>();

/** ±1 entries from a seeded generator (mulberry32): the same matrix in every process. */
function projection(dims: number): Projection {
  let p = projections.get(dims);
  if (p) return p;
  const rows = new Int8Array(dims * CODE_BITS);
  const groups = Math.ceil(dims / 8);
  const masks = new Uint8Array(CODE_BITS * groups);
  let s = 0x9e3779b9 ^ dims;
  // Drawn in (dimension, bit) order, the matrix every stored code was made with.
  for (let d = 0; d < dims; d++) {
    for (let b = 0; b < CODE_BITS; b++) {
      s = (s + 0x6d2b79f5) | 0;
      let t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      const plus = ((t ^ (t >>> 14)) >>> 0) & 1;
      rows[b * dims + d] = plus ? 1 : -1;
      if (plus) masks[b * groups + (d >> 3)] |= 1 << (d & 7);
    }
  }
  p = { rows, masks, groups };
  projections.set(dims, p);
  return p;
}

/** Scratch for the group tables, reused (signCodeBytes is synchronous). */
let scratch = new Float64Array(0);
const tablesFor = (groups: number) => (scratch.length >= groups * 256 ? scratch : (scratch = new Float64Array(groups * 256)));

/**
 * The code as bytes, bit i at the MSB-first bit of byte i >> 3 (the layout of varbit_send): bit i
 * is set when the i-th projection is positive, its sum of products added in dimension order (the
 * first computation, whose codes are stored: tests/unit/sign-code.test.ts).
 *
 * Summed another way first: for each group of eight dimensions the 256 signed sums of its
 * components, then a bit's sum is one table entry per group (~23k additions for 356 dimensions
 * instead of ~91k products and additions). Both ways round, each by less than `margin` (a generous
 * bound on the error of ~dims additions of terms whose magnitudes add up to at most 3·L1), so
 * where this sum is farther than twice that from zero its sign is the in-order sum's; the few
 * bits closer to zero are summed again in dimension order.
 */
export function signCodeBytes(v: Float32Array): Uint8Array {
  const dims = v.length;
  const { rows, masks, groups } = projection(dims);
  const out = new Uint8Array(CODE_BITS / 8);
  let l1 = 0;
  for (let d = 0; d < dims; d++) l1 += Math.abs(v[d]);
  // (A vector with an infinite or NaN component is summed in order throughout.)
  const margin = Number.isFinite(l1) ? (dims + 64) * 3 * l1 * 2 ** -50 : Infinity;
  const tables = tablesFor(groups);
  for (let g = 0; g < groups; g++) {
    // tables[256g + m] = Σ_j (bit j of m ? +x : -x) over the group's dimensions (missing ones are 0).
    const t0 = g * 256;
    let all = 0;
    for (let j = 0; j < 8; j++) {
      const d = g * 8 + j;
      if (d < dims) all -= v[d];
    }
    tables[t0] = all;
    for (let j = 0, half = 1; j < 8; j++, half <<= 1) {
      const d = g * 8 + j;
      const twice = d < dims ? 2 * v[d] : 0;
      for (let m = half; m < 2 * half; m++) tables[t0 + m] = tables[t0 + m - half] + twice;
    }
  }
  // Four bits at a time: each bit's sum is still added group by group in order (the same sums),
  // but four independent chains of additions keep the CPU busy where one waited on each addition.
  const set = (b: number, sum: number) => {
    if (!(Math.abs(sum) > 2 * margin)) {
      sum = 0;
      for (let d = 0, r = b * dims; d < dims; d++) sum += rows[r + d] * v[d];
    }
    if (sum > 0) out[b >> 3] |= 0x80 >> (b & 7);
  };
  for (let b = 0; b < CODE_BITS; b += 4) {
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    const a0 = b * groups;
    const [a1, a2, a3] = [a0 + groups, a0 + 2 * groups, a0 + 3 * groups];
    for (let g = 0, t = 0; g < groups; g++, t += 256) {
      s0 += tables[t + masks[a0 + g]];
      s1 += tables[t + masks[a1 + g]];
      s2 += tables[t + masks[a2 + g]];
      s3 += tables[t + masks[a3 + g]];
    }
    set(b, s0);
    set(b + 1, s1);
    set(b + 2, s2);
    set(b + 3, s3);
  }
  return out;
}

/** The code as a PostgreSQL bit-string literal ('0101…', CODE_BITS long). */
export function signCode(v: Float32Array): string {
  return Array.from(signCodeBytes(v), (byte) => byte.toString(2).padStart(8, '0')).join('');
}

/** Float32 vector ⇄ bytea (little-endian Float32Array bytes). */
export const vectorToBytes = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

export function bytesToVector(b: Uint8Array): Float32Array {
  // Copy: a Buffer from the driver may sit at an offset that isn't 4-byte aligned.
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b.subarray(0, out.byteLength));
  return out;
}
