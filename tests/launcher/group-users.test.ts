// Groups as their own OS users, which the launcher does by default when it runs as root (as on
// these machines): from one group's user, another group's process environment and credentials
// are out of reach, and no group's keys or passwords are in its own environment.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { installUnreachableByOthers } from '../../cli/os-users.js';
import { packageRoot } from '../../src/paths.js';
import { api, cliEnv, createWorkspace, isAlive, KEY, startForeground, waitFor, type Workspace } from './helpers.js';

const isRoot = process.getuid?.() === 0;

/** The real uid and gid of a process (/proc/<pid>/status). */
function idsOf(pid: number): { uid: number; gid: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { uid: Number(/^Uid:\s+(\d+)/m.exec(status)![1]), gid: Number(/^Gid:\s+(\d+)/m.exec(status)![1]) };
}

/** Runs a command as the given uid and gid (no supplementary groups). */
const runAs = (ids: { uid: number; gid: number }, cmd: string, args: string[]) =>
  execa(cmd, args, { uid: ids.uid, gid: ids.gid, reject: false, env: cliEnv(), extendEnv: false });

// A checkout that other users cannot enter (a clone under a private directory) keeps every group as
// the launcher's user, as the launcher says when it starts: then there is nothing here to test.
const unreachable = isRoot ? installUnreachableByOthers(packageRoot) : undefined;

describe.skipIf(!isRoot || unreachable !== undefined)('groups under a root launcher (install reachable by other users)', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['alpha', 'beta']);
    // Other users may reach the workspace: what keeps them out must be the files' own modes.
    chmodSync(ws.dir, 0o755);
    for (const g of ['alpha', 'beta', 'shared']) chmodSync(path.join(ws.envDir, `${g}.env`), 0o600);
  });
  afterAll(async () => {
    await ws?.run(['stop', '--all', '--instances-dir', ws.instancesDir]);
    await ws?.cleanup();
  });

  test("each group runs as its own user, which cannot read another group's /proc/<pid>/environ or credentials", async () => {
    const r = await ws.run(['start', '--group', 'alpha', '--group', 'beta', '--detach', '--instances-dir', ws.instancesDir]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/readable by other users/);
    const { alpha, beta } = ws.registry();
    const a = idsOf(alpha.pid);
    const b = idsOf(beta.pid);
    expect(a.uid).not.toBe(0);
    expect(b.uid).not.toBe(0);
    expect(a.uid).not.toBe(b.uid);

    const environ = await runAs(a, 'cat', [`/proc/${beta.pid}/environ`]);
    expect(environ.exitCode).not.toBe(0);
    expect(environ.stderr).toMatch(/Permission denied/);
    const credentials = await runAs(a, 'cat', [path.join(ws.instancesDir, 'credentials', 'beta.json')]);
    expect(credentials.exitCode).not.toBe(0);
    expect(credentials.stderr).toMatch(/Permission denied/);
    const log = await runAs(a, 'cat', [path.join(ws.instancesDir, 'beta.log')]);
    expect(log.stderr).toMatch(/Permission denied/);

    // Control: the same user reads its own process's environment, which holds no key or password.
    const own = await runAs(a, 'cat', [`/proc/${alpha.pid}/environ`]);
    expect(own.exitCode, own.stderr).toBe(0);
    const vars = own.stdout.split('\0');
    expect(vars).toContain(`SUPABASE_DB_SCHEMA=${ws.schemas.alpha}`);
    expect(own.stdout).not.toContain(KEY);
    for (const name of ['API_KEYS', 'DATABASE_URL', 'DATABASE_PASSWORD', 'ANALYZE_DATABASE_PASSWORD']) {
      expect(
        vars.some((v) => v.startsWith(`${name}=`)),
        name,
      ).toBe(false);
    }

    // The groups work as before.
    for (const e of [alpha, beta]) {
      const created = await api(`${e.url}${e.api_base_path}`, '/vcons', { method: 'POST', json: { vcon: '0.3.0', parties: [{ name: e.group }] } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }
  }, 120_000);

  test("start names an env file other users can read, shared.env included (every group's, with the admin's URL)", async () => {
    const other = createWorkspace(['gamma']);
    try {
      chmodSync(other.dir, 0o755);
      chmodSync(path.join(other.envDir, 'gamma.env'), 0o600);
      chmodSync(path.join(other.envDir, 'shared.env'), 0o644);
      const r = await other.run(['start', '--group', 'gamma', '--detach']);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toContain(`${path.join(other.envDir, 'shared.env')} is readable by other users (mode 644)`);
      expect(r.stderr).not.toContain('gamma.env is readable');
    } finally {
      await other.run(['stop', '--all']);
      await other.cleanup();
    }
  }, 120_000);

  test("a crashed group restarted by the foreground supervisor (from its warm standby) runs as the group's user", async () => {
    const { launcher, stderr } = startForeground(ws, ['--group', 'alpha', '--instances-dir', path.join(ws.dir, 'fg')]);
    try {
      await ws.run(['stop', '--all', '--instances-dir', ws.instancesDir]);
      await waitFor(() => stderr().includes('supervising'), 90_000);
      const first = JSON.parse(readFileSync(path.join(ws.dir, 'fg', 'alpha.json'), 'utf8')) as { pid: number };
      const user = idsOf(first.pid);
      expect(user.uid).not.toBe(0);
      // The warm standby (started as the launcher's user) is what the restart turns into the group.
      // (A group started as its own user is a `--standby` too, which got its start message at once.)
      const standby = await waitFor(async () => {
        const { stdout } = await execa('pgrep', ['-P', String(launcher.pid), '-f', '--', '--standby'], { reject: false });
        return stdout
          .split('\n')
          .map(Number)
          .find((pid) => pid && pid !== first.pid);
      });
      expect(idsOf(standby).uid).toBe(0);
      process.kill(first.pid, 'SIGKILL');
      await waitFor(() => stderr().includes('group alpha restarted'), 60_000);
      const next = JSON.parse(readFileSync(path.join(ws.dir, 'fg', 'alpha.json'), 'utf8')) as { pid: number };
      expect(next.pid).not.toBe(first.pid);
      expect(isAlive(next.pid)).toBe(true);
      expect(next.pid).toBe(standby);
      expect(idsOf(next.pid)).toEqual(user);
    } finally {
      launcher.kill('SIGTERM');
      await launcher;
    }
  }, 150_000);

  test("import into a stopped group runs its temporary instance as the group's user, as start does", async () => {
    await ws.run(['stop', '--all', '--instances-dir', ws.instancesDir]);
    const dir = path.join(ws.dir, 'import-as-user');
    mkdirSync(dir);
    for (let i = 0; i < 20; i++) {
      const uuid = `0195a1c2-0000-4000-8000-${String(900 + i).padStart(12, '0')}`;
      writeFileSync(path.join(dir, `v${i}.json`), JSON.stringify({ vcon: '0.3.0', uuid, subject: `as user ${i}` }));
    }
    const r = await ws.run(['import', '--group', 'alpha', dir, '--json', '--instances-dir', ws.instancesDir]);
    expect(r.exitCode, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.outcomes.filter((o: { outcome: string }) => o.outcome === 'stored')).toHaveLength(20);
    // The uid is the server process's own report of whom it runs as (not what the launcher meant).
    const { stdout: uid } = await execa('id', ['-u', 'vcon-alpha']);
    expect(report.temporary_instance_user).toEqual({ user: 'vcon-alpha', uid: Number(uid.trim()) });
  }, 120_000);

  test("a detached group on the embedded database runs as its own user, which cannot read the superuser's password", async () => {
    const dataDir = path.join(ws.dir, 'data');
    // No DATABASE_URL anywhere: the group uses the embedded cluster under dataDir.
    ws.writeEnv('shared', { API_KEYS: KEY, LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing', VCON_DATA_DIR: dataDir });
    chmodSync(path.join(ws.envDir, 'shared.env'), 0o600);
    const instancesDir = path.join(ws.dir, 'emb-instances');
    try {
      const r = await ws.run(['start', '--group', 'beta', '--detach', '--instances-dir', instancesDir], { timeout: 120_000 });
      expect(r.exitCode, r.stderr).toBe(0);
      const beta = JSON.parse(readFileSync(path.join(instancesDir, 'beta.json'), 'utf8')) as { pid: number; url: string; api_base_path: string };
      const ids = idsOf(beta.pid);
      expect(ids.uid).not.toBe(0);
      const password = await runAs(ids, 'cat', [path.join(dataDir, 'embedded', 'credentials', 'postgres.password')]);
      expect(password.stderr).toMatch(/Permission denied/);
      // The launcher has left; the cluster stays up for the group.
      const created = await api(`${beta.url}${beta.api_base_path}`, '/vcons', {
        method: 'POST',
        json: { vcon: '0.3.0', parties: [{ name: 'embedded' }] },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    } finally {
      await ws.run(['stop', '--all', '--instances-dir', instancesDir]);
      await execa('pkill', ['-f', `-D ${path.join(dataDir, 'embedded', 'pgdata')}`], { reject: false });
    }
  }, 180_000);
});
