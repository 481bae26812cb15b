// --detach, status --json, import into a running group, stop; stale registry entries; and the
// all-or-nothing start when one group cannot come up.
import { writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { api, createWorkspace, isAlive, serverPidsForSchema, type Workspace } from './helpers.js';

const FIXTURE = {
  uuid: '0b9a5b1e-8f43-4d5b-9a55-2f2f9b1f7a01',
  vcon: '0.3.0',
  created_at: '2025-01-31T14:05:00Z',
  subject: 'detached import',
  parties: [{ name: 'Ann' }],
};

describe('vcon-launch start --detach / status / stop', () => {
  let ws: Workspace;
  let startNotes = '';
  let lastPorts: Record<string, number> = {};
  beforeAll(() => {
    ws = createWorkspace(['one', 'two']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('--detach exits 0 once both groups are healthy and leaves them running', async () => {
    // How long it takes is a bench figure (scripts/bench/density.ts), not a test budget.
    const t0 = Date.now();
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    startNotes = r.stderr;
    expect(r.stdout).toMatch(/GROUP\s+LABEL\s+SCHEMA\s+ROLE\s+URL\s+PID/);
    const reg = ws.registry();
    expect(Object.keys(reg).sort()).toEqual(['one', 'two']);
    for (const e of Object.values(reg) as any[]) {
      expect(isAlive(e.pid)).toBe(true);
      // Supervised by the directory's background supervisor (tests/launcher/supervised.test.ts).
      expect(e).toMatchObject({ mode: 'detached', supervisor_pid: expect.any(Number) });
      expect(e).toMatchObject({ env_file: path.join(ws.envDir, `${e.group}.env`), database: expect.stringContaining('127.0.0.1') });
      expect(Date.parse(e.started_at)).toBeGreaterThan(t0 - 1000);
    }
  });

  test('starting a running group again is refused', async () => {
    const r = await ws.run(['start', '--group', 'one', '--detach']);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain('group one is already running');
    expect(r.stderr).toContain('stop it first: npx vcon-launch stop --group one');
  });

  test('status --json lists both with live health; a stale entry is detected and removed', async () => {
    // A registry entry whose process is gone (pid far above pid_max-in-use is never alive here).
    mkdirSync(ws.instancesDir, { recursive: true });
    writeFileSync(
      path.join(ws.instancesDir, 'ghost.json'),
      JSON.stringify({
        group: 'ghost',
        pid: 4_000_000,
        url: 'http://127.0.0.1:1',
        port: 1,
        schema: 'ghost',
        label: null,
        env_file: 'x',
        started_at: new Date().toISOString(),
        database: 'x',
        supervisor_pid: null,
        log_file: null,
        api_base_path: '/api/v1',
      }),
    );
    const r = await ws.run(['status', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const rows = JSON.parse(r.stdout) as any[];
    expect(rows.map((x) => x.group)).toEqual(['one', 'two']);
    for (const row of rows) {
      for (const k of ['group', 'pid', 'url', 'port', 'schema', 'label', 'status', 'health']) expect(row).toHaveProperty(k);
      expect(row.status).toBe('healthy');
      expect(row.health).toMatchObject({ status: 'healthy', schema: ws.schemas[row.group], instance: `label-${row.group}` });
    }
    expect(r.stderr).toContain('stale entry of group ghost');
    expect(ws.registry().ghost).toBeUndefined();
    const table = await ws.run(['status']);
    expect(table.stdout).toMatch(/one\s+running\s+healthy/);
  });

  test('import goes through the running instance', async () => {
    const dir = path.join(ws.dir, 'in');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'a.vcon'), JSON.stringify(FIXTURE));
    writeFileSync(path.join(dir, 'notes.txt'), 'not a vcon');
    const r = await ws.run(['import', '--group', 'one', dir]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('via running instance');
    expect(r.stdout).toMatch(/stored\s+1/);
    const reg = ws.registry();
    expect((await api(`${reg.one.url}/api/v1`, `/vcons/${FIXTURE.uuid}`)).status).toBe(200);
    expect((await api(`${reg.two.url}/api/v1`, `/vcons/${FIXTURE.uuid}`)).status).toBe(404);
  });

  test('stop --group, then stop --all, stops gracefully and cleans the registry', async () => {
    const reg = ws.registry();
    lastPorts = { one: reg.one.port, two: reg.two.port };
    const one = await ws.run(['stop', '--group', 'one']);
    expect(one.exitCode, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/one: stopped \(pid \d+\)/);
    expect(isAlive(reg.one.pid)).toBe(false);
    expect(isAlive(reg.two.pid)).toBe(true);
    // The detach hint, run as printed (npx resolves the project's bin: see npx.test.ts).
    const hint = /stop with: (.*)$/m.exec(startNotes)?.[1] ?? '';
    expect(hint).toBe('npx vcon-launch stop --all');
    const all = await ws.run(hint.split(' ').slice(2));
    expect(all.stdout).toMatch(/two: stopped/);
    expect(isAlive(reg.two.pid)).toBe(false);
    expect(ws.registry()).toEqual({});
    const st = await ws.run(['status', '--json']);
    expect(JSON.parse(st.stdout)).toEqual([]);
  });

  test('start after stop brings a group back on its previous port while that port is free', async () => {
    const again = await ws.run(['start', '--group', 'one', '--detach']);
    expect(again.exitCode, again.stderr).toBe(0);
    const first = ws.registry().one;
    expect(first.port).toBe(lastPorts.one);
    expect(again.stdout).toContain(first.url);
    expect((await ws.run(['stop', '--group', 'one'])).exitCode).toBe(0);
    // Someone else took the port meanwhile: the group starts anyway, on another free port.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(first.port, '127.0.0.1', resolve));
    try {
      const moved = await ws.run(['start', '--group', 'one', '--detach']);
      expect(moved.exitCode, moved.stderr).toBe(0);
      expect(ws.registry().one.port).not.toBe(first.port);
      expect((await api(`${ws.registry().one.url}/api/v1`, '/health')).status).toBe(200);
    } finally {
      squatter.close();
      await ws.run(['stop', '--all']);
    }
  }, 120_000);

  test('when one group cannot start, --detach exits non-zero and leaves nothing running', async () => {
    // Port 1 on localhost refuses connections: the launcher cannot provision the group's role.
    ws.writeEnv('broken', { SUPABASE_DB_SCHEMA: 'l_broken_never', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' });
    const r = await ws.run(['start', '--group', 'one', '--group', 'broken', '--detach']);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/group broken: cannot reach its database postgres@127\.0\.0\.1:1\/test: .*ECONNREFUSED/);
    expect(r.stderr).not.toContain('unexpected error');
    expect(ws.registry()).toEqual({});
    expect(serverPidsForSchema(ws.schemas.one)).toEqual([]);
    expect(serverPidsForSchema('l_broken_never')).toEqual([]);
  });
});
