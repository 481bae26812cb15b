// The sign-bit code of a vector for the SQL prefilter: the signs of a fixed random projection
// (SimHash), so the Hamming distance between two codes estimates the angle between the vectors
// for dense and sparse vectors alike. The projection depends only on the length and the seed.

export const CODE_BITS = 256;

/** Projection matrices by vector length, bit-major: row b holds the ±1 weight of each dimension for bit b. */
const projections = new Map<number, Int8Array>();

/** ±1 entries from a seeded generator (mulberry32): the same matrix in every process. */
function projection(dims: number): Int8Array {
  let p = projections.get(dims);
  if (p) return p;
  p = new Int8Array(dims * CODE_BITS);
  let s = 0x9e3779b9 ^ dims;
  // Drawn in (dimension, bit) order, the matrix every stored code was made with; stored per bit so
  // a bit's sum reads one row (signs below).
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

/** Whether each bit's projection is positive. */
function signs(v: Float32Array): Uint8Array {
  const dims = v.length;
  const p = projection(dims);
  const out = new Uint8Array(CODE_BITS);
  // Four bits at a time, four independent sums (about twice as fast as one dimension at a time
  // across all 256 sums in memory). Each sum adds the same products in the same order (dimension
  // 0 up) as before, so every code is bit for bit the one stored (tests/unit/sign-code.test.ts).
  for (let b = 0; b < CODE_BITS; b += 4) {
    const r0 = b * dims;
    const r1 = r0 + dims;
    const r2 = r1 + dims;
    const r3 = r2 + dims;
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    for (let d = 0; d < dims; d++) {
      const x = v[d];
      a0 += p[r0 + d] * x;
      a1 += p[r1 + d] * x;
      a2 += p[r2 + d] * x;
      a3 += p[r3 + d] * x;
    }
    out[b] = a0 > 0 ? 1 : 0;
    out[b + 1] = a1 > 0 ? 1 : 0;
    out[b + 2] = a2 > 0 ? 1 : 0;
    out[b + 3] = a3 > 0 ? 1 : 0;
  }
  return out;
}

/** The code as bytes, bit i at the MSB-first bit of byte i >> 3 (the layout of varbit_send). */
export function signCodeBytes(v: Float32Array): Uint8Array {
  const bits = signs(v);
  const out = new Uint8Array(CODE_BITS / 8);
  for (let b = 0; b < CODE_BITS; b++) if (bits[b]) out[b >> 3] |= 0x80 >> (b & 7);
  return out;
}

/** The code as a PostgreSQL bit-string literal ('0101…', CODE_BITS long). */
export function signCode(v: Float32Array): string {
  return Array.from(signs(v), (s) => (s ? '1' : '0')).join('');
}

/** Float32 vector ⇄ bytea (little-endian Float32Array bytes). */
export const vectorToBytes = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

export function bytesToVector(b: Uint8Array): Float32Array {
  // Copy: a Buffer from the driver may sit at an offset that isn't 4-byte aligned.
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b.subarray(0, out.byteLength));
  return out;
}
