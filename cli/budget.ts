// The connection budget (issue 15): groups that share a PostgreSQL database share its
// max_connections. Before starting, the launcher reads the server's limits, keeps a reserve for
// operators, migrations and `provision`, subtracts what running groups were handed, and gives each
// group a pool size so the sum fits; explicit DB_POOL_MAX values are honoured or refused clearly.
import { DEFAULT_POOL_MAX, PGBOUNCER_POOL_MAX } from '../src/config.js';
import type { GroupSpec } from './groups.js';
import type { RegistryEntry } from './registry.js';

/** The pool a group gets when the budget has room (the server's own DB_POOL_MAX default). */
export const DEFAULT_POOL = DEFAULT_POOL_MAX;
/**
 * The pool a group behind PgBouncer gets (the server's default there): above the requests a busy
 * group has at once, so they wait in PgBouncer's queue rather than time out waiting for a turn.
 */
export const POOLED_POOL = PGBOUNCER_POOL_MAX;
/**
 * Connections of a group's analyze role (POST /database/analyze opens one per call, as that role,
 * outside the group's pool): its CONNECTION LIMIT, counted in the budget. 0 when the database
 * has no room for them beside the pools: analyze then answers 503 database_busy.
 */
export const ANALYZE_CONNECTIONS = 1;
/** The analyze role's limit behind PgBouncer, where the server's max_connections is not at stake. */
export const POOLED_ANALYZE_CONNECTIONS = 4;

/** What PostgreSQL allows: `max_connections` minus the slots ordinary roles can never use. */
export interface ServerLimits {
  maxConnections: number;
  superuserReserved: number;
  /** `reserved_connections` (PostgreSQL 16+, for pg_use_reserved_connections); 0 before. */
  reservedConnections: number;
}

/** One group to place: its database, an explicit DB_POOL_MAX (if its env files set one), and its replicas. */
export interface BudgetRequest {
  group: string;
  databaseKey: string;
  databaseLabel: string;
  explicitPool: number | undefined;
  /** Processes of this group (each has its own pool); 1 until replicas exist. */
  replicas: number;
  /** Behind PgBouncer the server budget does not apply: PgBouncer's pool size is the limit. */
  pooled: boolean;
}

/** What a running group was handed (from the registry). */
export interface Held {
  group: string;
  databaseKey: string;
  connections: number;
}

export interface Allocation {
  group: string;
  databaseKey: string;
  /** Pool size per process. */
  pool: number;
  replicas: number;
  /** Whether DB_POOL_MAX came from the group's env files. */
  explicit: boolean;
  pooled: boolean;
  /** Connections of the group's analyze role (one role for all its replicas). */
  analyze: number;
}

export interface DatabaseBudget {
  databaseKey: string;
  databaseLabel: string;
  limits: ServerLimits;
  reserve: number;
  /** Connections already handed to running groups, by group. */
  held: Held[];
  /** What is left for the groups being placed. */
  available: number;
  allocations: Allocation[];
  /** Set when the groups cannot fit: one message naming the groups and the numbers. */
  refusal?: string;
  /** Set when the server's limits could not be read: why (the groups get their asked or default pools). */
  unchecked?: string;
}

/** Reads the requests off group specs: DB_POOL_MAX counts as explicit only when a file sets it. */
export function requestsOf(specs: GroupSpec[], replicasOf: (spec: GroupSpec) => number = () => 1): BudgetRequest[] {
  return specs.map((s) => ({
    group: s.name,
    databaseKey: s.databaseKey,
    databaseLabel: s.databaseLabel,
    explicitPool: s.env.DB_POOL_MAX?.trim() ? s.config.db.poolMax : undefined,
    replicas: replicasOf(s),
    pooled: s.config.db.pooler === 'pgbouncer',
  }));
}

/**
 * What the registry says running groups hold (entries from before budgets count the old default):
 * each process its pool, each group once its analyze role's connections.
 */
export function heldOf(entries: RegistryEntry[]): Held[] {
  return entries
    .filter((e) => !e.db_pooled)
    .map((e) => ({
      group: e.group,
      databaseKey: e.database_key ?? e.database.replace(/^[^@]*@/, ''),
      connections: (e.db_pool ?? DEFAULT_POOL) + ((e.replica ?? 1) === 1 ? (e.db_analyze ?? 0) : 0),
    }));
}

/**
 * Kept free for operators (psql), migrations and `provision` when DB_RESERVED_CONNECTIONS is not
 * set: a tenth of max_connections, at least 3, at most 10. Superusers also have
 * superuser_reserved_connections; a role without superuser does not.
 */
export const defaultReserve = (maxConnections: number) => Math.min(10, Math.max(3, Math.ceil(maxConnections / 10)));

/** The reserve the groups of one database ask for: the largest explicit DB_RESERVED_CONNECTIONS. */
export function reserveOf(specs: GroupSpec[], databaseKey: string): number | undefined {
  const asked = specs.filter((s) => s.databaseKey === databaseKey && s.config.db.reservedConnections !== undefined);
  return asked.length ? Math.max(...asked.map((s) => s.config.db.reservedConnections!)) : undefined;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * Places the groups of one database. Explicit pools are taken as asked; the others share what
 * is left evenly, at most DEFAULT_POOL each and at least 1.
 */
export function planDatabase(requests: BudgetRequest[], limits: ServerLimits, opts: { reserve: number | undefined; held: Held[] }): DatabaseBudget {
  const first = requests[0];
  const reserve = opts.reserve ?? defaultReserve(limits.maxConnections);
  const heldTotal = opts.held.reduce((n, h) => n + h.connections, 0);
  const usable = limits.maxConnections - limits.superuserReserved - limits.reservedConnections - reserve;
  const available = usable - heldTotal;
  const budgeted = requests.filter((r) => !r.pooled);
  const explicit = budgeted.filter((r) => r.explicitPool !== undefined);
  const shared = budgeted.filter((r) => r.explicitPool === undefined);
  const explicitTotal = explicit.reduce((n, r) => n + r.explicitPool! * r.replicas, 0);
  const sharedProcesses = shared.reduce((n, r) => n + r.replicas, 0);
  // Analyze connections only where every pool still gets at least one: a pool is what a group
  // needs to serve at all, an analyze connection only for the occasional analyze call.
  const analyze = available - explicitTotal - sharedProcesses - budgeted.length * ANALYZE_CONNECTIONS >= 0 ? ANALYZE_CONNECTIONS : 0;
  const analyzeTotal = budgeted.length * analyze;
  const share = sharedProcesses ? Math.min(DEFAULT_POOL, Math.floor((available - explicitTotal - analyzeTotal) / sharedProcesses)) : 0;
  const allocations: Allocation[] = requests.map((r) => ({
    group: r.group,
    databaseKey: r.databaseKey,
    pool: r.explicitPool ?? (r.pooled ? POOLED_POOL : Math.max(share, 1)),
    replicas: r.replicas,
    explicit: r.explicitPool !== undefined,
    pooled: r.pooled,
    analyze: r.pooled ? POOLED_ANALYZE_CONNECTIONS : analyze,
  }));
  const budget: DatabaseBudget = {
    databaseKey: first.databaseKey,
    databaseLabel: first.databaseLabel,
    limits,
    reserve,
    held: opts.held,
    available,
    allocations,
  };
  const needed = explicitTotal + sharedProcesses;
  if (budgeted.length && needed > available) {
    const asked = [
      ...explicit.map((r) => `${r.group} ${r.explicitPool}${r.replicas > 1 ? ` × ${r.replicas} replicas` : ''} (DB_POOL_MAX)`),
      ...shared.map((r) => `${r.group} 1${r.replicas > 1 ? ` × ${r.replicas} replicas` : ''} (the least a group can run with)`),
    ];
    const running = opts.held.length
      ? ` − ${heldTotal} held by running groups (${opts.held.map((h) => `${h.group} ${h.connections}`).join(', ')})`
      : '';
    budget.refusal =
      `database ${first.databaseLabel}: ${plural(budgeted.length, 'group')} ${budgeted.length === 1 ? 'needs' : 'need'} at least ${plural(needed, 'connection')} but only ${Math.max(available, 0)} are available ` +
      `(max_connections ${limits.maxConnections} − superuser_reserved_connections ${limits.superuserReserved}` +
      (limits.reservedConnections ? ` − reserved_connections ${limits.reservedConnections}` : '') +
      ` − reserve ${reserve} (DB_RESERVED_CONNECTIONS)${running}). Asked: ${asked.join(', ')}. ` +
      `Lower DB_POOL_MAX, start fewer groups, raise max_connections, or put PgBouncer in front (DB_POOLER=pgbouncer).`;
  }
  return budget;
}

/** Groups the requests by database and plans each; `limitsOf` reads a database's limits. */
export async function planBudget(
  requests: BudgetRequest[],
  deps: {
    /** The server's limits, or a reason they could not be read (an unreachable database fails its groups' start instead). */
    limitsOf: (databaseKey: string) => Promise<ServerLimits | string>;
    /** The reserve asked for on a database (the largest DB_RESERVED_CONNECTIONS of its groups), if any. */
    reserveOf: (databaseKey: string) => number | undefined;
    held: Held[];
  },
): Promise<DatabaseBudget[]> {
  const byDb = new Map<string, BudgetRequest[]>();
  for (const r of requests) byDb.set(r.databaseKey, [...(byDb.get(r.databaseKey) ?? []), r]);
  const out: DatabaseBudget[] = [];
  for (const [key, rs] of byDb) {
    // A database only PgBouncer groups use needs no server limits.
    const limits = rs.every((r) => r.pooled) ? { maxConnections: 0, superuserReserved: 0, reservedConnections: 0 } : await deps.limitsOf(key);
    if (typeof limits === 'string') {
      const open = { maxConnections: Number.MAX_SAFE_INTEGER, superuserReserved: 0, reservedConnections: 0 };
      out.push({ ...planDatabase(rs, open, { reserve: 0, held: [] }), unchecked: limits });
      continue;
    }
    out.push(
      planDatabase(rs, limits, {
        reserve: deps.reserveOf(key),
        held: deps.held.filter((h) => h.databaseKey === key),
      }),
    );
  }
  return out;
}
