// The default provider: SIF-weighted GloVe word vectors side by side with a feature-hashing half
// (the combination measured best, STACK.md "Embeddings offline"). Offline, deterministic, ~0.2 ms
// per text, so it runs inside the write transaction.
import type { EmbeddingProvider } from './types.js';
import { contentTokens, editDistance, MODEL_VERSION, normalize } from './text.js';
import { addHashedFeatures, DEFAULT_HASH_DIMS } from './hashing.js';
import type { WordVectors } from './glove-cache.js';

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

/** Words a typo may be corrected to: the most frequent ones, so corrections are common words. */
const SPELL_VOCAB = 60_000;
const MAX_MEMO = 50_000;

/** Pools word vectors into sentence vectors; exported for the quality bench's variants. */
export function createSifEncoder(wv: WordVectors, options: SifOptions = {}) {
  const o = { ...DEFAULTS, ...options };
  const { dims, data, scales, ranks } = wv;
  // Zipf's law stands in for counts (the package has ranks, not frequencies).
  const harmonic = Math.log(wv.sourceSize) + 0.5772;
  const weights = new Float32Array(wv.words.length);
  for (let i = 0; i < weights.length; i++) {
    const p = 1 / ((ranks[i] + 1) * harmonic);
    weights[i] = o.a / (o.a + p);
  }

  const wordVec = (i: number, out: Float32Array, w: number) => {
    const base = i * dims;
    const k = w * scales[i];
    for (let d = 0; d < dims; d++) out[d] += k * data[base + d];
  };

  // The common component: the top eigenvector of Σ p(w)·sif(w)²·v vᵀ over frequent words, by
  // power iteration. Computed from the vocabulary, not the corpus, so a vector never changes
  // when other documents are added.
  let common: Float32Array<ArrayBufferLike> | null = null;
  if (o.removeCommon) {
    const n = Math.min(20_000, wv.words.length);
    const c = new Float32Array(n);
    for (let i = 0; i < n; i++) c[i] = (weights[i] * weights[i]) / (ranks[i] + 1);
    let u: Float32Array<ArrayBufferLike> = new Float32Array(dims).fill(1 / Math.sqrt(dims));
    const x = new Float32Array(dims);
    for (let iter = 0; iter < 25; iter++) {
      const next = new Float32Array(dims);
      for (let i = 0; i < n; i++) {
        x.fill(0);
        wordVec(i, x, 1);
        let proj = 0;
        for (let d = 0; d < dims; d++) proj += x[d] * u[d];
        const k = c[i] * proj;
        for (let d = 0; d < dims; d++) next[d] += k * x[d];
      }
      u = normalize(next);
    }
    common = u;
  }

  // Spelling back-off: character-trigram candidates among frequent words, then edit distance.
  let trigramIndex: Map<string, number[]> | null = null;
  const memo = new Map<string, number>();
  const trigrams = (w: string) => {
    const p = `^${w}$`;
    const out: string[] = [];
    for (let i = 0; i + 3 <= p.length; i++) out.push(p.slice(i, i + 3));
    return out;
  };
  const buildSpelling = () => {
    if (!trigramIndex) {
      trigramIndex = new Map();
      const n = Math.min(SPELL_VOCAB, wv.words.length);
      for (let i = 0; i < n; i++) {
        const word = wv.words[i];
        if (word.length < 3) continue;
        for (const t of trigrams(word)) {
          const list = trigramIndex.get(t);
          if (list) list.push(i);
          else trigramIndex.set(t, [i]);
        }
      }
    }
    return trigramIndex;
  };

  /**
   * Vocabulary words sharing a third of `w`'s trigrams and within edit distance 1 (2 from 7
   * letters), with their distance: the candidates both correction and suggestion choose from.
   */
  const spellingNeighbours = (w: string): { i: number; d: number }[] => {
    const postings = buildSpelling();
    const grams = trigrams(w);
    const shared = new Map<number, number>();
    for (const t of grams) for (const i of postings.get(t) ?? []) shared.set(i, (shared.get(i) ?? 0) + 1);
    const maxDist = w.length >= 7 ? 2 : 1;
    const need = Math.max(1, Math.floor(grams.length / 3));
    const out: { i: number; d: number }[] = [];
    for (const [i, count] of shared) {
      if (count < need) continue;
      const d = editDistance(w, wv.words[i], maxDist);
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
    if (memo.size >= MAX_MEMO) memo.clear();
    memo.set(w, best);
    return best;
  };

  /**
   * Frequent words close to `w` in spelling (edit distance 1, or 2 from 7 letters), closest and
   * most frequent first, and whether `w` itself is a frequent word.
   */
  const suggest = (w: string, limit = 8): { known: boolean; words: string[] } => {
    const own = wv.index.get(w);
    const known = own !== undefined && own < SPELL_VOCAB;
    const found = spellingNeighbours(w).filter((f) => f.i !== own);
    found.sort((a, b) => a.d - b.d || a.i - b.i);
    return { known, words: found.slice(0, limit).map((f) => wv.words[f.i]) };
  };

  const lookup = (t: string): number => {
    const i = wv.index.get(t);
    if (i !== undefined) return i;
    if (!o.spelling || t.length < 4 || !/^[a-z]+$/.test(t)) return -1;
    return correct(t);
  };

  /** The GloVe half: SIF-weighted mean, common component removed, unit length (or zero). */
  function encodeGlove(text: string): Float32Array {
    const v = new Float32Array(dims);
    let n = 0;
    for (const t of contentTokens(text)) {
      const i = lookup(t);
      if (i < 0) continue;
      wordVec(i, v, weights[i]);
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

  const total = dims + o.hashDims;
  const gw = Math.sqrt(o.gloveShare);
  const hw = Math.sqrt(1 - o.gloveShare);

  /** The full vector: [√share · GloVe half, √(1−share) · hashing half], renormalised. */
  function encode(text: string): Float32Array {
    const out = new Float32Array(total);
    const g = encodeGlove(text);
    for (let d = 0; d < dims; d++) out[d] = g[d] * gw;
    if (o.hashDims > 0) {
      const h = normalize(
        (() => {
          const x = new Float32Array(o.hashDims);
          addHashedFeatures(text, x);
          return x;
        })(),
      );
      for (let d = 0; d < o.hashDims; d++) out[dims + d] = h[d] * hw;
    }
    return normalize(out);
  }

  /** Builds the spelling index now (~0.15 s) instead of on the first unknown word. */
  const prepare = () => {
    if (o.spelling) buildSpelling();
  };

  return { encode, encodeGlove, prepare, suggest, dimensions: total, options: o };
}

/**
 * The default provider. `load` returns the word vectors (from the cache, built on first use);
 * it is called once, on the first embed or on warm().
 */
export function createGloveProvider(load: () => Promise<WordVectors>, options: SifOptions = {}): EmbeddingProvider {
  const o = { ...DEFAULTS, ...options };
  let encoder: Promise<ReturnType<typeof createSifEncoder>> | undefined;
  const ready = () => {
    encoder ??= load().then((wv) => {
      const enc = createSifEncoder(wv, o);
      enc.prepare();
      return enc;
    });
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
      const enc = await ready();
      return texts.map((t) => enc.encode(t));
    },
    async warm() {
      await ready();
    },
    async suggest(word) {
      return (await ready()).suggest(word.toLowerCase());
    },
  };
}
