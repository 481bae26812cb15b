// Re-embeds one group with the provider its environment configures (npm run reembed, with the
// group's env: ENV_FILE=env/<group>.env). Only vCons without vectors in that space are embedded,
// so an interrupted run resumes where it stopped.
import { loadConfig } from '../../src/config.js';
import { createSql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { acquireEmbeddedPostgres } from '../../src/db/embedded.js';
import { reembedGroup } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import path from 'node:path';
import { isMain } from './util.js';

export async function reembedFromEnv(env: Record<string, string | undefined> = process.env) {
  const config = loadConfig(env);
  const embedded = config.db.url ? undefined : await acquireEmbeddedPostgres(path.join(config.dataDir, 'embedded'));
  const sql = createSql({ url: config.db.url ?? embedded!.url, schema: config.db.schema, max: 2 });
  try {
    await migrate(sql, config.db.schema);
    const provider = createEmbeddingProvider(config);
    return await reembedGroup(sql, provider, {
      onProgress: (n) => process.stderr.write(`\rre-embedded ${n} vCons`),
    });
  } finally {
    await sql.end({ timeout: 5 });
    await embedded?.release();
  }
}

if (isMain(import.meta.url)) {
  reembedFromEnv().then(
    (r) => process.stdout.write(`\n${JSON.stringify(r, null, 2)}\n`),
    (err: Error) => {
      process.stderr.write(`reembed failed: ${err.message}\n`);
      process.exitCode = 1;
    },
  );
}
