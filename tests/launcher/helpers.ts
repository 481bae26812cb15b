// Launcher tests drive the compiled CLI (dist/cli/index.js) as a real process, in a throwaway
// working directory with its own env/ and instances/, against the test database.
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type Options } from 'execa';
import { packageRoot } from '../../src/paths.js';
import { databaseOfUrl, dropGroupRoles, groupRoleNames, type GroupRoleNames } from '../../src/db/roles.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';

export const CLI = path.join(packageRoot, 'dist', 'cli', 'index.js');
export const KEY = 'launcher-test-key';

/** The CLI's environment: no server variables, no DATABASE_URL; the env files decide. */
export const cliEnv = (): Record<string, string> => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir() });

export interface Workspace {
  dir: string;
  envDir: string;
  instancesDir: string;
  /** Schema of each group, unique per test. */
  schemas: Record<string, string>;
  writeEnv(name: string, lines: Record<string, string>): void;
  run(args: string[], opts?: Options): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }>;
  registry(): Record<string, any>;
  cleanup(): Promise<void>;
}

/**
 * A working directory with env/<group>.env for each group (on the test database, port 0, one
 * unique schema each, one API key), plus env/shared.env.
 */
export function createWorkspace(groups: string[], extra: Record<string, Record<string, string>> = {}): Workspace {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-launch-'));
  const envDir = path.join(dir, 'env');
  const instancesDir = path.join(dir, 'instances');
  mkdirSync(envDir);
  const schemas: Record<string, string> = {};
  const writeEnv = (name: string, lines: Record<string, string>) =>
    writeFileSync(
      path.join(envDir, `${name}.env`),
      Object.entries(lines)
        .map(([k, v]) => `${k}=${v}`)
        .join('\n') + '\n',
    );
  // A request may wait a minute for a pool turn, not 5 s, as in tests/helpers/server.ts: a burst of
  // test requests on a loaded machine would otherwise meet database_busy.
  writeEnv('shared', { DATABASE_URL: databaseUrl(), API_KEYS: KEY, LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing', DB_QUEUE_TIMEOUT_MS: '60000' });
  for (const g of groups) {
    schemas[g] = testSchemaName(`l_${g}`);
    writeEnv(g, { SUPABASE_DB_SCHEMA: schemas[g], VCON_INSTANCE_LABEL: `label-${g}`, ...extra[g] });
  }
  const ws: Workspace = {
    dir,
    envDir,
    instancesDir,
    schemas,
    writeEnv,
    async run(args, opts = {}) {
      const r = await execa(process.execPath, [CLI, ...args], {
        cwd: dir,
        env: cliEnv(),
        extendEnv: false,
        reject: false,
        timeout: 120_000,
        ...opts,
      });
      return { exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr) };
    },
    registry() {
      const out: Record<string, any> = {};
      let files: string[] = [];
      try {
        files = readdirSync(instancesDir).filter((f) => f.endsWith('.json'));
      } catch {
        /* none yet */
      }
      for (const f of files) {
        try {
          out[f.slice(0, -5)] = JSON.parse(readFileSync(path.join(instancesDir, f), 'utf8'));
        } catch {
          /* being rewritten */
        }
      }
      return out;
    },
    async cleanup() {
      // The detached groups' supervisor first, so that it restarts nothing killed below.
      try {
        const pid = Number(readFileSync(path.join(instancesDir, 'supervisor.pid'), 'utf8'));
        // Only this workspace's supervisor: a stale file may name a pid reused since.
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(instancesDir)) process.kill(pid, 'SIGKILL');
      } catch {
        /* none, or gone */
      }
      for (const e of Object.values(ws.registry())) {
        try {
          process.kill(e.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      // start/migrate made a role per group (cluster-wide): drop them with the schemas.
      await dropProvisioned(Object.values(schemas));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return ws;
}

/** A foreground `vcon-launch start` in the workspace, and what it has written to stderr so far. */
export function startForeground(ws: Pick<Workspace, 'dir'>, args: string[]) {
  const launcher = execa(process.execPath, [CLI, 'start', ...args], { cwd: ws.dir, env: cliEnv(), extendEnv: false, reject: false, buffer: false });
  let stderr = '';
  launcher.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return { launcher, stderr: () => stderr };
}

/** pids of running vcon-server processes whose environment names this schema (Linux /proc). */
export function serverPidsForSchema(schema: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!cmd.includes('main.js')) continue;
      const env = readFileSync(`/proc/${d}/environ`, 'utf8').split('\0');
      if (env.includes(`SUPABASE_DB_SCHEMA=${schema}`)) pids.push(Number(d));
    } catch {
      /* exited meanwhile */
    }
  }
  return pids;
}

export { isAlive } from '../../src/process.js';
export { sleep };

export { waitFor } from '../helpers/poll.js';

/** JSON fetch against a group's REST base with the test key. */
export async function api(base: string, p: string, init: RequestInit & { json?: unknown } = {}) {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${KEY}`);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers.set('content-type', 'application/json');
  }
  const res = await fetch(`${base}${p}`, { ...init, headers, body, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Drops the given schemas and the roles the launcher or `provision` made for them (test teardown). */
export async function dropProvisioned(schemas: string[]): Promise<void> {
  const admin = adminSql();
  try {
    for (const s of schemas) {
      await admin.unsafe(`drop schema if exists "${s}" cascade`);
      await dropGroupRoles(admin, s);
    }
  } finally {
    await admin.end();
  }
}

/** The roles the launcher gives a group with this schema on the test database. */
export const roleNamesOf = (schema: string): GroupRoleNames => groupRoleNames(databaseOfUrl(databaseUrl()), schema);
