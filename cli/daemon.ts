// The detached supervisor: `start --detach` leaves one per instances directory. It spawns the
// detached groups' processes itself (so it learns how each one exits), restarts crashed ones with
// the foreground supervisor's backoff, keeps their registry entries current, and leaves once its
// last group is stopped. Launchers talk to it over a Unix socket in the instances directory.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { EnvSchema } from '../src/config.js';
import { packageRoot } from '../src/paths.js';
import { isAlive } from '../src/process.js';
import { spawnChild, type Child } from './child.js';
import type { LauncherEnvironment } from './environment.js';
import { UserError } from './errors.js';
import { loadGroup, type GroupSpec } from './groups.js';
import { rotateOwnLog, type LogRotation } from './log-files.js';
import { note } from './output.js';
import { spawnKeepingPort } from './ports.js';
import { createRegistry } from './registry.js';
import { createSupervisor, logRotationOf, slotKey, type ReloadResult, type Slot, type Supervisor } from './supervisor.js';

/** One instance to start, as the launcher prepared it (the spec is rebuilt from the env file). */
export type SlotRequest = Pick<Slot, 'replica' | 'replicas' | 'env' | 'role' | 'analyze' | 'serverKey' | 'runAs'> & { group: string };

export interface StartedInstance {
  key: string;
  pid: number;
  url: string;
  port: number;
  schema: string;
  label: string | null;
}

type Request =
  | { type: 'ping' }
  | {
      type: 'start';
      envDir: string;
      launcher: Pick<LauncherEnvironment, 'databaseUrl' | 'roles'>;
      timeoutMs?: number;
      slots: SlotRequest[];
    }
  | { type: 'stop'; keys: string[]; graceMs?: number }
  | { type: 'reload'; groups: string[] };

export type StopAnswer = { ok: true; results: { key: string; pid: number | null; outcome: 'stopped' | 'killed' | 'not running' }[] };
export type ReloadAnswer = { ok: true; reloads: ReloadResult[] };
type Response = { ok: true; pid: number } | { ok: true; started: StartedInstance[] } | { ok: false; errors: string[] } | StopAnswer | ReloadAnswer;

/**
 * A supervisor's socket: `<name>.sock` in the instances directory (`supervisor` for the detached
 * groups' one, `launcher-<pid>` for a foreground launcher's), or, when that path is too long for a
 * Unix socket (about 100 bytes), in a directory of the temporary directory that only this user may
 * enter: a name directly in /tmp could be bound first by any local user, who would then be handed
 * every group's keys and passwords with the next start.
 */
export function socketPathOf(instancesDir: string, name = 'supervisor'): string {
  const inDir = path.join(instancesDir, `${name}.sock`);
  if (Buffer.byteLength(inDir) < 100) return inDir;
  const hash = createHash('sha256').update(instancesDir).digest('hex').slice(0, 16);
  return path.join(privateTmpDir(), `${hash}${name === 'supervisor' ? '' : `-${name}`}.sock`);
}
const uid = () => process.getuid?.();

/** <tmp>/vcon-launch-<uid>: the fallback sockets' directory (checked by ensurePrivateDir before use). */
const privateTmpDir = () => path.join(os.tmpdir(), `vcon-launch-${uid() ?? 'user'}`);

/**
 * Creates the fallback sockets' directory (mode 0700), and refuses one that is not this user's
 * alone: another user who made it first could bind the socket inside.
 */
function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const me = uid();
  if (!st.isDirectory() || (me !== undefined && st.uid !== me) || (st.mode & 0o077) !== 0) {
    throw new UserError(
      `${dir} holds the supervisor's socket but is not a private directory of this user (owner uid ${st.uid}, mode ${(st.mode & 0o777).toString(8)}): ` +
        'another user may have made it to impersonate the supervisor; remove it, or use a shorter --instances-dir',
    );
  }
}

/**
 * Why the socket at `sock` may not be talked to, or undefined: one another user owns is not this
 * launcher's supervisor, and a start request carries every group's keys and passwords.
 */
function foreignSocket(sock: string): string | undefined {
  const me = uid();
  let st;
  try {
    st = lstatSync(sock);
  } catch {
    return undefined;
  }
  if (!st.isSocket()) return `${sock} is not a socket`;
  if (me !== undefined && st.uid !== me) return `${sock} belongs to uid ${st.uid}, not to this user (uid ${me})`;
  return undefined;
}

/**
 * Listens on the socket with mode 0600 whatever the umask: whoever may connect can have the
 * supervisor spawn processes with the environment and user it names, so only its own user may.
 */
async function listenPrivately(server: ReturnType<typeof createServer>, sockPath: string): Promise<void> {
  // bind() creates the file with the umask's mode: none for others from the start, then 0600.
  const umask = process.umask(0o077);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(sockPath, () => resolve());
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(sockPath, 0o600);
}

/** The control socket of a foreground launcher (it answers `reload` for its groups). */
export const launcherSocketOf = (instancesDir: string, pid: number) => socketPathOf(instancesDir, `launcher-${pid}`);

/** Sends one request to the directory's supervisor; undefined when none is listening. */
export const askSupervisor = <T extends Response>(instancesDir: string, request: Request): Promise<T | undefined> =>
  askAt<T>(socketPathOf(instancesDir), request, supervisorLog(instancesDir));

/** Sends one request to the supervisor listening at `sockPath`; undefined when none is. */
export async function askAt<T extends Response>(sockPath: string, request: Request, logHint?: string): Promise<T | undefined> {
  if (path.dirname(sockPath) === privateTmpDir()) ensurePrivateDir(path.dirname(sockPath));
  const foreign = foreignSocket(sockPath);
  if (foreign) throw new UserError(`refusing to talk to the supervisor's socket: ${foreign}; remove it if no supervisor of yours is running`);
  const socket: Socket | undefined = await new Promise((resolve) => {
    const s = createConnection(sockPath);
    s.once('connect', () => resolve(s));
    s.once('error', () => resolve(undefined));
  });
  if (!socket) return undefined;
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: socket, crlfDelay: Infinity });
    let answered = false;
    lines.once('line', (line) => {
      answered = true;
      socket.end();
      resolve(JSON.parse(line) as T);
    });
    socket.once('close', () => {
      if (!answered)
        reject(new UserError(`the supervisor at ${sockPath} closed the connection without answering${logHint ? `; see ${logHint}` : ''}`));
    });
    socket.on('error', () => undefined);
    socket.write(JSON.stringify(request) + '\n');
  });
}

const supervisorLog = (instancesDir: string) => path.join(instancesDir, 'supervisor.log');

/** The pid of the directory's supervisor, starting one when none answers. */
export async function ensureSupervisor(instancesDir: string, launcher: LauncherEnvironment): Promise<number> {
  // A supervisor that is leaving (its last group was just stopped) answers "leaving": wait until it
  // has gone, then start a new one, instead of handing it a start it would refuse.
  for (;;) {
    const running = await askSupervisor<{ ok: true; pid: number } | { ok: false; errors: string[] }>(instancesDir, { type: 'ping' });
    if (running?.ok) return running.pid;
    if (!running) break;
    await sleep(50);
  }
  mkdirSync(instancesDir, { recursive: true });
  const logFd = openSync(supervisorLog(instancesDir), 'a', 0o600);
  const daemon = spawn(process.execPath, [path.join(packageRoot, 'dist', 'cli', 'index.js'), 'supervise', '--instances-dir', instancesDir], {
    env: launcher.inherited,
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  daemon.on('error', () => undefined);
  closeSync(logFd);
  const pid = daemon.pid;
  daemon.unref();
  // Until it listens (or dies: two launchers raced and the other's supervisor won, or it failed).
  for (;;) {
    const answer = await askSupervisor<{ ok: true; pid: number }>(instancesDir, { type: 'ping' });
    if (answer) return answer.pid;
    if (pid === undefined || !isAlive(pid)) {
      const again = await askSupervisor<{ ok: true; pid: number }>(instancesDir, { type: 'ping' });
      if (again) return again.pid;
      throw new UserError(`could not start the supervisor of ${instancesDir}; see ${supervisorLog(instancesDir)}`);
    }
    await sleep(50);
  }
}

/**
 * Answers each connection's one request (a JSON line) with one JSON line; `before` runs when the
 * request has arrived, `after` once its answer is sent.
 */
export function answerRequests(
  server: Server,
  handle: (req: Request) => Promise<Response>,
  hooks: { before?: () => void; after?: (answer: Response) => void } = {},
): void {
  server.on('connection', (socket) => {
    socket.on('error', () => undefined);
    createInterface({ input: socket, crlfDelay: Infinity }).once('line', (line) => {
      hooks.before?.();
      void (async () => {
        let answer: Response;
        try {
          answer = await handle(JSON.parse(line) as Request);
        } catch (err) {
          answer = { ok: false, errors: [(err as Error).message] };
        }
        socket.end(JSON.stringify(answer) + '\n');
        hooks.after?.(answer);
      })();
    });
  });
}

/**
 * A foreground launcher's control socket: `vcon-launch reload` reaches its groups through it.
 * Resolves with a function that closes it (and removes the file).
 */
export async function serveLauncherControl(
  instancesDir: string,
  supervisor: Pick<Supervisor, 'reload'>,
  load: (current: GroupSpec) => GroupSpec,
): Promise<() => void> {
  const sockPath = launcherSocketOf(instancesDir, process.pid);
  mkdirSync(instancesDir, { recursive: true });
  // A file left by a launcher of this pid that was killed: nobody listens on it.
  rmSync(sockPath, { force: true });
  const server = createServer();
  answerRequests(server, async (req) => {
    if (req.type === 'ping') return { ok: true, pid: process.pid };
    if (req.type === 'reload') return { ok: true, reloads: await supervisor.reload(req.groups, load) };
    return { ok: false, errors: [`a foreground launcher takes no ${req.type} requests`] };
  });
  if (path.dirname(sockPath) === privateTmpDir()) ensurePrivateDir(path.dirname(sockPath));
  // Only the launcher's user may ask it anything.
  await listenPrivately(server, sockPath);
  server.unref();
  return () => {
    server.close();
    rmSync(sockPath, { force: true });
  };
}

/**
 * Runs the supervisor of one instances directory until its last group is stopped. A second
 * supervisor for the same directory leaves at once.
 */
export async function runSupervisor(instancesDir: string, launcher: LauncherEnvironment): Promise<void> {
  const sockPath = socketPathOf(instancesDir);
  const registry = createRegistry(instancesDir);
  // The launcher environment each group was started with: a reload reads its file the same way.
  const launchers = new Map<string, Pick<LauncherEnvironment, 'databaseUrl' | 'roles'>>();
  let busy = 0;
  let leaving = false;
  let resolveLeft!: () => void;
  const left = new Promise<void>((r) => (resolveLeft = r));
  const server = createServer();
  const leave = () => {
    if (leaving) return;
    leaving = true;
    server.close();
    rmSync(sockPath, { force: true });
    void supervisor.stopAll().then(resolveLeft);
  };
  const leaveIfIdle = () => {
    if (busy === 0 && supervisor.keys().length === 0) {
      note('no group left to supervise; leaving');
      leave();
    }
  };
  const supervisor = createSupervisor([], {
    registry,
    prefix: () => () => undefined,
    baseEnv: {},
    mode: 'detached',
    maxRestarts: launcher.maxRestarts,
    onIdle: leaveIfIdle,
  });

  const start = async (req: Extract<Request, { type: 'start' }>): Promise<Response> => {
    const slots: Slot[] = [];
    // Read once per start: replicas share their group's spec; a later start reads the file again.
    const specs = new Map<string, GroupSpec>();
    try {
      for (const r of req.slots) {
        const spec = specs.get(r.group) ?? loadGroup(r.group, req.envDir, req.launcher);
        specs.set(r.group, spec);
        launchers.set(r.group, req.launcher);
        slots.push({ ...r, spec, logFile: path.join(instancesDir, `${slotKey({ spec, replica: r.replica, replicas: r.replicas })}.log`) });
      }
    } catch (err) {
      return { ok: false, errors: [(err as Error).message] };
    }
    const started: Child[] = [];
    const results = await Promise.allSettled(
      slots.map(async (slot) => {
        const opts = {
          env: slot.env,
          detached: true,
          logFile: slot.logFile,
          logRotation: logRotationOf(slot.spec),
          timeoutMs: req.timeoutMs,
          runAs: slot.runAs,
        };
        // The port this instance had last time, when it is free: the URL an operator copied stays true.
        const child = await spawnKeepingPort(slot.spec, opts, registry.lastPort(slotKey(slot)), (o) => spawnChild(slot.spec, o));
        started.push(child);
        slot.child = child;
        return child;
      }),
    );
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
    if (errors.length) {
      // All or nothing, as in the foreground.
      await Promise.all(started.map((c) => c.stop()));
      return { ok: false, errors };
    }
    for (const slot of slots) {
      slot.child!.release();
      supervisor.add(slot);
      note(`group ${slotKey(slot)} started: pid ${slot.child!.pid} at ${slot.child!.url}`);
    }
    return {
      ok: true,
      started: slots.map((s) => ({
        key: slotKey(s),
        pid: s.child!.pid,
        url: s.child!.url,
        port: s.child!.port,
        schema: s.child!.schema,
        label: s.child!.label,
      })),
    };
  };

  const handle = async (req: Request): Promise<Response> => {
    if (req.type === 'ping') return { ok: true, pid: process.pid };
    if (req.type === 'stop') return { ok: true, results: await supervisor.stop(req.keys, req.graceMs) };
    if (req.type === 'reload') {
      const load = (current: GroupSpec) =>
        loadGroup(current.name, path.dirname(current.envFile), launchers.get(current.name) ?? { databaseUrl: undefined });
      return { ok: true, reloads: await supervisor.reload(req.groups, load) };
    }
    return start(req);
  };

  answerRequests(
    server,
    (req) => (leaving ? Promise.resolve({ ok: false, errors: ['the supervisor is leaving; run the command again'] }) : handle(req)),
    {
      before: () => busy++,
      after: (answer) => {
        busy--;
        if (!('pid' in answer)) leaveIfIdle();
      },
    },
  );

  if (path.dirname(sockPath) === privateTmpDir()) ensurePrivateDir(path.dirname(sockPath));
  await listenPrivately(server, sockPath).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EADDRINUSE') throw err;
    // Another supervisor answers: it is the directory's. Otherwise the socket is a dead one's.
    if (await askSupervisor(instancesDir, { type: 'ping' })) {
      leaving = true;
      resolveLeft();
      return;
    }
    rmSync(sockPath, { force: true });
    await listenPrivately(server, sockPath);
  });
  if (leaving) return;
  writeFileSync(path.join(instancesDir, 'supervisor.pid'), `${process.pid}\n`);
  // Its own log, at the defaults of VCON_LOG_MAX_SIZE and VCON_LOG_KEEP (it writes a few lines an event).
  const ownRotation: LogRotation = {
    maxBytes: EnvSchema.shape.VCON_LOG_MAX_SIZE.parse(undefined),
    keep: EnvSchema.shape.VCON_LOG_KEEP.parse(undefined),
  };
  setInterval(() => rotateOwnLog(supervisorLog(instancesDir), ownRotation), 60_000).unref();
  note(`supervising the detached groups of ${instancesDir} (pid ${process.pid})`);
  // A launcher that died before handing over its groups leaves nobody to come: do not wait forever.
  setTimeout(leaveIfIdle, 600_000).unref();
  // Its groups are detached processes of their own: a terminal hang-up must not end supervision.
  process.on('SIGHUP', () => undefined);
  process.on('SIGTERM', () => {
    // Stopping the supervisor leaves the groups running, unsupervised, as before it existed.
    note('SIGTERM: leaving; the groups keep running unsupervised');
    server.close();
    rmSync(sockPath, { force: true });
    process.exit(0);
  });
  await left;
  rmSync(path.join(instancesDir, 'supervisor.pid'), { force: true });
}
