import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { dirname, join } from 'node:path';
import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;
/** Either the pool or a transaction: repos accept both so services can compose writes atomically. */
export type Db = Sql | TransactionSql;

export interface SqlOptions {
  url: string;
  schema: string;
  max?: number;
  applicationName?: string;
  statementTimeoutMs?: number;
  /** Seconds an unused connection is kept (default 5): idle groups give their connections back. */
  idleTimeoutS?: number;
  /**
   * pgbouncer: transaction pooling in front. PgBouncer refuses startup parameters it does not
   * track (search_path, statement_timeout), so the role's own settings pin the schema
   * (`vcon-launch provision`), and named prepared statements are off (PgBouncer 1.18 cannot
   * carry them across server connections).
   */
  pooler?: 'none' | 'pgbouncer';
}

/**
 * The marks the correctness fixes of patches/postgres+3.4.9.patch leave in postgres.js (applied by
 * patch-package at install; patches/README.md links each to its upstream issue).
 */
export const DRIVER_PATCH_MARKS = [
  '/* vcon-launch: closed-socket guard */',
  '/* vcon-launch: row-count reset */',
  '/* vcon-launch: type-fetch rejection */',
  '/* vcon-launch: copy error settles the writable */',
];
/** Needed only behind PgBouncer (max_pipeline 0), so checked only there. */
export const PGBOUNCER_PATCH_MARK = '/* vcon-launch: reserve before the pipeline check */';
let driverChecked = false;

/**
 * Refuses to run on an unpatched postgres.js (an install with scripts disabled): without the
 * patches a failed query can make the next one on its connection answer with wrong rows.
 */
export function assertDriverPatched(opts: { pgbouncer?: boolean; root?: string } = {}): void {
  if (driverChecked && !opts.pgbouncer && !opts.root) return;
  // The CommonJS entry is <root>/cjs/src/index.js; the package root is the one `import` loads too.
  const root = opts.root ?? join(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');
  const marks = opts.pgbouncer ? [...DRIVER_PATCH_MARKS, PGBOUNCER_PATCH_MARK] : DRIVER_PATCH_MARKS;
  for (const rel of ['src/connection.js', 'cjs/src/connection.js']) {
    const text = readFileSync(join(root, rel), 'utf8');
    const missing = marks.filter((m) => !text.includes(m));
    if (missing.length) {
      throw new Error(
        `postgres.js at ${root} is not patched (${missing.join(', ')} missing in ${rel}): ` +
          'run `npx patch-package` in the vcon-launch package (installs with scripts disabled skip its postinstall)',
      );
    }
  }
  if (!opts.root) driverChecked = true;
}

/**
 * The search_path of a group: its own schema, then `extensions` (pg_trgm), never public for
 * another group. The schema name comes from validated config (SchemaName), never from a request.
 */
export function searchPathOf(schema: string): string {
  return `"${schema.replace(/"/g, '""')}", extensions`;
}

/** The parts of postgres.js's parsed options the socket factory reads. */
interface SocketTarget {
  host: string[];
  port: number[];
  path?: string | false;
}

/**
 * A TCP socket with Nagle's algorithm off, as libpq sets it, through postgres.js's public `socket`
 * option. With Nagle on, the small message written after a COPY (CopyDone, then the next
 * statement) waits for the server's delayed ACK, ~40 ms on Linux, three times per indexing round.
 * The socket is handed over while still connecting: Node queues the startup message until the
 * connection is made, and its error and close events reach the driver's own handlers, so connect
 * timeouts and failures take the driver's usual path.
 */
function noDelaySocket(target: SocketTarget): net.Socket {
  const socket = net.connect({ host: target.host[0], port: target.port[0], noDelay: true });
  // The driver names the TLS server (SNI) after socket.host, which it sets only on its own sockets.
  return Object.assign(socket, { host: target.host[0] });
}

/** The socket option for a URL: one TCP host only; a Unix socket or a host list keeps the driver's own. */
export function socketOption(url: string): { socket?: (target: SocketTarget) => net.Socket } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return {};
  }
  const unix = u.searchParams.has('host') || u.hostname === '' || decodeURIComponent(u.hostname).startsWith('/');
  return unix || u.host.includes(',') ? {} : { socket: noDelaySocket };
}

/**
 * One pool pinned to one schema for its whole life. The search_path is a startup parameter of
 * every connection, so pooled connections, transactions and prepared statements all stay in the
 * group's schema; `public` is never on it for another group, so a missing table fails loudly.
 */
export function createSql(opts: SqlOptions): Sql {
  const pgbouncer = opts.pooler === 'pgbouncer';
  assertDriverPatched({ pgbouncer });
  const searchPath = searchPathOf(opts.schema);
  return postgres(opts.url, {
    ...socketOption(opts.url),
    max: opts.max ?? 10,
    connect_timeout: 5,
    // postgres.js backs off up to 20 s between reconnects after repeated failures, and queries
    // queued on a closed connection wait that long: after an outage the service would stall.
    // Retry quickly instead (a refused connect costs nothing) and let the request fail as 503.
    backoff: (attempts: number) => Math.min(0.05 * 2 ** attempts, 1),
    idle_timeout: opts.idleTimeoutS ?? 5,
    onnotice: () => {},
    transform: { undefined: null },
    // Behind PgBouncer: no named statements, and no pipelining. Without prepare, a query with
    // parameters is sent as Parse/Describe/Flush and bound only after the answer; pipelined behind
    // another query's Sync, PgBouncer hands the server back at that Sync, and the Bind lands on
    // another client's server connection and unnamed statement (the density bench: wrong types
    // "invalid input syntax for type uuid", and queries that never answer). max_pipeline 0 keeps
    // one query in flight per connection (sql.begin needs the driver patch "reserve before the
    // pipeline check" for that); the pool towards PgBouncer is cheap.
    ...(pgbouncer ? { prepare: false, max_pipeline: 0 } : {}),
    connection: {
      application_name: opts.applicationName ?? `vcon-${opts.schema}`,
      ...(pgbouncer ? {} : { search_path: searchPath }),
      ...(opts.statementTimeoutMs && !pgbouncer ? { statement_timeout: opts.statementTimeoutMs } : {}),
    },
  }) as Sql;
}

export { isDatabaseUnavailable } from '../domain/errors.js';
