// The connection budget: max_connections belongs to a PostgreSQL server, shared by every database
// on it and by every client. Before starting (and whenever it provisions), the launcher reads the
// server's limits and who holds its connections now, keeps a reserve for operators, migrations and
// `provision`, subtracts what other clients hold and what running groups were handed, and gives each
// group a pool size so the sum fits; explicit DB_POOL_MAX values are honoured or refused clearly.
import { DEFAULT_ANALYZE_CONNECTIONS, DEFAULT_POOL_MAX, MAX_REPLICAS, PGBOUNCER_POOL_MAX, type PoolSplit } from '../src/config.js';
import { EMBEDDED_MAX_CONNECTIONS } from '../src/db/embedded.js';
import { analyzeApplicationNameOf, applicationNameOf, readServerSnapshot, type ServerSnapshot } from '../src/db/server-limits.js';
import { UserError } from './errors.js';
import { describeDatabase, type GroupSpec } from './groups.js';
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
 * outside the group's pool): its CONNECTION LIMIT, counted in the budget. 0 when the server
 * has no room for them beside the pools: analyze then answers 503 database_busy.
 */
export const ANALYZE_CONNECTIONS = 1;
/** The analyze role's limit behind PgBouncer, where the server's max_connections is not at stake. */
export const POOLED_ANALYZE_CONNECTIONS = DEFAULT_ANALYZE_CONNECTIONS;

/** What PostgreSQL allows: `max_connections` minus the slots ordinary roles can never use. */
export interface ServerLimits {
  maxConnections: number;
  superuserReserved: number;
  /** `reserved_connections` (PostgreSQL 16+, for pg_use_reserved_connections); 0 before. */
  reservedConnections: number;
}

/** The connections PostgreSQL shows for a group: its database and one of its application names. */
export interface Owned {
  database: string;
  application: string;
}

/** One group to place: its server, an explicit DB_POOL_MAX (if its env files set one), and its replicas. */
export interface BudgetRequest {
  group: string;
  /** host:port of its PostgreSQL server (embedded:<dir> for an embedded cluster not running yet). */
  serverKey: string;
  /** user@host:port/db, for people. */
  databaseLabel: string;
  /** How its connections show in pg_stat_activity: counted by what the budget gives it, not as another client's. */
  owns: Owned[];
  explicitPool: number | undefined;
  /** Processes of this group (each has its own pool); 1 until replicas exist. */
  replicas: number;
  /** Behind PgBouncer the server budget does not apply: PgBouncer's pool size is the limit. */
  pooled: boolean;
}

/** What a running group was handed (from the registry). */
export interface Held {
  group: string;
  serverKey: string;
  connections: number;
  owns: Owned[];
}

export interface Allocation {
  group: string;
  serverKey: string;
  /** Pool size per process. */
  pool: number;
  replicas: number;
  /** Whether DB_POOL_MAX came from the group's env files. */
  explicit: boolean;
  pooled: boolean;
  /** Connections of the group's analyze role (one role for all its replicas). */
  analyze: number;
}

export interface ServerBudget {
  serverKey: string;
  /** host:port, or "embedded", for people. */
  serverLabel: string;
  /** The databases of the groups placed (labels), sorted. */
  databases: string[];
  limits: ServerLimits;
  reserve: number;
  /** Connections already handed to running groups, by group. */
  held: Held[];
  /** Client connections on the server (any database) that are not this launcher's groups'. */
  others: number;
  /** Connections each group placed holds now (it may be running already), by group. */
  current: Record<string, number>;
  /** What is left for the groups being placed. */
  available: number;
  allocations: Allocation[];
  /** Set when the groups cannot fit: one message naming the groups and the numbers. */
  refusal?: string;
  /** Set when the server's limits could not be read: why (the groups get their asked or default pools). */
  unchecked?: string;
}

/** The database name in a user@host:port/db label (what pg_stat_activity calls datname). */
const databaseNameOf = (label: string) => (label === 'embedded' ? 'postgres' : label.slice(label.lastIndexOf('/') + 1));

/**
 * How a group of this label and schema on this database shows in pg_stat_activity: its pool (each
 * replica's, `@N`, whatever number of them runs) and its analyze calls.
 */
const ownedBy = (database: string, label: string | null, schema: string): Owned[] => [
  { database, application: applicationNameOf(label, schema) },
  ...Array.from({ length: MAX_REPLICAS }, (_, i) => ({ database, application: applicationNameOf(label, schema, i + 1) })),
  { database, application: analyzeApplicationNameOf(label, schema) },
];

/**
 * Reads the requests off group specs: DB_POOL_MAX counts as explicit only when a file sets it.
 * `urlOf` gives a group's URL where it is known (the embedded cluster's once it runs).
 */
export function requestsOf(
  specs: GroupSpec[],
  opts: { replicasOf?: (spec: GroupSpec) => number; urlOf?: (spec: GroupSpec) => string | undefined } = {},
): BudgetRequest[] {
  return specs.map((s) => {
    const url = opts.urlOf?.(s) ?? s.databaseUrl;
    const db = url ? describeDatabase(url) : undefined;
    return {
      group: s.name,
      serverKey: db?.server ?? s.serverKey,
      databaseLabel: s.databaseLabel,
      owns: ownedBy(db?.name ?? 'postgres', s.config.label, s.config.db.schema),
      explicitPool: s.env.DB_POOL_MAX?.trim() ? s.config.db.pool.size : undefined,
      replicas: opts.replicasOf?.(s) ?? s.config.replicas,
      pooled: s.config.db.pooler === 'pgbouncer',
    };
  });
}

/** The server a registry entry counts against (entries from before server keys: from its database key). */
export const serverKeyOfEntry = (e: RegistryEntry): string =>
  e.server_key ??
  (e.database_key?.startsWith('embedded:') ? e.database_key : (e.database_key ?? e.database.replace(/^[^@]*@/, '')).replace(/\/[^/]*$/, ''));

/**
 * What the registry says running groups hold (entries from before budgets count the old default):
 * each process its pool, each group once its analyze role's connections.
 */
export function heldOf(entries: RegistryEntry[]): Held[] {
  return entries
    .filter((e) => !e.db_pooled)
    .map((e) => ({
      group: e.group,
      serverKey: serverKeyOfEntry(e),
      connections: (e.db_pool ?? DEFAULT_POOL) + ((e.replica ?? 1) === 1 ? (e.db_analyze ?? 0) : 0),
      owns: ownedBy(databaseNameOf(e.database), e.label, e.schema),
    }));
}

/**
 * Kept free for operators (psql), migrations and `provision` when DB_RESERVED_CONNECTIONS is not
 * set: a tenth of max_connections, at least 3, at most 10. Superusers also have
 * superuser_reserved_connections; a role without superuser does not.
 */
export const defaultReserve = (maxConnections: number) => Math.min(10, Math.max(3, Math.ceil(maxConnections / 10)));

/** The reserve the groups of one server ask for: the largest explicit DB_RESERVED_CONNECTIONS. */
export function reserveOf(specs: GroupSpec[], requests: BudgetRequest[], serverKey: string): number | undefined {
  const names = new Set(requests.filter((r) => r.serverKey === serverKey).map((r) => r.group));
  const asked = specs.filter((s) => names.has(s.name) && s.config.db.reservedConnections !== undefined);
  return asked.length ? Math.max(...asked.map((s) => s.config.db.reservedConnections!)) : undefined;
}

const ownedKey = (w: Owned) => `${w.database}\u0000${w.application}`;

/** Client connections of a snapshot that none of these groups owns. */
export function othersOf(snapshot: ServerSnapshot, owners: { owns: Owned[] }[]): number {
  const ours = new Set(owners.flatMap((o) => o.owns.map(ownedKey)));
  return snapshot.connections.reduce((n, c) => n + (ours.has(ownedKey(c)) ? 0 : c.n), 0);
}

/** Client connections of a snapshot that one group owns. */
const countOwned = (snapshot: ServerSnapshot, owner: { owns: Owned[] }): number => {
  const keys = new Set(owner.owns.map(ownedKey));
  return snapshot.connections.reduce((n, c) => n + (keys.has(ownedKey(c)) ? c.n : 0), 0);
};

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** host:port of a server key, or "embedded". */
const serverLabelOf = (key: string) => (key.startsWith('embedded:') ? 'embedded' : key);

/**
 * Places the groups of one server. Explicit pools are taken as asked; the others share what
 * is left evenly, at most DEFAULT_POOL each and at least 1.
 */
export function planServer(
  requests: BudgetRequest[],
  limits: ServerLimits,
  opts: { reserve: number | undefined; held: Held[]; others?: number },
): ServerBudget {
  const first = requests[0];
  const reserve = opts.reserve ?? defaultReserve(limits.maxConnections);
  const others = opts.others ?? 0;
  const heldTotal = opts.held.reduce((n, h) => n + h.connections, 0);
  const usable = limits.maxConnections - limits.superuserReserved - limits.reservedConnections - reserve;
  const available = usable - others - heldTotal;
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
    serverKey: r.serverKey,
    pool: r.explicitPool ?? (r.pooled ? POOLED_POOL : Math.max(share, 1)),
    replicas: r.replicas,
    explicit: r.explicitPool !== undefined,
    pooled: r.pooled,
    analyze: r.pooled ? POOLED_ANALYZE_CONNECTIONS : analyze,
  }));
  const serverLabel = serverLabelOf(first.serverKey);
  const budget: ServerBudget = {
    serverKey: first.serverKey,
    serverLabel,
    databases: [...new Set(requests.map((r) => r.databaseLabel))].sort(),
    limits,
    reserve,
    held: opts.held,
    others,
    current: {},
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
      `server ${serverLabel}: ${plural(budgeted.length, 'group')} ${budgeted.length === 1 ? 'needs' : 'need'} at least ${plural(needed, 'connection')} but only ${Math.max(available, 0)} are available ` +
      `(max_connections ${limits.maxConnections} − superuser_reserved_connections ${limits.superuserReserved}` +
      (limits.reservedConnections ? ` − reserved_connections ${limits.reservedConnections}` : '') +
      ` − reserve ${reserve} (DB_RESERVED_CONNECTIONS)${others ? ` − ${others} held by other clients` : ''}${running}). Asked: ${asked.join(', ')}. ` +
      `Lower DB_POOL_MAX, start fewer groups, raise max_connections, or put PgBouncer in front (DB_POOLER=pgbouncer).`;
  }
  return budget;
}

/**
 * The connection budget of groups about to run, per server, against what running groups were
 * handed and what other clients hold now: the one computation `start`, `check` and every path that
 * provisions use. `urlOf` gives a group's URL where known; an embedded cluster not running yet is
 * taken to be fresh (its max_connections, no other clients).
 */
export async function planGroups(
  specs: GroupSpec[],
  deps: {
    urlOf?: (spec: GroupSpec) => string | undefined;
    /** Registry entries of running instances (their groups' pools count as held). */
    running: RegistryEntry[];
    replicasOf?: (spec: GroupSpec) => number;
  },
): Promise<ServerBudget[]> {
  const requests = requestsOf(specs, deps);
  const held = heldOf(deps.running);
  const byServer = new Map<string, BudgetRequest[]>();
  for (const r of requests) byServer.set(r.serverKey, [...(byServer.get(r.serverKey) ?? []), r]);
  const out: ServerBudget[] = [];
  for (const [key, rs] of byServer) {
    const onServer = held.filter((h) => h.serverKey === key);
    const reserve = reserveOf(specs, requests, key);
    // A server only PgBouncer groups use needs no limits.
    if (rs.every((r) => r.pooled)) {
      out.push(planServer(rs, { maxConnections: 0, superuserReserved: 0, reservedConnections: 0 }, { reserve, held: [] }));
      continue;
    }
    const spec = specs.find((s) => s.name === rs[0].group)!;
    const url = deps.urlOf?.(spec) ?? spec.databaseUrl;
    if (!url) {
      out.push(
        planServer(rs, { maxConnections: EMBEDDED_MAX_CONNECTIONS, superuserReserved: 3, reservedConnections: 0 }, { reserve, held: onServer }),
      );
      continue;
    }
    let snapshot: ServerSnapshot;
    try {
      snapshot = await readServerSnapshot(url);
    } catch (err) {
      // The groups on it fail their own start with the reason; the budget cannot be checked.
      const open = { maxConnections: Number.MAX_SAFE_INTEGER, superuserReserved: 0, reservedConnections: 0 };
      out.push({ ...planServer(rs, open, { reserve: 0, held: [] }), unchecked: (err as Error).message });
      continue;
    }
    const current = Object.fromEntries(rs.map((r) => [r.group, countOwned(snapshot, r)]));
    out.push({ ...planServer(rs, snapshot, { reserve, held: onServer, others: othersOf(snapshot, [...rs, ...onServer]) }), current });
  }
  return out;
}

/** planGroups for groups about to run: throws a UserError naming groups and numbers when they cannot fit. */
export async function budgetFor(specs: GroupSpec[], deps: Parameters<typeof planGroups>[1]): Promise<ServerBudget[]> {
  const budgets = await planGroups(specs, deps);
  const refusals = budgets.flatMap((b) => (b.refusal ? [b.refusal] : []));
  if (refusals.length) throw new UserError(`the groups do not fit the connection budget:\n${refusals.join('\n')}`);
  return budgets;
}

/** A group's allocation in a plan. */
export const allocationIn = (budgets: ServerBudget[], group: string): Allocation | undefined =>
  budgets.flatMap((b) => b.allocations).find((a) => a.group === group);

/**
 * The analyze role's connection limit of each group, for every path that provisions: a running
 * group keeps what its start was handed (the registry), a stopped one gets what `start` would give
 * it now (0 where it would not fit).
 */
export async function analyzeLimitsOf(
  specs: GroupSpec[],
  deps: { urlOf?: (spec: GroupSpec) => string | undefined; running: RegistryEntry[] },
): Promise<(spec: GroupSpec) => number> {
  const first = (group: string) => deps.running.find((e) => e.group === group && (e.replica ?? 1) === 1);
  const stopped = specs.filter((s) => !deps.running.some((e) => e.group === s.name));
  const budgets = stopped.length ? await planGroups(stopped, deps) : [];
  return (spec) => {
    const entry = first(spec.name);
    if (entry) return entry.db_pooled ? POOLED_ANALYZE_CONNECTIONS : (entry.db_analyze ?? 0);
    const budget = budgets.find((b) => b.allocations.some((a) => a.group === spec.name));
    return budget?.refusal ? 0 : (allocationIn(budgets, spec.name)?.analyze ?? 0);
  };
}

/** A pool split for people: `6 (5 requests + 1 index) + 1 analyze`. */
export const formatSplit = (p: PoolSplit): string =>
  `${p.size} (${p.index ? `${p.requests} requests + ${p.index} index` : 'requests and indexing share it'}) + ${p.analyze} analyze`;
