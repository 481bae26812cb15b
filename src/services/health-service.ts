import type { BuildInfo } from '../version.js';
import { databaseRefusalOf, describeThrown, isDatabaseCapacity, isDatabaseUnavailable, isInstance, AppError } from '../domain/errors.js';
import type { Admission } from './admission.js';
import type { PoolSplit } from '../config.js';
import type { BodyBudget, BodyBudgetStats } from './body-budget.js';
import type { EndpointHealth } from '../domain/webhook-endpoints.js';

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
  /** Why the state is not healthy, in words that name no role, host or password; null when healthy. */
  reason: string | null;
  /** Each webhook endpoint's state, since when, and why; null without WEBHOOK_URLS or when not measured. */
  webhooks: EndpointHealth[] | null;
}

/** Seconds the probe waits for the database before calling it unhealthy (or busy). */
const DEFAULT_TIMEOUT_MS = 1500;

/** The reason of a failed ping, for /health (never a role, host or password: /health needs no key). */
export function pingFailureReason(err: unknown): string {
  const refusal = databaseRefusalOf(err);
  if (refusal) return refusal;
  if (isDatabaseCapacity(err)) return 'the database is at its connection limit';
  if (isInstance(err, AppError)) return err.message;
  if (isDatabaseUnavailable(err)) {
    const code = (err as { code?: unknown }).code;
    return `the database is not reachable (${typeof code === 'string' ? code : 'connection failed'})`;
  }
  // Anything else names no secret either way, but keep it short.
  return `the database check failed: ${describeThrown(err).slice(0, 200)}`;
}

/**
 * `/health`: a database round trip bounded by a timeout, so an outage answers 503 within 2 s.
 * A group whose pool is full is reported busy without queueing the ping behind its requests.
 */
export function createHealthService(deps: {
  /** Resolves with the number of server connections this instance holds and the index queue. */
  ping: () => Promise<PingResult>;
  admission: Admission;
  /** The webhook endpoints' states (absent without WEBHOOK_URLS). */
  webhooks?: () => Promise<EndpointHealth[] | null>;
  /** How the instance's connections divide (config.db.pool; default: the admission's turns, no thread, no analyze). */
  pool?: PoolSplit;
  bodies: BodyBudget;
  schema: string;
  label: string | null;
  buildInfo: BuildInfo;
  timeoutMs?: number;
}) {
  const started = Date.now();
  const timeoutMs = deps.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  type Probe = { state: HealthState; ping: PingResult | null; reason: string | null };
  const probe = async (): Promise<Probe> => {
    if (deps.admission.stats().waiting > 0) return { state: 'busy', ping: null, reason: "every connection of the group's pool is in use" };
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      deps.ping().then(
        (ping): Probe => ({ state: 'healthy', ping, reason: null }),
        (err: unknown): Probe => ({ state: isDatabaseCapacity(err) ? 'busy' : 'unhealthy', ping: null, reason: pingFailureReason(err) }),
      ),
      new Promise<Probe>((resolve) => {
        // A ping stuck behind a full pool is busy, not down.
        timer = setTimeout(() => {
          const busy = deps.admission.saturated();
          resolve({
            state: busy ? 'busy' : 'unhealthy',
            ping: null,
            reason: busy ? "every connection of the group's pool is in use" : `the database did not answer within ${timeoutMs} ms`,
          });
        }, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return result;
  };
  return {
    async check(): Promise<HealthReport> {
      const { state, ping, reason } = await probe();
      const webhooks = state === 'healthy' && deps.webhooks ? await deps.webhooks().catch(() => null) : null;
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
        reason,
        webhooks,
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
    reason: h.reason,
    webhooks: h.webhooks,
  };
}
