// The sign-bit code of a vector for the SQL prefilter: the signs of a fixed random projection
// (SimHash), so the Hamming distance between two codes estimates the angle between the vectors
// for dense and sparse vectors alike. The projection depends only on the length and the seed.

export const CODE_BITS = 256;

const projections = new Map<number, Int8Array>();

/** ±1 entries from a seeded generator (mulberry32): the same matrix in every process. */
function projection(dims: number): Int8Array {
  let p = projections.get(dims);
  if (p) return p;
  p = new Int8Array(dims * CODE_BITS);
  let s = 0x9e3779b9 ^ dims;
  for (let i = 0; i < p.length; i++) {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    p[i] = ((t ^ (t >>> 14)) >>> 0) & 1 ? 1 : -1;
  }
  projections.set(dims, p);
  return p;
}

/** The code as bytes, bit i at the MSB-first bit of byte i >> 3 (the layout of varbit_send). */
export function signCodeBytes(v: Float32Array): Uint8Array {
  const bits = signCode(v);
  const out = new Uint8Array(CODE_BITS / 8);
  for (let b = 0; b < CODE_BITS; b++) if (bits[b] === '1') out[b >> 3] |= 0x80 >> (b & 7);
  return out;
}

/** The code as a PostgreSQL bit-string literal ('0101…', CODE_BITS long). */
export function signCode(v: Float32Array): string {
  const dims = v.length;
  const p = projection(dims);
  const acc = new Float64Array(CODE_BITS);
  for (let d = 0; d < dims; d++) {
    const x = v[d];
    if (x === 0) continue;
    const row = d * CODE_BITS;
    for (let b = 0; b < CODE_BITS; b++) acc[b] += p[row + b] * x;
  }
  let out = '';
  for (let b = 0; b < CODE_BITS; b++) out += acc[b] > 0 ? '1' : '0';
  return out;
}

/** Float32 vector ⇄ bytea (little-endian Float32Array bytes). */
export const vectorToBytes = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

export function bytesToVector(b: Uint8Array): Float32Array {
  // Copy: a Buffer from the driver may sit at an offset that isn't 4-byte aligned.
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b.subarray(0, out.byteLength));
  return out;
}
