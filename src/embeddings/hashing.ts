// Feature hashing: words, word bigrams and character 3–5-grams, each hashed with a sign into a
// fixed number of buckets. No data files; good at exact terms and typos, weak at paraphrase.
import type { EmbeddingProvider } from './types.js';
import { contentTokens, hash32, MODEL_VERSION, normalize, stem } from './text.js';

export const DEFAULT_HASH_DIMS = 256;

const WORD_W = 1;
const BIGRAM_W = 0.6;
const NGRAM_W = 0.35;

/**
 * Adds the hashed features of `text` into `out` (length = bucket count). Term weights are
 * 1 + ln(tf), which stays ≥ 1: a log weight that can go negative spoils short texts (STACK.md).
 */
export function addHashedFeatures(text: string, out: Float32Array): void {
  const dims = out.length;
  const counts = new Map<string, number>();
  const add = (key: string, w: number) => counts.set(key, (counts.get(key) ?? 0) + w);
  const tokens = contentTokens(text).map(stem);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    add(`w:${t}`, WORD_W);
    if (i + 1 < tokens.length) add(`b:${t} ${tokens[i + 1]}`, BIGRAM_W);
    const padded = `<${t}>`;
    // Character n-grams let a typo still share most features with the right word.
    const grams: string[] = [];
    for (let n = 3; n <= 5; n++) {
      for (let j = 0; j + n <= padded.length; j++) grams.push(padded.slice(j, j + n));
    }
    const share = grams.length ? NGRAM_W / Math.sqrt(grams.length) : 0;
    for (const g of grams) add(`c:${g}`, share);
  }
  for (const [key, w] of counts) {
    const h = hash32(key);
    const weight = w >= 1 ? 1 + Math.log(w) : w;
    out[h % dims] += h & 0x80000000 ? -weight : weight;
  }
}

/** One normalised hashed vector. */
export function embedHashed(text: string, dims = DEFAULT_HASH_DIMS): Float32Array {
  const v = new Float32Array(dims);
  addHashedFeatures(text, v);
  return normalize(v);
}

/** The feature-hashing provider: no files, no network; the minimal install. */
export function createHashingProvider(dims = DEFAULT_HASH_DIMS): EmbeddingProvider {
  return {
    id: 'hashing',
    model: `fh${dims}-v${MODEL_VERSION}`,
    inline: true,
    dimensions: () => dims,
    async embed(texts) {
      return texts.map((t) => embedHashed(t, dims));
    },
  };
}
