// A real PgBouncer (Debian's package) for tests and the density bench: a free loopback port, a generated config and
// userlist, transaction pooling, run as the postgres user (PgBouncer refuses to run as root).
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';

const BINARY = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p));
export const pgbouncerInstalled = BINARY !== undefined;

export interface PgBouncer {
  port: number;
  /** The URL of `database` through PgBouncer as `user`. */
  url(user: string, password: string, database: string): string;
  stop(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

/** md5 secret of a userlist line: "md5" + md5(password + user). */
const md5Secret = (user: string, password: string) =>
  `md5${createHash('md5')
    .update(password + user)
    .digest('hex')}`;

/** PgBouncer's own files as `vcon-launch export --target pgbouncer` wrote them. */
export interface ExportedPgBouncer {
  ini: string;
  userlist: string;
}

/**
 * Starts PgBouncer in front of `server` (host:port) for the given users, or with the files `export`
 * wrote (only where it listens, its auth file's path, its log and pid file are changed).
 */
export async function startPgBouncer(
  opts:
    | {
        server: { host: string; port: number };
        users: { name: string; password: string }[];
        /** Server connections per user (each group role has its own pool). */
        poolSize: number;
        /** Server connections of the database over all users (0: no limit). */
        maxDbConnections?: number;
        maxClientConn?: number;
      }
    | { exported: ExportedPgBouncer; maxClientConn?: undefined; maxDbConnections?: undefined },
): Promise<PgBouncer> {
  if (!BINARY) throw new Error('pgbouncer is not installed: apt-get install -y pgbouncer (.ci/run does)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-pgbouncer-'));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const userlist = path.join(dir, 'userlist.txt');
  const ini = path.join(dir, 'pgbouncer.ini');
  const log = path.join(dir, 'pgbouncer.log');
  const runtime = [`unix_socket_dir =`, `logfile = ${log}`, `pidfile = ${path.join(dir, 'pgbouncer.pid')}`];
  if ('exported' in opts) {
    writeFileSync(userlist, opts.exported.userlist);
    const set: Record<string, string> = { listen_addr: '127.0.0.1', listen_port: String(port), auth_file: userlist };
    const lines = opts.exported.ini.split('\n').map((l) => {
      const key = /^(\w+)\s*=/.exec(l)?.[1];
      return key && key in set ? `${key} = ${set[key]}` : l;
    });
    writeFileSync(ini, [...lines, ...runtime, ''].join('\n'));
  } else {
    writeFileSync(userlist, opts.users.map((u) => `"${u.name}" "${md5Secret(u.name, u.password)}"\n`).join(''));
    writeFileSync(
      ini,
      [
        '[databases]',
        `* = host=${opts.server.host} port=${opts.server.port}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = md5',
        `auth_file = ${userlist}`,
        'pool_mode = transaction',
        `default_pool_size = ${opts.poolSize}`,
        `max_db_connections = ${opts.maxDbConnections ?? 0}`,
        `max_client_conn = ${opts.maxClientConn ?? 500}`,
        ...runtime,
        '',
      ].join('\n'),
    );
  }
  for (const f of [userlist, ini]) chmodSync(f, 0o644);
  const asRoot = process.getuid?.() === 0;
  // One descriptor per client and server connection: a soft limit of 1024 (runuser's default)
  // would refuse clients below max_client_conn; raised within the hard limit.
  const fds = (opts.maxClientConn ?? 500) + (opts.maxDbConnections || 1000) + 100;
  const run = `ulimit -n $(( ${fds} < $(ulimit -Hn) ? ${fds} : $(ulimit -Hn) )) 2>/dev/null; exec "$0" "$1"`;
  const proc: ResultPromise = asRoot
    ? execa('runuser', ['-u', 'postgres', '--', 'sh', '-c', run, BINARY, ini], { reject: false, stdio: 'ignore' })
    : execa('sh', ['-c', run, BINARY, ini], { reject: false, stdio: 'ignore' });
  // Ready when it accepts connections (or gone with its log as the reason).
  const deadline = Date.now() + 20_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = new Socket();
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
      s.connect(port, '127.0.0.1');
    });
    if (up) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`pgbouncer did not start: ${existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : '(no log)'}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    url: (user, password, database) => `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    async stop() {
      // runuser may not pass the signal on: stop PgBouncer itself by its pid file.
      const pidFile = path.join(dir, 'pgbouncer.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : NaN;
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGTERM');
      else proc.kill('SIGTERM');
      await proc;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
