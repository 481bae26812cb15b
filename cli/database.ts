// The databases the selected groups use: their own DATABASE_URL, or one shared embedded cluster.
import path from 'node:path';
import { acquireEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.js';
import type { GroupSpec } from './groups.js';
import { createNoteLog } from './output.js';

export interface Databases {
  /** The URL a group connects to (its own, or the embedded cluster's). */
  urlOf(spec: GroupSpec): string;
  /** Whether the group runs on the embedded cluster. */
  isEmbedded(spec: GroupSpec): boolean;
  /** Keeps the group's embedded cluster running while `pid` lives (a child that did not join it itself). */
  holdFor(spec: GroupSpec, pid: number): void;
  release(): Promise<void>;
}

/**
 * Starts (or joins) one embedded cluster per data directory for the groups that have no
 * DATABASE_URL; it lives until release(). Same directory as a standalone vcon-server uses.
 */
export async function openDatabases(specs: GroupSpec[], opts: { verbose?: boolean } = {}): Promise<Databases> {
  const embedded = new Map<string, EmbeddedPostgres>();
  const log = createNoteLog(opts.verbose ?? true);
  try {
    for (const s of specs) {
      if (s.databaseUrl || embedded.has(s.config.dataDir)) continue;
      embedded.set(s.config.dataDir, await acquireEmbeddedPostgres(path.join(s.config.dataDir, 'embedded'), log));
    }
  } catch (err) {
    await Promise.all([...embedded.values()].map((e) => e.release()));
    throw err;
  }
  return {
    urlOf(spec) {
      return spec.databaseUrl ?? embedded.get(spec.config.dataDir)!.url;
    },
    isEmbedded(spec) {
      return !spec.databaseUrl;
    },
    holdFor(spec, pid) {
      embedded.get(spec.config.dataDir)?.holdFor(pid);
    },
    async release() {
      await Promise.all([...embedded.values()].map((e) => e.release()));
      embedded.clear();
    },
  };
}
