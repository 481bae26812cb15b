// One database for the whole run: TEST_DATABASE_URL when set (CI: the machine's PostgreSQL),
// otherwise the embedded PostgreSQL under .vcon/test-embedded, so `npm test` needs no server.
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { acquireEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { packageRoot } from '../../src/paths.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

let embedded: EmbeddedPostgres | undefined;

export async function setup(project: TestProject) {
  let url = process.env.TEST_DATABASE_URL;
  if (!url) {
    embedded = await acquireEmbeddedPostgres(path.join(packageRoot, '.vcon', 'test-embedded'));
    url = embedded.url;
  }
  project.provide('databaseUrl', url);
}

export async function teardown() {
  await embedded?.release();
}
