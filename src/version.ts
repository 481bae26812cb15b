import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from './paths.js';

export interface BuildInfo {
  version: string;
  gitCommit: string;
  buildTime: string;
}

function readGitCommit(): string {
  const stamp = path.join(packageRoot, 'dist', 'build-info.json');
  if (existsSync(stamp)) {
    try {
      return (JSON.parse(readFileSync(stamp, 'utf8')) as { git_commit?: string }).git_commit ?? 'unknown';
    } catch {
      /* fall through to git */
    }
  }
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: packageRoot, stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 })
      .toString()
      .trim();
  } catch {
    return 'unknown';
  }
}

function readBuildTime(): string {
  const stamp = path.join(packageRoot, 'dist', 'build-info.json');
  try {
    return (JSON.parse(readFileSync(stamp, 'utf8')) as { build_time: string }).build_time;
  } catch {
    return new Date().toISOString();
  }
}

let cached: BuildInfo | undefined;

/** Version, commit and build time, read once and fixed for the life of the process. */
export function getBuildInfo(): BuildInfo {
  cached ??= {
    version: (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version,
    gitCommit: readGitCommit(),
    buildTime: readBuildTime(),
  };
  return cached;
}
