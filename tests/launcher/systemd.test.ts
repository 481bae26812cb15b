// export --target systemd: one unit per group that systemd restarts on failure, with the group's
// environment (its own role, the port it had) in a private file, as the group's OS user when group
// users are on; checked with systemd-analyze verify where it exists.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { cliEnv, createWorkspace, roleNamesOf, type Workspace } from './helpers.js';

/** Why systemd-analyze cannot check the units here, or undefined when it can. */
const noVerify = (() => {
  try {
    execFileSync('systemd-analyze', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'systemd-analyze is not installed on this machine';
  }
})();

describe('vcon-launch export --target systemd', () => {
  let ws: Workspace;
  let out = '';
  beforeAll(() => {
    ws = createWorkspace(['sa', 'sb']);
    out = path.join(ws.dir, 'units');
  });
  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('writes one unit and one private environment file per group', async () => {
    // A start gives the group its role and a port; the unit keeps both.
    expect((await ws.run(['start', '--group', 'sa', '--detach'])).exitCode).toBe(0);
    const port = ws.registry().sa.port;
    expect((await ws.run(['stop', '--all'])).exitCode).toBe(0);
    const r = await ws.run(['export', '--target', 'systemd', '--all', '--out', out], { env: { ...cliEnv(), VCON_LAUNCH_GROUP_USERS: 'off' } });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual(
      ['vcon-sa.env', 'vcon-sa.service', 'vcon-sb.env', 'vcon-sb.service'].map((f) => path.join(out, f)),
    );
    const unit = readFileSync(path.join(out, 'vcon-sa.service'), 'utf8');
    expect(unit).toContain('Restart=on-failure');
    expect(unit).toContain(`EnvironmentFile=${path.join(out, 'vcon-sa.env')}`);
    expect(unit).toMatch(/^ExecStart=\S*node .*--max-old-space-size=\d+ \S*dist\/src\/main\.js$/m);
    expect(unit).not.toMatch(/^User=/m);
    const envFile = path.join(out, 'vcon-sa.env');
    expect(statSync(envFile).mode & 0o077).toBe(0);
    const env = readFileSync(envFile, 'utf8');
    expect(new URL(/^DATABASE_URL=(.*)$/m.exec(env)![1].replace(/^'|'$/g, '')).username).toBe(roleNamesOf(ws.schemas.sa).role);
    expect(env).toContain(`MCP_HTTP_PORT=${port}`);
    expect(env).toContain(`SUPABASE_DB_SCHEMA=${ws.schemas.sa}`);
    // sb never ran: no role of its own yet, and no port to keep; both said.
    expect(r.stderr).toContain('group sb: no role of its own yet');
    expect(r.stderr).toContain('group sb: MCP_HTTP_PORT is 0');
  });

  test("runs as the group's own OS user when group users are on", async () => {
    const r = await ws.run(['export', '--target', 'systemd', '--group', 'sa', '--out', out], { env: { ...cliEnv(), VCON_LAUNCH_GROUP_USERS: 'on' } });
    if (process.getuid?.() !== 0) {
      // Group users need root, as for start.
      expect(r.exitCode).not.toBe(0);
      return;
    }
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readFileSync(path.join(out, 'vcon-sa.service'), 'utf8')).toMatch(/^User=vcon-sa\nGroup=vcon-sa$/m);
  });

  test.skipIf(noVerify)(`systemd-analyze verify accepts the units${noVerify ? ` (skipped: ${noVerify})` : ''}`, () => {
    for (const g of ['sa', 'sb']) {
      const unit = path.join(out, `vcon-${g}.service`);
      // verify exits 0 on unknown keys too: its output is the verdict.
      const v = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
      expect(v.stdout + v.stderr).toBe('');
      expect(v.status).toBe(0);
    }
  });
});
