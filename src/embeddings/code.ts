// The sign-bit code of a vector for the SQL prefilter: the signs of a fixed random projection
// (SimHash), so the Hamming distance between two codes estimates the angle between the vectors
// for dense and sparse vectors alike. The projection depends only on the length and the seed.

export const CODE_BITS = 256;

/**
 * Projection matrices by vector length, bit-major: row b holds the ±1 weight of each dimension for
 * bit b, as doubles (a product is then one multiply, with no int-to-double conversion per entry).
 */
const projections = new Map<number, Float64Array>();

/** ±1 entries from a seeded generator (mulberry32): the same matrix in every process. */
function projection(dims: number): Float64Array {
  let p = projections.get(dims);
  if (p) return p;
  p = new Float64Array(dims * CODE_BITS);
  let s = 0x9e3779b9 ^ dims;
  // Drawn in (dimension, bit) order, the matrix every stored code was made with; stored per bit so
  // a bit's sum reads one row (signCodeBytes below).
  for (let d = 0; d < dims; d++) {
    for (let b = 0; b < CODE_BITS; b++) {
      s = (s + 0x6d2b79f5) | 0;
      let t = Math.imul(s ^ (s >>> 15), 1 | s);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      p[b * dims + d] = ((t ^ (t >>> 14)) >>> 0) & 1 ? 1 : -1;
    }
  }
  projections.set(dims, p);
  return p;
}

/**
 * The code as bytes, bit i at the MSB-first bit of byte i >> 3 (the layout of varbit_send): bit i
 * is set when the i-th projection is positive.
 */
export function signCodeBytes(v: Float32Array): Uint8Array {
  const dims = v.length;
  const p = projection(dims);
  const x = Float64Array.from(v);
  const out = new Uint8Array(CODE_BITS / 8);
  // A byte's eight bits at a time, eight independent sums (about twice as fast as four sums over
  // an Int8Array matrix, ~8 ms per indexing round). Each sum adds the same products in the same
  // order (dimension 0 up) as before, so every code is bit for bit the one stored
  // (tests/unit/sign-code.test.ts).
  for (let b = 0; b < CODE_BITS; b += 8) {
    const r0 = b * dims;
    const r1 = r0 + dims;
    const r2 = r1 + dims;
    const r3 = r2 + dims;
    const r4 = r3 + dims;
    const r5 = r4 + dims;
    const r6 = r5 + dims;
    const r7 = r6 + dims;
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    let a4 = 0;
    let a5 = 0;
    let a6 = 0;
    let a7 = 0;
    for (let d = 0; d < dims; d++) {
      const xd = x[d];
      a0 += p[r0 + d] * xd;
      a1 += p[r1 + d] * xd;
      a2 += p[r2 + d] * xd;
      a3 += p[r3 + d] * xd;
      a4 += p[r4 + d] * xd;
      a5 += p[r5 + d] * xd;
      a6 += p[r6 + d] * xd;
      a7 += p[r7 + d] * xd;
    }
    out[b >> 3] =
      (a0 > 0 ? 0x80 : 0) |
      (a1 > 0 ? 0x40 : 0) |
      (a2 > 0 ? 0x20 : 0) |
      (a3 > 0 ? 0x10 : 0) |
      (a4 > 0 ? 8 : 0) |
      (a5 > 0 ? 4 : 0) |
      (a6 > 0 ? 2 : 0) |
      (a7 > 0 ? 1 : 0);
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
