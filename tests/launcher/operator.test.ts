// An operator's day with detached groups: each replica's CONNS is its own, new keys apply with
// `reload` and no restart (detached and foreground supervisors alike), a group's log file is
// rotated by size without losing a line (and the group keeps logging to it when its supervisor is
// killed), and `migrate --all --status` stays narrow.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminSql } from '../helpers/db.js';
import { createWorkspace, isAlive, KEY, startForeground, waitFor, type Workspace } from './helpers.js';

const NEW_KEY = 'launcher-rotated-key';
/** VCON_LOG_MAX_SIZE of group `logs`. */
const LOG_MAX = 16 * 1024;

let ws: Workspace;

interface Row {
  group: string;
  replica: number;
  pid: number;
  url: string;
  restarts: number;
  status: string;
  health: { pool?: { connections?: number | null } };
}

const statusRows = async (): Promise<Row[]> => JSON.parse((await ws.run(['status', '--json'])).stdout) as Row[];

/** The status of GET /vcons on an instance with this key. */
const get = async (url: string, key: string, id?: string) =>
  (
    await fetch(`${url}/api/v1/vcons?limit=1`, {
      headers: { authorization: `Bearer ${key}`, ...(id ? { 'x-request-id': id } : {}) },
      signal: AbortSignal.timeout(30_000),
    })
  ).status;

beforeAll(async () => {
  ws = createWorkspace(['rep', 'logs', 'fresh', 'fg'], {
    // Connections stay open once made, so each replica's count holds still while it is compared.
    rep: { VCON_REPLICAS: '2', DB_IDLE_TIMEOUT_S: '3600' },
    logs: { LOG_LEVEL: 'info', VCON_LOG_MAX_SIZE: `${LOG_MAX / 1024}kb`, VCON_LOG_KEEP: '50' },
  });
  const r = await ws.run(['start', '--group', 'rep', '--group', 'logs', '--detach']);
  expect(r.exitCode, r.stderr).toBe(0);
}, 180_000);

afterAll(async () => {
  await ws?.cleanup();
});

describe('status with replicas', () => {
  it("shows each replica's own connections", async () => {
    const admin = adminSql();
    try {
      const held = async (replica: number) => {
        const [r] = await admin<
          { n: number }[]
        >`select count(*)::int as n from pg_stat_activity where application_name = ${`vcon-label-rep@${replica}`}`;
        return r.n;
      };
      // What each replica reports is what PostgreSQL shows under its own application_name.
      const rows = await waitFor(
        async () => {
          const reps = (await statusRows()).filter((r) => r.group === 'rep');
          const counts = await Promise.all(reps.map((r) => held(r.replica)));
          return reps.length === 2 && reps.every((r, i) => counts[i] > 0 && r.health.pool?.connections === counts[i]) ? reps : undefined;
        },
        60_000,
        200,
        "each replica's CONNS to match its own connections",
      );
      expect(rows.map((r) => r.replica)).toEqual([1, 2]);
      const table = (await ws.run(['status'])).stdout;
      for (const r of rows) expect(table).toMatch(new RegExp(`^rep@${r.replica}\\s.*\\s${r.health.pool!.connections}\\s`, 'm'));
    } finally {
      await admin.end();
    }
  });
});

describe('reload', () => {
  it('applies a new API_KEYS to every replica without a restart; other changes are named as needing one', async () => {
    const before = (await statusRows()).filter((r) => r.group === 'rep');
    for (const r of before) expect(await get(r.url, KEY)).toBe(200);
    ws.writeEnv('rep', {
      SUPABASE_DB_SCHEMA: ws.schemas.rep,
      VCON_INSTANCE_LABEL: 'label-rep',
      VCON_REPLICAS: '2',
      DB_IDLE_TIMEOUT_S: '3600',
      API_KEYS: NEW_KEY,
      LOG_LEVEL: 'error',
    });
    const r = await ws.run(['reload', '--group', 'rep']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^rep@1\s+\d+\s+API_KEYS\s+LOG_LEVEL$/m);
    expect(r.stdout).toMatch(/^rep@2\s+\d+\s+API_KEYS\s+LOG_LEVEL$/m);
    expect(r.stderr).toContain('LOG_LEVEL changed in its env file; that applies at its next start');
    for (const row of before) {
      expect(await get(row.url, KEY)).toBe(401);
      expect(await get(row.url, NEW_KEY)).toBe(200);
    }
    // The same processes, never restarted.
    const after = (await statusRows()).filter((x) => x.group === 'rep');
    expect(after.map((x) => [x.pid, x.restarts])).toEqual(before.map((x) => [x.pid, 0]));
    // Reloading again finds nothing new.
    expect((await ws.run(['reload', '--group', 'rep'])).stdout).toMatch(/^rep@1\s+\d+\s+no key changed\s+LOG_LEVEL$/m);
  });

  it('refuses an invalid file, changing nothing, and names groups that are not running', async () => {
    ws.writeEnv('rep', {
      SUPABASE_DB_SCHEMA: ws.schemas.rep,
      VCON_INSTANCE_LABEL: 'label-rep',
      VCON_REPLICAS: '2',
      API_KEYS: 'another',
      METRICS_KEY: 'short',
    });
    const r = await ws.run(['reload', '--group', 'rep', '--group', 'fresh']);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/^rep@1\s+\d+\s+failed: .*METRICS_KEY: must be at least 16 characters/m);
    expect(r.stdout).toMatch(/^fresh\s+-\s+not running/m);
    const rows = (await statusRows()).filter((x) => x.group === 'rep');
    for (const row of rows) expect(await get(row.url, NEW_KEY)).toBe(200);
    ws.writeEnv('rep', { SUPABASE_DB_SCHEMA: ws.schemas.rep, VCON_INSTANCE_LABEL: 'label-rep', VCON_REPLICAS: '2', API_KEYS: NEW_KEY });
  });

  it("reaches a foreground launcher's groups", async () => {
    const fg = startForeground(ws, ['--group', 'fg']);
    try {
      await waitFor(() => fg.stderr().includes('supervising'), 120_000, 50, 'the foreground launcher to start');
      const entry = ws.registry().fg;
      expect(await get(entry.url, KEY)).toBe(200);
      ws.writeEnv('fg', { SUPABASE_DB_SCHEMA: ws.schemas.fg, VCON_INSTANCE_LABEL: 'label-fg', API_KEYS: NEW_KEY });
      const r = await ws.run(['reload', '--group', 'fg']);
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^fg\\s+${entry.pid}\\s+API_KEYS\\s+-$`, 'm'));
      expect(await get(entry.url, KEY)).toBe(401);
      expect(await get(entry.url, NEW_KEY)).toBe(200);
      expect(ws.registry().fg.pid).toBe(entry.pid);
    } finally {
      await ws.run(['stop', '--group', 'fg']);
      await fg.launcher;
    }
    // The launcher removed its control socket on the way out.
    expect(readdirSync(ws.instancesDir).filter((f) => f.startsWith('launcher-'))).toEqual([]);
  });
});

describe('migrate --all --status', () => {
  it('prints one short line per group', async () => {
    const r = await ws.run(['migrate', '--all', '--status']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(100);
    expect(lines).toEqual([
      expect.stringMatching(/^fg {5}up to date \(\d+ migrations\)$/),
      expect.stringMatching(/^fresh {2}\d+ pending: 0001_schema, 0002_party_identifier_indexes, /),
      expect.stringMatching(/^logs {3}up to date \(\d+ migrations\)$/),
      expect.stringMatching(/^rep {4}up to date \(\d+ migrations\)$/),
    ]);
  });
});

describe('log files', () => {
  const logOf = () => path.join(ws.instancesDir, 'logs.log');
  /** The group's log lines, oldest file first, and the files they came from. */
  const readLogs = () => {
    const rotated = readdirSync(ws.instancesDir)
      .map((f) => /^logs\.log\.(\d+)$/.exec(f))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => b - a)
      .map((n) => `${logOf()}.${n}`);
    const files = [...rotated, logOf()];
    return { files, lines: files.flatMap((f) => readFileSync(f, 'utf8').split('\n').filter(Boolean)) };
  };
  const idsIn = (lines: string[], prefix: string) =>
    lines.flatMap((l) => {
      const id = (JSON.parse(l) as { req?: { id?: string } }).req?.id;
      return id?.startsWith(prefix) ? [id] : [];
    });

  it('rotates a group log by size and keeps every line, in order', async () => {
    const url = ws.registry().logs.url;
    const ids = Array.from({ length: 300 }, (_, i) => `rot-${String(i).padStart(4, '0')}`);
    for (const id of ids) expect(await get(url, KEY, id)).toBe(200);
    // Written by the supervisor as they arrive: wait for the last one.
    await waitFor(() => readLogs().lines.some((l) => l.includes(ids[ids.length - 1])), 60_000, 50, 'the last request in the log');
    const { files, lines } = readLogs();
    expect(files.length).toBeGreaterThanOrEqual(3);
    // Every line whole (JSON), every request once, in the order sent, across the files.
    expect(idsIn(lines, 'rot-')).toEqual(ids);
    // A rotated file holds what reached the size, never more than one line past it.
    for (const f of files.slice(0, -1)) expect(statSync(f).size).toBeLessThan(LOG_MAX + 2_000);
    expect(statSync(files[0]).mode & 0o777).toBe(0o600);
  });

  it('the group keeps logging to its file when its supervisor is killed', async () => {
    const supervisor = ws.registry().logs.supervisor_pid as number;
    const { pid, url } = ws.registry().logs;
    process.kill(supervisor, 'SIGKILL');
    await waitFor(() => !isAlive(supervisor), 30_000, 20, 'the supervisor to die');
    // The first lines after the pipe broke may be lost with it; later ones reach the file.
    const ids: string[] = [];
    await waitFor(
      async () => {
        const id = `after-${ids.length}`;
        ids.push(id);
        expect(await get(url, KEY, id)).toBe(200);
        return readFileSync(logOf(), 'utf8').includes(`"${id}"`);
      },
      60_000,
      100,
      'a request after the supervisor died to be logged',
    );
    expect(isAlive(pid)).toBe(true);
    expect(existsSync(logOf())).toBe(true);
  });
});
