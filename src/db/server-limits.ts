// What a PostgreSQL server allows and who holds its connections, for the launcher's connection
// budget (cli/budget.ts). max_connections is the server's, shared by every database on it.
import postgres from 'postgres';

export interface ServerSnapshot {
  maxConnections: number;
  superuserReserved: number;
  /** reserved_connections (PostgreSQL 16+); 0 on older servers. */
  reservedConnections: number;
  /** Client connections to every database of the server now (this one's own excepted), by database and application_name. */
  connections: { database: string; application: string; n: number }[];
}

/**
 * Reads the connection limits and current use over one short-lived connection (any role may read
 * these settings and count pg_stat_activity rows).
 */
export async function readServerSnapshot(url: string): Promise<ServerSnapshot> {
  const sql = postgres(url, {
    max: 1,
    connect_timeout: 10,
    onnotice: () => {},
    prepare: false,
    connection: { application_name: 'vcon-launch-budget' },
  });
  try {
    const [limits] = await sql<{ max: number; su: number; reserved: number | null }[]>`
      select current_setting('max_connections')::int as max,
             current_setting('superuser_reserved_connections')::int as su,
             nullif(current_setting('reserved_connections', true), '')::int as reserved`;
    // A role without pg_read_all_stats sees backend_type null on other users' sessions: a row with
    // a user and a database is a client connection then (background processes have neither, or
    // use slots of their own).
    const rows = await sql<{ database: string; application: string; n: number }[]>`
      select datname as database, application_name as application, count(*)::int as n from pg_stat_activity
       where (backend_type = 'client backend' or (backend_type is null and usesysid is not null and datid is not null))
         and pid <> pg_backend_pid()
       group by datname, application_name`;
    return {
      maxConnections: limits.max,
      superuserReserved: limits.su,
      reservedConnections: limits.reserved ?? 0,
      connections: rows,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The application_name an instance's pool (and index thread) connects with (counted by the budget
 * and /health). Replica N of several adds `@N`, so each process's /health counts its own connections.
 */
export const applicationNameOf = (label: string | null, schema: string, replica?: number | null) =>
  `${`vcon-${label ?? schema}`.slice(0, 60)}${replica ? `@${replica}` : ''}`;

/** The application_name of an instance's analyze connections. */
export const analyzeApplicationNameOf = (label: string | null, schema: string) => `vcon-${label ?? schema}-analyze`.slice(0, 60);
