// Detached groups are supervised: `start --detach` leaves one supervisor per instances directory
// that outlives the launcher, restarts a killed child on its URL, records the crash for `status`,
// gives up on a child that crashes at every start (listed as crashed), and leaves with its last group.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminSql } from '../helpers/db.js';
import { api, CLI, cliEnv, createWorkspace, isAlive, roleNamesOf, waitFor, type Workspace } from './helpers.js';

const statusRows = async (ws: Workspace) => {
  const r = await ws.run(['status', '--json']);
  return JSON.parse(r.stdout) as any[];
};

describe('start --detach leaves a supervisor behind', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['one', 'two']);
  });
  afterAll(async () => {
    const pid = ws?.registry().one?.supervisor_pid;
    await ws?.run(['stop', '--all']);
    if (pid && isAlive(pid)) process.kill(pid, 'SIGKILL');
    await ws?.cleanup();
  });

  test('a SIGKILLed detached child comes back on the same URL and status shows one restart', async () => {
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    const before = ws.registry();
    // The launcher has exited; one supervisor, still running, supervises both groups.
    expect(before.one.mode).toBe('detached');
    expect(before.one.supervisor_pid).toBe(before.two.supervisor_pid);
    expect(isAlive(before.one.supervisor_pid)).toBe(true);
    let rows = await statusRows(ws);
    expect(rows.map((x) => [x.group, x.state, x.restarts, x.last_exit])).toEqual([
      ['one', 'running', 0, null],
      ['two', 'running', 0, null],
    ]);
    expect(typeof rows[0].uptime_s).toBe('number');

    process.kill(before.one.pid, 'SIGKILL');
    const after = await waitFor(async () => {
      const e = ws.registry().one;
      if (!e || e.pid === before.one.pid || e.state !== 'running') return undefined;
      const h = await api(`${e.url}/api/v1`, '/health').catch(() => ({ status: 0 }));
      return h.status === 200 ? e : undefined;
    });
    expect(after.url).toBe(before.one.url);
    expect(isAlive(before.two.pid)).toBe(true);
    rows = await statusRows(ws);
    const one = rows.find((x) => x.group === 'one');
    expect(one).toMatchObject({ state: 'running', status: 'healthy', restarts: 1, pid: after.pid, url: before.one.url });
    expect(one.last_exit).toMatchObject({ signal: 'SIGKILL', code: null });
    expect(rows.find((x) => x.group === 'two')).toMatchObject({ state: 'running', restarts: 0, last_exit: null });
    const table = await ws.run(['status']);
    expect(table.stdout).toMatch(/GROUP\s+STATE\s+STATUS\s+UPTIME\s+RESTARTS\s+LAST EXIT/);
    expect(table.stdout).toMatch(/^one\s+running\s+healthy\s+\S+\s+1\s+SIGKILL/m);
  });

  test('status --watch redraws a live table until interrupted', async () => {
    const watcher = execa(process.execPath, [CLI, 'status', '--watch', '0.2'], {
      cwd: ws.dir,
      env: cliEnv(),
      extendEnv: false,
      reject: false,
      buffer: false,
    });
    let out = '';
    watcher.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      // Redrawn, and showing both healthy: a redraw may show a /health that a loaded machine
      // answered past the probe's 2 s, and the next one the answer.
      await waitFor(
        () =>
          (out.match(/^GROUP\s+STATE/gm) ?? []).length >= 2 &&
          /^one\s+running\s+healthy\s+\S+\s+1\s+/m.test(out) &&
          /^two\s+running\s+healthy/m.test(out),
      );
    } finally {
      watcher.kill('SIGINT');
    }
    const r = await watcher;
    expect(r.exitCode).toBe(0);
    expect(out).toMatch(/^GROUP\s+STATE\s+STATUS\s+UPTIME\s+RESTARTS\s+REQ\/S\s+P95\s+POOL\s+INDEX LAG\s+MCP$/m);
    expect(out).toMatch(/^one\s+running\s+healthy\s+\S+\s+1\s+/m);
    expect(out).toMatch(/^two\s+running\s+healthy/m);
  });

  test('`start --all` starts what is not running and leaves the running groups alone', async () => {
    const before = ws.registry();
    expect((await ws.run(['stop', '--group', 'two'])).exitCode).toBe(0);
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain('group one is already running');
    const after = ws.registry();
    expect(after.one.pid).toBe(before.one.pid);
    expect(isAlive(after.two.pid)).toBe(true);
    // Still one supervisor for the directory.
    expect(after.two.supervisor_pid).toBe(before.one.supervisor_pid);
    const again = await ws.run(['start', '--all', '--detach']);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stderr).toContain('every group is already running');
  });

  test('a closed pipe ends any command quietly', async () => {
    for (const cmd of [`status --json | head -c 100`, `status --json | true`, `--help | true`]) {
      const [args, reader] = cmd.split(' | ');
      const r = await execa('sh', ['-c', `"${process.execPath}" "${CLI}" ${args} | ${reader}`], {
        cwd: ws.dir,
        env: cliEnv(),
        extendEnv: false,
        reject: false,
      });
      expect(r.stderr, cmd).not.toMatch(/EPIPE|Error|at /);
    }
  });

  test('stop --all stops the groups without a restart, and the supervisor leaves with the last one', async () => {
    const reg = ws.registry();
    const supervisor = reg.one.supervisor_pid;
    const r = await ws.run(['stop', '--all']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/one: stopped/);
    expect(r.stdout).toMatch(/two: stopped/);
    for (const e of Object.values(reg) as any[]) expect(isAlive(e.pid)).toBe(false);
    await waitFor(() => !isAlive(supervisor));
    expect(ws.registry()).toEqual({});
    expect(existsSync(path.join(ws.instancesDir, 'supervisor.sock'))).toBe(false);
  });
});

describe('a detached group that crashes at every start', () => {
  let ws: Workspace;
  let role = '';
  beforeAll(() => {
    ws = createWorkspace(['flaky']);
    role = roleNamesOf(ws.schemas.flaky).role;
  });
  afterAll(async () => {
    const admin = adminSql();
    await admin.unsafe(`alter role "${role}" login`).catch(() => undefined);
    await admin.end();
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('is listed as crashed once its backoff gives up, until stopped', async () => {
    const env = { ...cliEnv(), VCON_LAUNCH_MAX_RESTARTS: '2' };
    const r = await ws.run(['start', '--group', 'flaky', '--detach'], { env });
    expect(r.exitCode, r.stderr).toBe(0);
    const first = ws.registry().flaky;
    // The database now refuses the group's role: every restart fails.
    const admin = adminSql();
    try {
      await admin.unsafe(`alter role "${role}" nologin`);
    } finally {
      await admin.end();
    }
    process.kill(first.pid, 'SIGKILL');
    const crashed = await waitFor(async () => (await statusRows(ws)).find((x) => x.state === 'crashed'), 120_000, 200);
    expect(crashed).toMatchObject({ group: 'flaky', state: 'crashed', restarts: 2, uptime_s: null, url: first.url });
    expect(crashed.last_exit).not.toBeNull();
    // The supervisor had nothing else to do: it left; the crashed group stays listed.
    await waitFor(() => !isAlive(first.supervisor_pid));
    const st = await ws.run(['status']);
    expect(st.exitCode).not.toBe(0);
    expect(st.stdout).toMatch(/^flaky\s+crashed\s+unreachable/m);
    expect(st.stderr).not.toContain('stale');
    const stop = await ws.run(['stop', '--group', 'flaky']);
    expect(stop.stdout).toContain('flaky: crashed; removed from the list');
    expect(await statusRows(ws)).toEqual([]);
  }, 180_000);
});
