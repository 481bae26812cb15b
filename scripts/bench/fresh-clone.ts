#!/usr/bin/env node
// npm run bench:fresh-clone: the README's first command as a new operator runs it. Clones this
// checkout (HEAD) into a temporary directory, runs `npm ci`, then `npx vcon-launch start --group
// demo` and measures the time from the end of npm ci to the group's table on stdout; checks that
// nothing was built a second time (dist/build-info.json and X-Build-Time unchanged, no copy in
// npx's cache). Its goal: the table within 5 s. Reports and never fails (exit 0).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/paths.js';

const GOAL_MS = 5_000;
const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 1;

interface Round {
  npm_ci_s: number;
  table_after_ci_ms: number;
  healthy_in: string | null;
  rebuilt: boolean;
  npx_cache_install: boolean;
  x_build_time_matches: boolean;
}

async function oneRound(): Promise<Round> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'vcon-fresh-clone-'));
  const repo = path.join(tmp, 'repo');
  const npxCache = path.join(tmp, 'npm-cache');
  mkdirSync(npxCache);
  try {
    await execa('git', ['clone', '--quiet', packageRoot, repo]);
    const ci0 = Date.now();
    await execa('npm', ['ci', '--no-audit', '--no-fund'], { cwd: repo, stdio: 'ignore' });
    const ciDone = Date.now();
    const built = readFileSync(path.join(repo, 'dist', 'build-info.json'), 'utf8');
    // A fresh npm cache for npx, so a copy installed there would show; nothing else of the caller's
    // environment that could point the demo elsewhere.
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmp, npm_config_cache: npxCache, npm_config_update_notifier: 'false' };
    // In its own process group, so the stop below reaches npx and the launcher alike, like Ctrl-C.
    const launcher = execa('npx', ['vcon-launch', 'start', '--group', 'demo'], {
      cwd: repo,
      env,
      extendEnv: false,
      reject: false,
      buffer: false,
      detached: true,
    });
    let out = '';
    let err = '';
    const table = new Promise<number>((resolve, reject) => {
      launcher.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (/^demo\s+\S+\s+\S+\s+http:\/\/\S+\s+\d+$/m.test(out)) resolve(Date.now());
      });
      launcher.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      void launcher.then(() => reject(new Error(`launcher exited before its table:\n${out}\n${err}`)));
    });
    const tableAt = await table;
    const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1];
    const health = await fetch(`${url}/api/v1/health`);
    const buildTime = (JSON.parse(built) as { build_time: string }).build_time;
    process.kill(-launcher.pid!, 'SIGINT');
    await launcher;
    return {
      npm_ci_s: Math.round((ciDone - ci0) / 100) / 10,
      table_after_ci_ms: tableAt - ciDone,
      healthy_in: /healthy in ([\d.]+ s)/.exec(err)?.[1] ?? null,
      rebuilt: readFileSync(path.join(repo, 'dist', 'build-info.json'), 'utf8') !== built,
      npx_cache_install: readdirSync(npxCache).includes('_npx'),
      x_build_time_matches: health.headers.get('x-build-time') === buildTime,
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const results: Round[] = [];
for (let r = 0; r < rounds; r++) {
  const round = await oneRound();
  results.push(round);
  process.stdout.write(`round ${r + 1}: ${JSON.stringify(round)}\n`);
}
const worst = Math.max(...results.map((r) => r.table_after_ci_ms));
const clean = results.every((r) => !r.rebuilt && !r.npx_cache_install && r.x_build_time_matches);
const summary = {
  date: new Date().toISOString(),
  machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
  goal_ms: GOAL_MS,
  worst_table_after_ci_ms: worst,
  pass: worst <= GOAL_MS && clean,
  rounds: results,
};
const dir = path.join(packageRoot, 'tests', 'bench', 'results');
mkdirSync(dir, { recursive: true });
writeFileSync(path.join(dir, `fresh-clone-${summary.date.replace(/[:.]/g, '-').slice(0, 19)}Z.json`), JSON.stringify(summary, null, 2) + '\n');
process.stdout.write(
  `table after npm ci: worst ${worst} ms of ${rounds} round(s) (goal <= ${GOAL_MS} ms); second build: ${clean ? 'none' : 'YES'} -> ${summary.pass ? 'PASS' : 'FAIL'}\n`,
);
