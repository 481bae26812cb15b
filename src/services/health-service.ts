import type { BuildInfo } from '../version.js';
import { isDatabaseCapacity } from '../domain/errors.js';
import type { Admission } from './admission.js';
import type { PoolSplit } from '../config.js';
import type { BodyBudget, BodyBudgetStats } from './body-budget.js';

/** healthy: the database answered; busy: it is up but this group's pool (or the server) is full; unhealthy: unreachable. */
export type HealthState = 'healthy' | 'busy' | 'unhealthy';

export interface PoolReport extends PoolSplit {
  /** Requests using the pool now (at most `requests`). */
  in_use: number;
  /** Requests waiting for a connection now. */
  waiting: number;
  /** Server connections this instance holds now (pg_stat_activity); null when not measured. */
  connections: number | null;
}

/** The search index queue: written vCons not yet searchable, and how long the oldest waits. */
export interface IndexReport {
  pending: number;
  lag_s: number;
  /** Queued vCons whose embedding failed (retried with back-off). */
  failing: number;
  /** Whether the index thread runs now: it starts when there is work and is retired when idle. */
  thread: boolean;
  /** Index threads ended by their heap limit (their share of VCON_MEMORY_LIMIT) since start; each was replaced. */
  thread_out_of_heap: number;
  /** Whether indexing left the thread after it failed: searches and waits index what they need themselves. */
  thread_failed: boolean;
}

export interface PingResult {
  connections: number;
  index: IndexReport;
}

export interface HealthReport {
  state: HealthState;
  healthy: boolean;
  schema: string;
  instance: string | null;
  version: string;
  uptime_s: number;
  pool: PoolReport;
  /** Request bodies read and worked on at once. */
  bodies: BodyBudgetStats;
  /** null when not measured (busy or down). */
  index: IndexReport | null;
}

/**
 * `/health`: a database round trip bounded by a timeout, so an outage answers 503 within 2 s.
 * A group whose pool is full is reported busy without queueing the ping behind its requests.
 */
export function createHealthService(deps: {
  /** Resolves with the number of server connections this instance holds and the index queue. */
  ping: () => Promise<PingResult>;
  admission: Admission;
  /** How the instance's connections divide (config.db.pool; default: the admission's turns, no thread, no analyze). */
  pool?: PoolSplit;
  bodies: BodyBudget;
  schema: string;
  label: string | null;
  buildInfo: BuildInfo;
  timeoutMs?: number;
}) {
  const started = Date.now();
  const timeoutMs = deps.timeoutMs ?? 1500;
  const probe = async (): Promise<{ state: HealthState; ping: PingResult | null }> => {
    if (deps.admission.stats().waiting > 0) return { state: 'busy', ping: null };
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      deps.ping().then(
        (ping) => ({ state: 'healthy' as const, ping }),
        (err) => ({ state: isDatabaseCapacity(err) ? ('busy' as const) : ('unhealthy' as const), ping: null }),
      ),
      new Promise<{ state: HealthState; ping: null }>((resolve) => {
        // A ping stuck behind a full pool is busy, not down.
        timer = setTimeout(() => resolve({ state: deps.admission.saturated() ? 'busy' : 'unhealthy', ping: null }), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return result;
  };
  return {
    async check(): Promise<HealthReport> {
      const { state, ping } = await probe();
      const { size: turns, in_use, waiting } = deps.admission.stats();
      const split = deps.pool ?? { size: turns, requests: turns, index: 0, analyze: 0 };
      return {
        state,
        healthy: state === 'healthy',
        schema: deps.schema,
        instance: deps.label,
        version: deps.buildInfo.version,
        uptime_s: Math.round((Date.now() - started) / 1000),
        pool: { ...split, in_use, waiting, connections: ping?.connections ?? null },
        bodies: deps.bodies.stats(),
        index: ping?.index ?? null,
      };
    },
  };
}

export type HealthService = ReturnType<typeof createHealthService>;

const DATABASE_OF = { healthy: 'connected', busy: 'busy', unhealthy: 'error' } as const;

/** The body both transports answer with (REST adds `success`); never the server version or host. */
export function healthBody(h: HealthReport) {
  return {
    status: h.state,
    database: DATABASE_OF[h.state],
    schema: h.schema,
    instance: h.instance,
    version: h.version,
    uptime_s: h.uptime_s,
    pool: h.pool,
    bodies: h.bodies,
    index: h.index,
  };
}
