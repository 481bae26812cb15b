// The detached supervisor's socket is a root shell for whoever may talk to it: a start request names
// the environment (NODE_OPTIONS included) and the user of the processes it spawns, and carries every
// group's keys and role passwords. Only the launcher's own user may connect, whatever the umask, and
// a launcher never hands a request to a socket (or a socket directory) another user made first.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, test } from 'vitest';
import { socketPathOf } from '../../cli/daemon.js';
import { installUnreachableByOthers } from '../../cli/os-users.js';
import { packageRoot } from '../../src/paths.js';
import { CLI, cliEnv, createWorkspace, KEY, waitFor, type Workspace } from '../launcher/helpers.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = { uid: 65534, gid: 65534 };
// The impostor runs as nobody with this test's Node: a checkout (and a CI-installed Node inside
// it) under a 0700 directory cannot be run by other users, so the impostor tests skip there.
const nodeUnreachable = installUnreachableByOthers(packageRoot);

const workspaces: Workspace[] = [];
const cleanups: (() => void)[] = [];
afterAll(async () => {
  for (const ws of workspaces) {
    await ws.run(['stop', '--all', '--instances-dir', ws.instancesDir]);
    await ws.cleanup();
  }
  for (const c of cleanups) c();
}, 120_000);

function workspace(groups: string[]): Workspace {
  const ws = createWorkspace(groups);
  workspaces.push(ws);
  return ws;
}

/** The CLI with an explicit umask and environment. */
const runWith = (ws: Workspace, umask: string, args: string[], env: Record<string, string> = {}) =>
  execa('sh', ['-c', `umask ${umask} && exec "$0" "$@"`, process.execPath, CLI, ...args], {
    cwd: ws.dir,
    env: { ...cliEnv(), ...env },
    extendEnv: false,
    reject: false,
    timeout: 120_000,
  });

/**
 * Another local user (nobody) listening on `sock` first, as an impostor supervisor: it answers a
 * ping and records every request line. Returns the file it records into and a stop.
 */
async function impostor(sock: string, dir: string): Promise<{ captured: () => string; stop: () => void }> {
  const script = path.join(dir, 'impostor.mjs');
  const record = path.join(dir, 'captured.txt');
  writeFileSync(
    script,
    `import net from 'node:net'; import fs from 'node:fs';
     const [sock, record] = process.argv.slice(2);
     fs.mkdirSync(sock.slice(0, sock.lastIndexOf('/')), { recursive: true, mode: 0o777 });
     net.createServer((s) => {
       let buf = '';
       s.on('data', (d) => {
         buf += d;
         const i = buf.indexOf('\\n');
         if (i < 0) return;
         fs.appendFileSync(record, buf.slice(0, i) + '\\n');
         s.end(JSON.stringify({ ok: true, pid: 1 }) + '\\n');
       });
     }).listen(sock, () => fs.chmodSync(sock, 0o777));`,
  );
  writeFileSync(record, '');
  chmodSync(dir, 0o777);
  chmodSync(record, 0o666);
  const proc = execa(process.execPath, [script, sock, record], { ...NOBODY, reject: false, env: cliEnv(), extendEnv: false });
  await waitFor(
    () => {
      try {
        return statSync(sock).isSocket() || undefined;
      } catch {
        return proc.exitCode === null ? undefined : Promise.reject(new Error(`the impostor exited: ${String(proc.stderr)}`));
      }
    },
    30_000,
    50,
    'the impostor listening',
  );
  return { captured: () => readFileSync(record, 'utf8'), stop: () => proc.kill('SIGKILL') };
}

describe("the supervisor's socket", () => {
  test('is mode 0600 even when the launcher runs with umask 000, and the registry entries 0644', async () => {
    const ws = workspace(['um']);
    const r = await runWith(ws, '000', ['start', '--group', 'um', '--detach']);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const sock = path.join(ws.instancesDir, 'supervisor.sock');
    expect((statSync(sock).mode & 0o777).toString(8)).toBe('600');
    // Nor may another user rewrite the registry entry whose pid `stop` signals.
    for (const f of ['um.json', 'um.port']) expect((statSync(path.join(ws.instancesDir, f)).mode & 0o777).toString(8), f).toBe('644');
  }, 120_000);

  test('past the length a socket path may have, it lives in a directory only the launcher user may enter, and start, status and stop work', async () => {
    const ws = workspace(['lp']);
    const long = path.join(ws.dir, 'i'.repeat(100));
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'vcon-sock-'));
    cleanups.push(() => rmSync(tmp, { recursive: true, force: true }));
    const env = { TMPDIR: tmp };
    const r = await runWith(ws, '022', ['start', '--group', 'lp', '--detach', '--instances-dir', long], env);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const sock = withTmpdir(tmp, () => socketPathOf(long));
    expect(path.dirname(sock).startsWith(tmp)).toBe(true);
    expect((statSync(sock).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(path.dirname(sock)).mode & 0o777).toString(8)).toBe('700');
    const stop = await runWith(ws, '022', ['stop', '--all', '--instances-dir', long], env);
    expect(stop.exitCode, String(stop.stderr)).toBe(0);
  }, 120_000);
});

describe.skipIf(!isRoot || nodeUnreachable !== undefined)('a socket another local user made first is never handed a request', () => {
  test('the fallback socket of a long instances path, bound first by another user: start refuses and sends it nothing', async () => {
    const ws = workspace(['sq']);
    const long = path.join(ws.dir, 'i'.repeat(100));
    // A temporary directory like /tmp: everyone may create in it.
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'vcon-sock-'));
    chmodSync(tmp, 0o1777);
    const attacker = mkdtempSync(path.join(os.tmpdir(), 'vcon-impostor-'));
    cleanups.push(
      () => rmSync(tmp, { recursive: true, force: true }),
      () => rmSync(attacker, { recursive: true, force: true }),
    );
    const sock = withTmpdir(tmp, () => socketPathOf(long));
    const fake = await impostor(sock, attacker);
    try {
      const r = await runWith(ws, '022', ['start', '--group', 'sq', '--detach', '--instances-dir', long], { TMPDIR: tmp });
      expect(fake.captured()).not.toContain(KEY);
      expect(fake.captured()).toBe('');
      expect(r.exitCode).not.toBe(0);
      expect(String(r.stderr)).toMatch(/not a private directory of this user/);
    } finally {
      fake.stop();
    }
  }, 120_000);

  test('supervisor.sock in an instances directory others may write, bound first by another user: start refuses and sends it nothing', async () => {
    const ws = workspace(['sd']);
    chmodSync(ws.dir, 0o755);
    mkdirSync(ws.instancesDir, { mode: 0o777 });
    chmodSync(ws.instancesDir, 0o777);
    const attacker = mkdtempSync(path.join(os.tmpdir(), 'vcon-impostor-'));
    cleanups.push(() => rmSync(attacker, { recursive: true, force: true }));
    const fake = await impostor(path.join(ws.instancesDir, 'supervisor.sock'), attacker);
    try {
      const r = await runWith(ws, '022', ['start', '--group', 'sd', '--detach']);
      expect(fake.captured()).not.toContain(KEY);
      expect(fake.captured()).toBe('');
      expect(r.exitCode).not.toBe(0);
      expect(String(r.stderr)).toMatch(/belongs to uid 65534/);
    } finally {
      fake.stop();
    }
  }, 120_000);
});

/** Runs fn with os.tmpdir() answering `dir` (what the launcher sees with TMPDIR set). */
function withTmpdir<T>(dir: string, fn: () => T): T {
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
  }
}
