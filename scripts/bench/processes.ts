// Child processes of the bench: real vcon-server instances and the floor server, started with an
// IPC readiness handshake, their stderr kept in a file of the run directory, stopped by pid.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/paths.js';
import { childEnvDefaults, childNodeFlags } from '../../cli/child.js';

export const SERVER_JS = path.join(packageRoot, 'dist', 'src', 'main.js');
export const CLI_JS = path.join(packageRoot, 'dist', 'cli', 'index.js');
export const FLOOR_JS = path.join(packageRoot, 'dist', 'scripts', 'bench', 'floor-server.js');

/**
 * The API key of this run's servers: measured as an operator runs them, with authentication on
 * (every request presents it; the floor server ignores it).
 */
export const BENCH_API_KEY = `bench-${randomBytes(12).toString('hex')}`;
export const benchAuth: Readonly<Record<string, string>> = Object.freeze({ authorization: `Bearer ${BENCH_API_KEY}` });

export interface Child {
  name: string;
  pid: number;
  url: string;
  logFile: string;
  stop(): Promise<void>;
}

/** Resident set size (VmRSS) of a process in MB, from /proc; NaN when it is gone. */
export function readRssMb(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU time (user + system) a process has used so far, in ms, from /proc; NaN when it is gone. */
export function readCpuMs(pid: number): number {
  return readStatCpuMs(`/proc/${pid}/stat`);
}

/** CPU time (ms) of each thread of a process so far, by tid, from /proc/<pid>/task/<tid>/stat. */
export function readThreadCpuMs(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const ms = readStatCpuMs(`/proc/${pid}/task/${tid}/stat`);
      // NaN: the thread ended between the listing and the read.
      if (!Number.isNaN(ms)) out.set(Number(tid), ms);
    }
  } catch {
    // the process is gone
  }
  return out;
}

/**
 * Where the machine's CPU goes while a server works (batch ingest is bounded by the sum of its
 * parts on a small machine, not by one slow stage): the server's main thread, its index thread (the thread running
 * at a nice value above the process's: src/index-thread.ts lowers its own priority), its other
 * threads (V8's compiler and libuv's pool), the database's backends and this bench process.
 */
export interface CpuParts {
  main: number;
  index: number;
  other: number;
  pg: number;
  client: number;
}

/** A point to measure CpuParts from. */
export interface CpuMark {
  threads: Map<number, { ms: number; nice: number }>;
  pg: Map<number, number>;
  client: number;
}

/**
 * Marks the CPU used so far by a server (`pid`), the PostgreSQL backends `pgPids` lists (none,
 * or NaN parts, when the database is not on this machine) and this process.
 */
export async function cpuMark(pid: number, pgPids: () => Promise<number[]>): Promise<CpuMark> {
  const threads = new Map<number, { ms: number; nice: number }>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const f = statFields(`/proc/${pid}/task/${tid}/stat`);
      if (f) threads.set(Number(tid), { ms: ticksMs(f), nice: Number(f[16]) });
    }
  } catch {
    // the process is gone
  }
  const pg = new Map<number, number>();
  for (const p of await pgPids()) pg.set(p, readCpuMs(p));
  const c = process.cpuUsage();
  return { threads, pg, client: (c.user + c.system) / 1000 };
}

/** CPU (ms) of each part between two marks, divided by `per`. */
export function cpuParts(from: CpuMark, to: CpuMark, pid: number, per: number): CpuParts {
  const nice = to.threads.get(pid)?.nice ?? 0;
  const parts = { main: 0, index: 0, other: 0, pg: 0, client: to.client - from.client };
  for (const [tid, t] of to.threads) {
    const d = t.ms - (from.threads.get(tid)?.ms ?? 0);
    if (tid === pid) parts.main += d;
    else if (t.nice > nice) parts.index += d;
    else parts.other += d;
  }
  // A backend that started after the first mark used all its CPU in between; one that ended before
  // a read (NaN) is left out. None readable: the database is not on this machine.
  let pg = 0;
  let read = 0;
  for (const [p, ms] of to.pg) {
    const was = from.pg.get(p) ?? 0;
    if (Number.isNaN(ms) || Number.isNaN(was)) continue;
    pg += ms - was;
    read++;
  }
  parts.pg = read === 0 ? NaN : pg;
  return { main: parts.main / per, index: parts.index / per, other: parts.other / per, pg: parts.pg / per, client: parts.client / per };
}

const statFields = (file: string): string[] | undefined => {
  try {
    const stat = readFileSync(file, 'utf8');
    // Fields after the command name (which may hold spaces), from field 3 (state) on.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
};

// utime and stime are fields 14 and 15 of stat(5); here counted from field 3 (state).
const ticksMs = (fields: string[]) => ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;

function readStatCpuMs(file: string): number {
  const fields = statFields(file);
  return fields ? ticksMs(fields) : NaN;
}

/** USER_HZ: 100 on every Linux configuration Node supports. */
const CLOCK_TICKS = 100;

async function spawnWithReady(
  name: string,
  file: string,
  env: Record<string, string>,
  opts: { logFile: string; nodeArgs?: string[]; args?: string[] },
): Promise<Child> {
  const child = execa(process.execPath, [...(opts.nodeArgs ?? []), file, ...(opts.args ?? [])], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    extendEnv: false,
    ipc: true,
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: { file: opts.logFile },
    cleanup: true,
    reject: false,
    forceKillAfterDelay: 5_000,
  });
  const exited = child.then((r) => {
    throw new Error(`${name} exited before it was ready (code ${r.exitCode ?? r.signal}); see ${opts.logFile}:\n${tail(opts.logFile)}`);
  });
  exited.catch(() => undefined);
  // A child that dies first makes getOneMessage reject too: report the exit and its log instead.
  const message = child.getOneMessage({ filter: (m) => (m as { type?: string }).type === 'ready' }).catch(() => exited);
  const ready = (await Promise.race([message, exited])) as { url: string };
  let stopping: Promise<void> | undefined;
  return {
    name,
    pid: child.pid!,
    url: ready.url,
    logFile: opts.logFile,
    stop: () =>
      (stopping ??= (async () => {
        child.kill('SIGTERM');
        await child;
      })()),
  };
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}

/**
 * Starts one real vcon-server (HTTP, port 0, API key BENCH_API_KEY) on a schema, with the V8 flags
 * and environment defaults the launcher gives every group (cli/child.ts): what an operator runs.
 */
export function startServer(opts: {
  name: string;
  databaseUrl: string;
  schema: string;
  runDir: string;
  logLevel?: string;
  nodeArgs?: string[];
  env?: Record<string, string>;
}): Promise<Child> {
  const env = childEnvDefaults({
    MCP_TRANSPORT: 'http',
    MCP_HTTP_PORT: '0',
    DATABASE_URL: opts.databaseUrl,
    SUPABASE_DB_SCHEMA: opts.schema,
    API_KEYS: BENCH_API_KEY,
    LOG_LEVEL: opts.logLevel ?? 'info',
    NODE_ENV: 'production',
    VCON_INSTANCE_LABEL: opts.name,
    ...opts.env,
  });
  return spawnWithReady(opts.name, SERVER_JS, env, {
    logFile: path.join(opts.runDir, `${opts.name}.log`),
    nodeArgs: [...childNodeFlags(env), ...(opts.nodeArgs ?? [])],
  });
}

/** Starts the floor server: node:http + postgres.js over the floor table and the main schema. */
export function startFloorServer(opts: { name: string; databaseUrl: string; searchPath: string; runDir: string }): Promise<Child> {
  return spawnWithReady(
    opts.name,
    FLOOR_JS,
    { DATABASE_URL: opts.databaseUrl, FLOOR_SEARCH_PATH: opts.searchPath },
    { logFile: path.join(opts.runDir, `${opts.name}.log`) },
  );
}
