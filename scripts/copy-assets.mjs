// Copies the non-TypeScript files the compiled server reads at run time (SQL migrations)
// into dist/, and marks the two bins executable.
import { chmodSync, cpSync, existsSync, rmSync } from 'node:fs';

// Replace, not merge: a migration removed from src (the squash into 0001_baseline) must not linger in dist.
rmSync('dist/src/db/migrations', { recursive: true, force: true });
cpSync('src/db/migrations', 'dist/src/db/migrations', { recursive: true });
for (const bin of ['dist/src/main.js', 'dist/cli/index.js']) {
  if (existsSync(bin)) chmodSync(bin, 0o755);
}

// Build provenance, read by src/version.ts: fixed at build time so every process reports the same.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
let gitCommit = 'unknown';
try {
  gitCommit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString()
    .trim();
} catch {
  // not a git checkout (e.g. installed from a tarball)
}
writeFileSync('dist/build-info.json', JSON.stringify({ git_commit: gitCommit, build_time: new Date().toISOString() }) + '\n');
