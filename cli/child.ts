// One group's vcon-server process: spawn, readiness handshake (IPC, then /health), stop.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { heapLimitMiB, memoryLimitOf, SECRET_VARIABLES } from '../src/config.js';
import { packageRoot } from '../src/paths.js';
import { isAlive } from '../src/process.js';
import { UserError } from './errors.js';
import type { GroupSpec } from './groups.js';
import type { RunAs } from './os-users.js';

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
  /** REST base URL (url + base path). */
  api: string;
  /** Settles when the process exits. */
  exited: Promise<ExitInfo>;
  /** Sends SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<ExitInfo>;
  /** Detached mode: drop the IPC channel and references so the launcher can exit. */
  release(): void;
}

export interface SpawnOptions {
  /** The complete environment of the child (no inheritance beyond this). */
  env: Record<string, string>;
  detached?: boolean;
  /** Detached children write their output here (appended). */
  logFile?: string;
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
 * priority. A heap growing factor of 2: V8 sizes the next full collection from the heap's
 * ceiling, and under a ceiling this small (heapFlag below, and the index thread's resourceLimits)
 * it takes the factor of a low-memory device, ~1.3 instead of up to 4, so a busy group marked its
 * whole heap about every 170 creates, a fifth of its request thread's CPU. With 2: POST /vcons at
 * 32 connections ~13% less CPU per create (both threads), RSS under load +30 MB, the same once
 * idle (10 alternating rounds, same minutes). (Node refuses these two in NODE_OPTIONS, so there is
 * nothing of the operator's to defer to.)
 */
export const childNodeFlags = (env: Record<string, string>) => [
  ...(/max-semi-space-size/.test(env.NODE_OPTIONS ?? '') ? [] : ['--max-semi-space-size=2']),
  '--single-threaded-gc',
  '--heap-growing-percent=100',
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

const spawnServer = (args: string[], env: Record<string, string>, detached: boolean, output: 'pipe', runAs: RunAs | undefined) =>
  execa(process.execPath, [...childNodeFlags(env), serverEntry(), ...args], {
    ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    env: childEnvDefaults(env),
    extendEnv: false,
    ipc: true,
    stdin: 'ignore',
    stdout: output,
    stderr: output,
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

function launch(args: string[], env: Record<string, string>, opts: { detached?: boolean; logFile?: string; runAs?: RunAs }): Proc {
  let logFd: number | undefined;
  if (opts.detached && opts.logFile) {
    mkdirSync(path.dirname(opts.logFile), { recursive: true });
    // The launcher's file, written through the descriptor: other groups' users cannot read it.
    logFd = openSync(opts.logFile, 'a', 0o600);
    chmodSync(opts.logFile, 0o600);
  }
  // execa's types want one literal per call; the runtime accepts a pipe, 'ignore' or a file descriptor alike.
  const output = (logFd ?? (opts.detached ? 'ignore' : 'pipe')) as 'pipe';
  const subprocess = spawnServer(args, env, Boolean(opts.detached), output, opts.runAs);
  if (logFd !== undefined) closeSync(logFd);
  const proc: Proc = {
    subprocess,
    exited: subprocess.then(
      (r) => ({ code: r.exitCode, signal: r.signal }),
      () => ({ code: undefined, signal: undefined }),
    ),
    tail: [],
    onLine: undefined,
  };
  for (const stream of [subprocess.stdout, subprocess.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      proc.tail.push(line);
      if (proc.tail.length > 20) proc.tail.shift();
      proc.onLine?.(line);
    });
  }
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
    api,
    exited,
    async stop(graceMs = spec.config.shutdownTimeoutMs + 5_000) {
      await stopPid(pid, graceMs);
      return exited;
    },
    release() {
      if (subprocess.connected) subprocess.disconnect();
      subprocess.unref();
    },
  };
}

/**
 * Spawns `vcon-server` for one group and resolves once it has reported its port over IPC and its
 * /health answers 200. On failure the child is killed and the error names the group and the reason.
 */
export async function spawnChild(spec: GroupSpec, opts: SpawnOptions): Promise<Child> {
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
