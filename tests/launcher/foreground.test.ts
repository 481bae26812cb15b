// Two groups under the foreground supervisor, on one database with port 0: isolation, a crash
// restarted within 2 s while the other group keeps answering, and a graceful stop on SIGTERM.
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { api, CLI, cliEnv, createWorkspace, isAlive, sleep, startForeground, waitFor, type Workspace } from './helpers.js';

/** Direct children of a process (Linux /proc). */
function childPidsOf(ppid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return (
          Number(
            readFileSync(`/proc/${d}/stat`, 'utf8')
              .replace(/^.*\) /, '')
              .split(' ')[1],
          ) === ppid
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('vcon-launch start (foreground)', () => {
  let ws: Workspace;
  let launcher: ResultPromise<{ reject: false; buffer: true; all: false }>;
  let stdout = '';
  let stderr = '';

  beforeAll(async () => {
    ws = createWorkspace(['alpha', 'beta']);
    launcher = execa(process.execPath, [CLI, 'start', '--group', 'alpha', '--group', 'beta'], {
      cwd: ws.dir,
      env: cliEnv(),
      extendEnv: false,
      reject: false,
      buffer: true,
    }) as typeof launcher;
    launcher.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    await waitFor(() => stdout.includes('alpha') && stdout.includes('beta'), 60_000).catch(() => {
      throw new Error(`launcher did not print its table:\n${stdout}\n${stderr}`);
    });
  });

  afterAll(async () => {
    if (launcher.exitCode === null) launcher.kill('SIGKILL');
    await ws?.cleanup();
  });

  test('prints a table with both groups, each healthy on its own port, schema and label', async () => {
    expect(stdout).toMatch(/GROUP\s+LABEL\s+SCHEMA\s+ROLE\s+URL\s+PID/);
    const reg = ws.registry();
    expect(Object.keys(reg).sort()).toEqual(['alpha', 'beta']);
    expect(reg.alpha.port).not.toBe(reg.beta.port);
    for (const g of ['alpha', 'beta']) {
      expect(stdout).toContain(reg[g].url);
      const h = await api(`${reg[g].url}/api/v1`, '/health');
      expect(h.status).toBe(200);
      expect(h.body).toMatchObject({ schema: ws.schemas[g], instance: `label-${g}`, database: 'connected' });
      expect(reg[g]).toMatchObject({ schema: ws.schemas[g], label: `label-${g}`, supervisor_pid: launcher.pid });
      expect(reg[g].database).not.toMatch(/:[^@/]*@/); // no password
    }
    // Children's log lines come through prefixed with their group.
    expect(stderr).toMatch(/^alpha \| \{/m);
  });

  test('a vCon written through one group is invisible through the other', async () => {
    const reg = ws.registry();
    const uuid = randomUUID();
    const created = await api(`${reg.alpha.url}/api/v1`, '/vcons', {
      method: 'POST',
      json: { uuid, vcon: '0.3.0', created_at: new Date().toISOString(), subject: 'only alpha', parties: [] },
    });
    expect(created.status).toBe(201);
    expect((await api(`${reg.alpha.url}/api/v1`, `/vcons/${uuid}`)).status).toBe(200);
    expect((await api(`${reg.beta.url}/api/v1`, `/vcons/${uuid}`)).status).toBe(404);
  });

  test('status --json reports both groups with their live /health', async () => {
    const r = await ws.run(['status', '--json']);
    expect(r.exitCode).toBe(0);
    const rows = JSON.parse(r.stdout) as any[];
    expect(rows.map((x) => x.group)).toEqual(['alpha', 'beta']);
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'healthy', schema: ws.schemas[row.group], label: `label-${row.group}` });
      expect(row.health).toMatchObject({ schema: ws.schemas[row.group], instance: `label-${row.group}` });
      expect(typeof row.pid).toBe('number');
      expect(typeof row.port).toBe('number');
      expect(row.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    }
  });

  test('a SIGKILLed child is restarted while the other group keeps answering', async () => {
    const before = ws.registry();
    const betaApi = `${before.beta.url}/api/v1`;
    let betaFailures = 0;
    let probing = true;
    const probe = (async () => {
      while (probing) {
        const h = await api(betaApi, '/health').catch(() => ({ status: 0 }));
        if (h.status !== 200) betaFailures++;
        await sleep(50); // the probes' pace while alpha restarts, not a wait for anything
      }
    })();
    // How fast the restart is belongs to tests/hardening/launcher-crash.test.ts (under load, < 2 s).
    process.kill(before.alpha.pid, 'SIGKILL');
    const after = await waitFor(
      async () => {
        const e = ws.registry().alpha;
        if (!e || e.pid === before.alpha.pid) return undefined;
        const h = await api(`${e.url}/api/v1`, '/health').catch(() => ({ status: 0 }));
        return h.status === 200 ? e : undefined;
      },
      60_000,
      20,
    );
    probing = false;
    await probe;
    expect(after.pid).not.toBe(before.alpha.pid);
    // Same URL as before the crash: clients configured with it keep working.
    expect(after.port).toBe(before.alpha.port);
    expect(after.url).toBe(before.alpha.url);
    expect(isAlive(before.beta.pid)).toBe(true);
    expect(betaFailures).toBe(0);
    expect(stderr).toMatch(/group alpha crashed: pid \d+ was killed by SIGKILL; restarting/);
  });

  test('SIGTERM stops every child gracefully and cleans the registry', async () => {
    const pids = Object.values(ws.registry()).map((e: any) => e.pid as number);
    expect(pids).toHaveLength(2);
    // The children plus the warm standby the supervisor keeps for the next crash.
    const children = childPidsOf(launcher.pid!);
    expect(children).toEqual(expect.arrayContaining(pids));
    expect(children.length).toBe(3);
    launcher.kill('SIGTERM');
    const r = await launcher;
    expect(r.exitCode).toBe(0);
    for (const pid of children) expect(isAlive(pid)).toBe(false);
    expect(ws.registry()).toEqual({});
    expect(stderr).toContain('all groups stopped');
  });
});

describe('a foreground supervisor whose groups are stopped from elsewhere', () => {
  let ws: Workspace;
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('exits once `vcon-launch stop` has stopped its only group, standby included', async () => {
    ws = createWorkspace(['solo']);
    const { launcher, stderr } = startForeground(ws, ['--group', 'solo']);
    try {
      await waitFor(() => stderr().includes('supervising'), 90_000);
      const entry = ws.registry().solo;
      // The group's child and the warm standby.
      const children = await waitFor(() => {
        const pids = childPidsOf(launcher.pid!);
        return pids.length === 2 ? pids : undefined;
      });
      expect(children).toContain(entry.pid);
      const stop = await ws.run(['stop', '--group', 'solo']);
      expect(stop.stdout).toMatch(/solo: stopped/);
      const r = await launcher;
      expect(r.exitCode).toBe(0);
      expect(stderr()).toContain('group solo stopped');
      expect(stderr()).toContain('all groups stopped');
      for (const pid of children) expect(isAlive(pid)).toBe(false);
    } finally {
      if (launcher.exitCode === null) launcher.kill('SIGKILL');
    }
  }, 150_000);
});
