// One group's vcon-server process: spawn, readiness handshake (IPC, then /health), stop.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { heapLimitMiB, memoryLimitOf, RELOADABLE_VARIABLES, SECRET_VARIABLES } from '../src/config.js';
import type { KeysReloaded } from '../src/main.js';
import { packageRoot } from '../src/paths.js';
import { isAlive } from '../src/process.js';
import { UserError } from './errors.js';
import type { GroupSpec } from './groups.js';
import type { RunAs } from './os-users.js';
import { openLogFile, type LogFile, type LogRotation } from './log-files.js';

/** The compiled server entry point every child runs. */
export function serverEntry(): string {
  const entry = path.join(packageRoot, 'dist', 'src', 'main.js');
  if (!existsSync(entry)) throw new UserError(`${entry} is missing: build the project first (npm run build)`);
  return entry;
}

export interface ReadyMessage {
  type: 'ready';
  pid: number;
  port: number;
  url: string;
  schema: string;
  label: string | null;
  /** The uid the server runs as, as it reports it (null where the platform has none). */
  uid: number | null;
}

export interface ExitInfo {
  code: number | undefined;
  signal: string | undefined;
}

export interface Child {
  group: string;
  pid: number;
  url: string;
  port: number;
  schema: string;
  label: string | null;
  /** The uid the server reported running as (null where the platform has none). */
  uid: number | null;
  /** REST base URL (url + base path). */
  api: string;
  /** Settles when the process exits. */
  exited: Promise<ExitInfo>;
  /** Sends SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<ExitInfo>;
  /**
   * Hands the process new keys over IPC (the reloadable variables of `env`, nothing else) and
   * resolves with its answer; rejects when it cannot be asked or does not answer in time.
   */
  reload(env: Record<string, string>): Promise<KeysReloaded>;
  /** Detached mode: the supervisor's lifetime no longer waits for the process (the IPC channel stays, for reloads). */
  release(): void;
}

/** How long a process gets to answer a reload. */
const RELOAD_TIMEOUT_MS = 30_000;

export interface SpawnOptions {
  /** The complete environment of the child (no inheritance beyond this). */
  env: Record<string, string>;
  detached?: boolean;
  /** Detached children's output is written here (appended, through their supervisor). */
  logFile?: string;
  /** When `logFile` is rotated (default: never). */
  logRotation?: LogRotation;
  /** Foreground children: every output line, for prefixing. */
  onLine?: (line: string) => void;
  timeoutMs?: number;
  /**
   * Run as this OS user; the secrets of `env` then reach the process over IPC after it started,
   * never through its environment (which /proc/<pid>/environ shows).
   */
  runAs?: RunAs;
}

/** The environment without keys and passwords: what a process started as a group's user is given. */
const publicEnv = (env: Record<string, string>) => Object.fromEntries(Object.entries(env).filter(([k]) => !SECRET_VARIABLES.has(k)));

/** `${api}/health` → status and body; never throws. */
export async function fetchHealth(api: string, timeoutMs = 2_000): Promise<{ status: number; body: unknown }> {
  try {
    const res = await fetch(`${api}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body };
  } catch (err) {
    return { status: 0, body: { error: (err as Error).message } };
  }
}

const describeExit = (e: ExitInfo) => (e.signal ? `killed by ${e.signal}` : `exited with code ${e.code}`);

/** Waits for a pid to disappear; SIGKILL after graceMs. Works for processes we did not spawn. */
export async function stopPid(pid: number, graceMs: number): Promise<'stopped' | 'killed' | 'gone'> {
  if (!isAlive(pid)) return 'gone';
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return 'gone';
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return 'stopped';
    await sleep(50);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return 'stopped';
  }
  for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(20);
  return 'killed';
}

/**
 * V8 flags of every child. A 2 MB young-generation semi-space instead of V8's 16 MB keeps an
 * idle group ~8 MB smaller (fifty groups: 400 MB) for more frequent minor GCs; an operator's
 * NODE_OPTIONS setting it wins. Single-threaded GC: with so small a young generation, handing each
 * scavenge and marking to V8's helper threads cost more CPU than it saved (POST /vcons: ~100 µs
 * per create in the bench), and the index thread's GC then runs on that thread, at its lower
 * priority. (Node refuses it in NODE_OPTIONS, so there is nothing of the operator's to defer to.)
 */
export const childNodeFlags = (env: Record<string, string>) => [
  ...(/max-semi-space-size/.test(env.NODE_OPTIONS ?? '') ? [] : ['--max-semi-space-size=2']),
  '--single-threaded-gc',
  ...heapFlag(env),
];

/**
 * The heap ceiling of a child, from its VCON_MEMORY_LIMIT (the memory limit `export` declares for
 * the same group): past it the process fails and the supervisor restarts it, instead of growing
 * over its share of the host. An operator's --max-old-space-size in NODE_OPTIONS wins.
 */
const heapFlag = (env: Record<string, string>) =>
  /max-old-space-size/.test(env.NODE_OPTIONS ?? '') ? [] : [`--max-old-space-size=${heapLimitMiB(memoryLimitOf(env))}`];

/**
 * Environment every child gets unless the operator set it: glibc's malloc makes an arena per
 * thread that allocates (main, index thread, libuv pool), and each keeps freed pages; two arenas
 * keep a busy group's RSS down.
 */
export const childEnvDefaults = (env: Record<string, string>): Record<string, string> => ({ MALLOC_ARENA_MAX: '2', ...env });

/** The descriptor a detached child finds its log file on (VCON_LOG_FALLBACK_FD), after stdin, stdout and stderr. */
const LOG_FALLBACK_FD = 3;

const spawnServer = (
  args: string[],
  env: Record<string, string>,
  detached: boolean,
  output: 'pipe' | 'ignore',
  logFd: number | undefined,
  runAs: RunAs | undefined,
) =>
  execa(process.execPath, [...childNodeFlags(env), serverEntry(), ...args], {
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    env: childEnvDefaults(env),
    extendEnv: false,
    ipc: true,
    // execa's types want one literal per entry; the runtime takes a file descriptor as an extra one.
    stdio: ['ignore', output, output, ...(logFd === undefined ? [] : [logFd])] as ['ignore', 'pipe', 'pipe'],
    detached,
    // A foreground child dies with the launcher even if the launcher is SIGKILLed mid-start.
    cleanup: !detached,
    buffer: false,
    reject: false,
  });

interface Proc {
  subprocess: ReturnType<typeof spawnServer>;
  exited: Promise<ExitInfo>;
  /** The last output lines, for error messages. */
  tail: string[];
  onLine: ((line: string) => void) | undefined;
}

/**
 * Spawns a server. A detached child's output comes through pipes to this process, which appends
 * whole lines to its log file (and rotates it); the child also gets the file's descriptor, and
 * writes there itself if this process goes away (VCON_LOG_FALLBACK_FD).
 */
function launch(
  args: string[],
  env: Record<string, string>,
  opts: { detached?: boolean; logFile?: string; logRotation?: LogRotation; runAs?: RunAs },
): Proc {
  let log: LogFile | undefined;
  if (opts.detached && opts.logFile) {
    mkdirSync(path.dirname(opts.logFile), { recursive: true });
    // The launcher's file, written through the descriptor: other groups' users cannot read it.
    log = openLogFile(opts.logFile, opts.logRotation ?? { maxBytes: 0, keep: 1 });
  }
  const output = opts.detached && !log ? 'ignore' : 'pipe';
  const subprocess = spawnServer(args, env, Boolean(opts.detached), output, log?.fd, opts.runAs);
  const proc: Proc = {
    subprocess,
    exited: subprocess.then(
      (r) => ({ code: r.exitCode, signal: r.signal }),
      () => ({ code: undefined, signal: undefined }),
    ),
    tail: [],
    onLine: undefined,
  };
  let open = 0;
  for (const stream of [subprocess.stdout, subprocess.stderr]) {
    if (!stream) continue;
    open++;
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    lines.on('line', (line) => {
      proc.tail.push(line);
      if (proc.tail.length > 20) proc.tail.shift();
      log?.write(`${line}\n`);
      proc.onLine?.(line);
    });
    // The file is closed once both pipes have ended (the process is gone, its last lines written).
    lines.once('close', () => {
      if (--open === 0) log?.close();
    });
  }
  if (open === 0) log?.close();
  return proc;
}

/** Waits for the ready message and a 200 from /health; kills the process on failure. */
async function awaitReady(spec: GroupSpec, proc: Proc, opts: { logFile?: string; timeoutMs?: number }): Promise<Child> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const { subprocess, exited } = proc;
  const failWith = async (reason: string): Promise<never> => {
    subprocess.kill('SIGKILL');
    await exited;
    let lines = proc.tail;
    if (opts.logFile && existsSync(opts.logFile)) lines = readFileSync(opts.logFile, 'utf8').trimEnd().split('\n').slice(-20);
    const last = lines.filter((l) => l.includes('start failed') || l.includes('Invalid configuration') || l.startsWith('  - ')).slice(-6);
    throw new UserError(`group ${spec.name}: ${reason}${last.length ? `\n    ${last.join('\n    ')}` : ''}`);
  };
  const pid = subprocess.pid;
  if (pid === undefined) return failWith('could not spawn the server process');

  const deadline = Date.now() + timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
  const ready = await Promise.race([
    subprocess.getOneMessage({ filter: (m: unknown) => (m as ReadyMessage | undefined)?.type === 'ready' }).then(
      (m: unknown) => m as ReadyMessage,
      () => 'exited' as const,
    ),
    exited.then((e) => e),
    timeout,
  ]);
  clearTimeout(timer);
  if (ready === 'timeout') return failWith(`no ready message within ${timeoutMs / 1000} s`);
  if (ready === 'exited' || !('type' in ready)) {
    const e = await exited;
    return failWith(`the server ${describeExit(e)} before it was ready`);
  }
  const api = `${ready.url}${spec.config.rest.basePath}`;
  if (spec.config.rest.enabled) {
    for (;;) {
      const h = await fetchHealth(api);
      if (h.status === 200) break;
      if (!isAlive(pid)) return failWith(`the server ${describeExit(await exited)} before /health answered`);
      if (Date.now() > deadline) return failWith(`/health did not answer 200 within ${timeoutMs / 1000} s (last: ${h.status || 'no answer'})`);
      await sleep(100);
    }
  }
  return {
    group: spec.name,
    pid,
    url: ready.url,
    port: ready.port,
    schema: ready.schema,
    label: ready.label,
    uid: ready.uid ?? null,
    api,
    exited,
    async stop(graceMs = spec.config.shutdownTimeoutMs + 5_000) {
      await stopPid(pid, graceMs);
      return exited;
    },
    async reload(env) {
      if (!subprocess.connected) throw new Error('no IPC channel to the process (started by another launcher?)');
      const keys = Object.fromEntries(RELOADABLE_VARIABLES.flatMap((k) => (env[k] === undefined ? [] : [[k, env[k]]])));
      let timer: NodeJS.Timeout | undefined;
      const answer = subprocess.getOneMessage({ filter: (m: unknown) => (m as { type?: string } | undefined)?.type === 'reloaded' });
      await subprocess.sendMessage({ type: 'reload', env: keys });
      const m = (await Promise.race([
        answer,
        new Promise(
          (_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${RELOAD_TIMEOUT_MS / 1000} s`)), RELOAD_TIMEOUT_MS)),
        ),
      ]).finally(() => clearTimeout(timer))) as ({ ok: true } & KeysReloaded) | { ok: false; error: string };
      if (!m.ok) throw new Error(m.error);
      return { keys: m.keys, readOnlyKeys: m.readOnlyKeys, metricsKey: m.metricsKey, sessionsClosed: m.sessionsClosed };
    },
    release() {
      // The channel stays open for reloads; a detached process outlives its supervisor all the same.
      subprocess.unref();
    },
  };
}

/**
 * Spawns `vcon-server` for one group and resolves once it has reported its port over IPC and its
 * /health answers 200. On failure the child is killed and the error names the group and the reason.
 */
export async function spawnChild(spec: GroupSpec, spawnOpts: SpawnOptions): Promise<Child> {
  // A detached child learns where its log file's descriptor is (it has it from launch()).
  const opts =
    spawnOpts.detached && spawnOpts.logFile ? { ...spawnOpts, env: { ...spawnOpts.env, VCON_LOG_FALLBACK_FD: String(LOG_FALLBACK_FD) } } : spawnOpts;
  if (!opts.runAs) {
    const proc = launch([], opts.env, opts);
    proc.onLine = opts.onLine;
    return awaitReady(spec, proc, opts);
  }
  // As the group's user: started as a standby with the public variables, the rest sent over IPC.
  const proc = launch(['--standby'], publicEnv(opts.env), opts);
  proc.onLine = opts.onLine;
  // A process that died before it could take the message is reported by awaitReady, with its output.
  await proc.subprocess.sendMessage({ type: 'start', env: opts.env }).catch(() => undefined);
  return awaitReady(spec, proc, opts);
}

/** A server process with its modules loaded, waiting to become some group's instance. */
export interface Standby {
  /** Turns the standby into the group's instance (or spawns afresh if the standby died). */
  activate(spec: GroupSpec, opts: SpawnOptions): Promise<Child>;
  dispose(): Promise<void>;
}

/**
 * Starts a standby (`vcon-server --standby`): it pays the module-loading cost of a cold start
 * ahead of time, so the supervisor brings a crashed group back in a fraction of it.
 */
export function spawnStandby(baseEnv: Record<string, string>): Standby {
  const proc = launch(['--standby'], baseEnv, {});
  let used = false;
  return {
    async activate(spec, opts) {
      // The standby's heap flag was chosen before its group was known: another ceiling spawns afresh.
      const sameHeap = heapFlag(opts.env).join() === heapFlag(baseEnv).join();
      if (used || proc.subprocess.exitCode !== null || !proc.subprocess.connected || !sameHeap) return spawnChild(spec, opts);
      used = true;
      proc.onLine = opts.onLine;
      // A standby runs as the launcher's user: it switches to the group's before reading the env.
      const runAs = opts.runAs ? { uid: opts.runAs.uid, gid: opts.runAs.gid } : undefined;
      await proc.subprocess.sendMessage({ type: 'start', env: opts.env, runAs });
      return awaitReady(spec, proc, opts);
    },
    async dispose() {
      if (used) return;
      used = true;
      proc.subprocess.kill('SIGKILL');
      await proc.exited;
    },
  };
}
