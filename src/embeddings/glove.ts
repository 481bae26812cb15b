// The default provider: SIF-weighted GloVe word vectors side by side with a feature-hashing half
// (the combination that measured best of those tried; npm run bench:quality compares providers). Offline, deterministic and cheap
// (well under a µs per word once a word is cached, scripts/bench/embed.ts): one tokenising pass
// feeds both halves (features.ts).
import type { EmbeddingProvider } from './types.js';
import { editDistance, MODEL_VERSION, normalize } from './text.js';
import { DEFAULT_HASH_DIMS } from './hashing.js';
import { createFeaturizer, type Scanned } from './features.js';
import { computeCommon, sifWeight, trigrams, type WordVectors } from './glove-cache.js';

export interface SifOptions {
  /** SIF smoothing: weight = a / (a + p(w)). */
  a?: number;
  /** Remove the common component (the dominant direction of frequency-weighted word vectors). */
  removeCommon?: boolean;
  /** Length of the hashing half (0 = GloVe only). */
  hashDims?: number;
  /** Share of the GloVe half in the cosine (the hashing half gets the rest). */
  gloveShare?: number;
  /** Correct unknown words to the closest frequent vocabulary word. */
  spelling?: boolean;
}

const DEFAULTS: Required<SifOptions> = { a: 1e-3, removeCommon: true, hashDims: DEFAULT_HASH_DIMS, gloveShare: 0.6, spelling: true };

/** Bounds of the per-process caches: hot words with their components, spelling corrections. */
const HOT_WORDS = 8_192;
const MAX_MEMO = 4_096;

/** A word as encode needs it: its row, its weight × scale and its int8 components. */
interface HotWord {
  row: number;
  k: number;
  data: Int8Array;
}

/** Pools word vectors into sentence vectors; exported for the quality bench's variants. */
export function createSifEncoder(wv: WordVectors, options: SifOptions = {}) {
  const o = { ...DEFAULTS, ...options };
  const { dims } = wv;

  // The table is read in place (glove-cache.ts); the words a group actually uses are kept with
  // their features, a bounded set, oldest out first. Unknown words are remembered too (as null).
  const featurizer = createFeaturizer<HotWord>(HOT_WORDS);
  const remember = <V>(map: Map<string, V>, key: string, value: V, max: number) => {
    if (map.size >= max) map.delete(map.keys().next().value as string);
    map.set(key, value);
    return value;
  };
  const hotWord = (row: number): HotWord => {
    const r = wv.readRow(row);
    return { row, k: sifWeight(o.a, r.rank, wv.sourceSize) * r.scale, data: Int8Array.from(r.data) };
  };

  const common: Float32Array | null = !o.removeCommon ? null : wv.common?.a === o.a ? wv.common.vector : computeCommon(wv, o.a);

  // Spelling back-off: character-trigram candidates among frequent words, then edit distance.
  const memo = new Map<string, number>();

  /**
   * Vocabulary words sharing a third of `w`'s trigrams and within edit distance 1 (2 from 7
   * letters), with their distance: the candidates both correction and suggestion choose from.
   */
  const spellingNeighbours = (w: string): { i: number; d: number }[] => {
    const grams = trigrams(w);
    const shared = new Map<number, number>();
    for (const t of grams) for (const i of wv.postings(t)) shared.set(i, (shared.get(i) ?? 0) + 1);
    const maxDist = w.length >= 7 ? 2 : 1;
    const need = Math.max(1, Math.floor(grams.length / 3));
    const out: { i: number; d: number }[] = [];
    for (const [i, count] of shared) {
      if (count < need) continue;
      const d = editDistance(w, wv.readRow(i).word, maxDist);
      if (d <= maxDist) out.push({ i, d });
    }
    return out;
  };

  const correct = (w: string): number => {
    const hit = memo.get(w);
    if (hit !== undefined) return hit;
    let best = -1;
    let bestDist = Infinity;
    for (const { i, d } of spellingNeighbours(w)) {
      // Ties go to the more frequent word (lower index).
      if (d < bestDist || (d === bestDist && i < best)) {
        best = i;
        bestDist = d;
      }
    }
    return remember(memo, w, best, MAX_MEMO);
  };

  /**
   * Frequent words close to `w` in spelling (edit distance 1, or 2 from 7 letters), closest and
   * most frequent first, and whether `w` itself is a frequent word.
   */
  const suggest = (w: string, limit = 8): { known: boolean; words: string[] } => {
    const own = wv.find(w);
    const known = own >= 0 && own < wv.spellVocab;
    const found = spellingNeighbours(w).filter((f) => f.i !== own);
    found.sort((a, b) => a.d - b.d || a.i - b.i);
    return { known, words: found.slice(0, limit).map((f) => wv.readRow(f.i).word) };
  };

  /** The row a token's vector comes from, after spelling back-off; -1 for none. */
  const wordRow = (t: string): number => {
    const i = wv.find(t);
    return i < 0 && o.spelling && t.length >= 4 && /^[a-z]+$/.test(t) ? correct(t) : i;
  };
  const lookup = (t: string): HotWord | null => {
    const i = wordRow(t);
    return i < 0 ? null : hotWord(i);
  };

  /**
   * The GloVe half of the scanned words into `v` (zeroed): SIF-weighted mean, common component
   * removed, unit length (or zero). Each distinct word once, weighted by its count.
   */
  function addGlove(text: Scanned<HotWord>, v: Float32Array): Float32Array {
    const { distinct, distinctCount } = text;
    let n = 0;
    for (let j = 0; j < distinctCount; j++) {
      const w = distinct[j];
      const hit = w.glove === undefined ? (w.glove = lookup(w.token)) : w.glove;
      if (!hit) continue;
      const { data } = hit;
      const k = hit.k * w.tf;
      for (let d = 0; d < dims; d++) v[d] += k * data[d];
      n++;
    }
    if (n === 0) return v;
    if (common) {
      let proj = 0;
      for (let d = 0; d < dims; d++) proj += v[d] * common[d];
      for (let d = 0; d < dims; d++) v[d] -= proj * common[d];
    }
    return normalize(v);
  }

  /** The GloVe half alone. */
  function encodeGlove(text: string): Float32Array {
    return addGlove(featurizer.scan(text), new Float32Array(dims));
  }

  const total = dims + o.hashDims;
  const gw = Math.sqrt(o.gloveShare);
  const hw = Math.sqrt(1 - o.gloveShare);
  // Scratch halves, reused: encode is synchronous and allocates only its result.
  const g = new Float32Array(dims);
  const h = new Float32Array(o.hashDims);

  /** The full vector: [√share · GloVe half, √(1−share) · hashing half], renormalised, into `out` (zeroed). */
  function encode(text: string, out = new Float32Array(total)): Float32Array {
    const scanned = featurizer.scan(text);
    g.fill(0);
    addGlove(scanned, g);
    for (let d = 0; d < dims; d++) out[d] = g[d] * gw;
    if (o.hashDims > 0) {
      h.fill(0);
      featurizer.addHashed(scanned, h);
      normalize(h);
      for (let d = 0; d < o.hashDims; d++) out[dims + d] = h[d] * hw;
    }
    return normalize(out);
  }

  /**
   * The vectors of many texts, views of one buffer: a small typed array costs more to allocate
   * (~0.7 µs, off the V8 heap) than a short text to encode.
   */
  function encodeMany(texts: readonly string[]): Float32Array[] {
    const buf = new Float32Array(total * texts.length);
    return texts.map((t, i) => encode(t, buf.subarray(i * total, (i + 1) * total)));
  }

  return { encode, encodeMany, encodeGlove, suggest, wordRow, dimensions: total, options: o };
}

/**
 * The default provider. `load` returns the word vectors (from the cache, built on first use);
 * it is called once, on the first embed or on warm().
 */
export function createGloveProvider(load: () => Promise<WordVectors>, options: SifOptions = {}): EmbeddingProvider {
  const o = { ...DEFAULTS, ...options };
  let encoder: Promise<ReturnType<typeof createSifEncoder>> | undefined;
  const ready = () => {
    encoder ??= load().then((wv) => createSifEncoder(wv, o));
    // A failed load is retried on the next call instead of failing forever.
    encoder.catch(() => {
      encoder = undefined;
    });
    return encoder;
  };
  return {
    id: 'glove',
    model: `sg100d-sif${o.removeCommon ? '-pc' : ''}+fh${o.hashDims}-s${Math.round(o.gloveShare * 100)}-v${MODEL_VERSION}`,
    inline: true,
    dimensions: () => 100 + o.hashDims,
    async embed(texts) {
      return (await ready()).encodeMany(texts);
    },
    async warm() {
      await ready();
    },
    async suggest(word) {
      return (await ready()).suggest(word.toLowerCase());
    },
  };
}
