// Feature hashing: words, word bigrams and character 3–5-grams, each hashed with a sign into a
// fixed number of buckets. No data files; good at exact terms and typos, weak at paraphrase.
import type { EmbeddingProvider } from './types.js';
import { MODEL_VERSION, normalize } from './text.js';
import { createFeaturizer, type Featurizer } from './features.js';

export const DEFAULT_HASH_DIMS = 256;

/** Distinct words whose features the provider keeps. */
const HASHING_WORDS = 8_192;

/** One normalised hashed vector, with the words of `featurizer` (a fresh one if none is given). */
export function embedHashed(text: string, dims = DEFAULT_HASH_DIMS, featurizer: Featurizer<never> = createFeaturizer(HASHING_WORDS)): Float32Array {
  const v = new Float32Array(dims);
  featurizer.addHashed(featurizer.scan(text), v);
  return normalize(v);
}

/** The feature-hashing provider: no files, no network; the minimal install. */
export function createHashingProvider(dims = DEFAULT_HASH_DIMS): EmbeddingProvider {
  const featurizer = createFeaturizer<never>(HASHING_WORDS);
  return {
    id: 'hashing',
    model: `fh${dims}-v${MODEL_VERSION}`,
    inline: true,
    dimensions: () => dims,
    async embed(texts) {
      return texts.map((t) => embedHashed(t, dims, featurizer));
    },
  };
}
