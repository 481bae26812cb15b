// `npx vcon-launch` / `npx vcon-server` in the project run the project's own compiled bins through
// node_modules/.bin: no copy in npx's cache, no second `prepare` (build), so X-Build-Time stays the
// build's. The fresh-clone timing (npm ci, then the demo's table) is measured by
// `npm run bench:fresh-clone`.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, test } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { cliEnv } from './helpers.js';

describe('npx resolves the project bins', () => {
  // A fresh npm cache: a run that installed the package into npx's cache would leave _npx/ there.
  const cache = mkdtempSync(path.join(os.tmpdir(), 'vcon-npx-cache-'));
  const env = { ...cliEnv(), npm_config_cache: cache, npm_config_update_notifier: 'false' };
  const buildInfo = () => readFileSync(path.join(packageRoot, 'dist', 'build-info.json'), 'utf8');
  afterAll(() => rmSync(cache, { recursive: true, force: true }));

  test('npx vcon-launch runs dist/cli without installing or rebuilding anything', async () => {
    const before = buildInfo();
    const r = await execa('npx', ['vcon-launch', '--version'], { cwd: packageRoot, env, extendEnv: false, reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    const { version } = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
    expect(r.stdout.trim()).toBe(version);
    expect(readdirSync(cache)).not.toContain('_npx');
    expect(buildInfo()).toBe(before);
  });

  test('npx vcon-server runs the server entry point (its configuration check answers)', async () => {
    const r = await execa('npx', ['vcon-server'], {
      cwd: packageRoot,
      env: { ...env, MCP_TRANSPORT: 'carrier-pigeon' },
      extendEnv: false,
      reject: false,
    });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/MCP_TRANSPORT: must be stdio or http/);
    expect(readdirSync(cache)).not.toContain('_npx');
  });
});
