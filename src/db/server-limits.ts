// What a PostgreSQL server allows, for the launcher's connection budget (cli/budget.ts).
import postgres from 'postgres';

export interface ServerSnapshot {
  maxConnections: number;
  superuserReserved: number;
  /** reserved_connections (PostgreSQL 16+); 0 on older servers. */
  reservedConnections: number;
  /** Client connections to this database now, by application_name (vcon-<label> for groups). */
  connectionsByApplication: Map<string, number>;
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
    const rows = await sql<{ app: string; n: number }[]>`
      select application_name as app, count(*)::int as n from pg_stat_activity
       where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()
       group by application_name`;
    return {
      maxConnections: limits.max,
      superuserReserved: limits.su,
      reservedConnections: limits.reserved ?? 0,
      connectionsByApplication: new Map(rows.map((r) => [r.app, r.n])),
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The application_name an instance connects with (counted by the budget and /health). */
export const applicationNameOf = (label: string | null, schema: string) => `vcon-${label ?? schema}`.slice(0, 60);
