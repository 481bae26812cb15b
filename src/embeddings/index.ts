// Chooses the embedding provider from the configuration (EMBEDDINGS_PROVIDER; docs/search.md).
import path from 'node:path';
import type { Config } from '../config.js';
import { createGloveProvider } from './glove.js';
import { createHashingProvider } from './hashing.js';
import { createOpenAiProvider } from './openai.js';
import { ensureCache, openCache } from './glove-cache.js';
import type { EmbeddingProvider } from './types.js';

export type { EmbeddingProvider } from './types.js';
export { EmbeddingError } from './types.js';

interface ProviderLog {
  info(obj: object, msg: string): void;
}

/** Where the word-vector cache lives: shared by every group using the same data directory. */
export const embeddingsCacheDir = (dataDir: string) => path.join(dataDir, 'embeddings');

/** The provider a configuration asks for. Nothing is loaded until the first embed or warm(). */
export function createEmbeddingProvider(config: Pick<Config, 'embeddings' | 'dataDir'>, log?: ProviderLog): EmbeddingProvider {
  const e = config.embeddings;
  switch (e.provider) {
    case 'hashing':
      return createHashingProvider(e.dimensions || undefined);
    case 'openai':
      return createOpenAiProvider({ url: e.url, model: e.model, apiKey: e.apiKey, dimensions: e.dimensions || undefined });
    case 'glove':
    default:
      return createGloveProvider(async () => {
        const t0 = Date.now();
        const file = await ensureCache(embeddingsCacheDir(config.dataDir), {
          onBuild: ({ file, phase, ms }) =>
            log?.info({ file, ms }, phase === 'start' ? 'building the word-vector cache (once)' : 'word-vector cache built'),
        });
        const wv = openCache(file);
        log?.info({ file, words: wv.count, ms: Date.now() - t0 }, 'word vectors opened');
        return wv;
      });
  }
}
