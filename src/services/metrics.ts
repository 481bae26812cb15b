// Prometheus metrics of one instance (GET /metrics): a registry of its own (a test process runs
// many instances), request figures recorded as requests end, the rest read at scrape time from the
// services that already keep them.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Services } from './index.js';

/** What the scrape reads from outside the services (the MCP endpoint lives beside them). */
export interface MetricsSources {
  services: Services;
  mcp?: () => { sessions: number; read: number; write: number; subscriptions: number };
}

/** Request latency buckets, seconds: a cached read is ~1 ms, a search or a batch can take seconds. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(sources: MetricsSources) {
  const registry = new Registry();
  // Process memory, CPU, heap, GC and event-loop delay (prom-client's standard names).
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'vcon_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'vcon_http_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const errors = new Counter({
    name: 'vcon_http_errors_total',
    help: 'REST error answers by error code (database_busy, database_unavailable, database_refused, validation_failed, ...)',
    labelNames: ['code'] as const,
    registers: [registry],
  });

  const { services } = sources;
  const admission = () => services.admission.stats();
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  gauge('vcon_db_pool_size', 'Connections requests take turns on (the request pool)', () => admission().size);
  gauge('vcon_db_pool_in_use', 'Requests using the pool now', () => admission().in_use);
  gauge('vcon_db_pool_waiting', 'Requests waiting for a pool turn now', () => admission().waiting);
  // A counter whose value the admission keeps: set at scrape time.
  new Counter({
    name: 'vcon_database_busy_total',
    help: 'Requests (REST and MCP) refused with database_busy because no pool turn came in time or the queue was full',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(admission().refused);
    },
  });

  // The database round trip of /health, bounded by its timeout: one per scrape.
  const up = new Gauge({ name: 'vcon_database_up', help: '1 when the database answered the health check, else 0', registers: [registry] });
  const connections = new Gauge({
    name: 'vcon_db_connections',
    help: 'Server connections this instance holds (pg_stat_activity)',
    registers: [registry],
  });
  const pending = new Gauge({ name: 'vcon_index_queue_pending', help: 'Written vCons not yet indexed for search', registers: [registry] });
  const lag = new Gauge({ name: 'vcon_index_queue_lag_seconds', help: 'Seconds the oldest unindexed vCon has waited', registers: [registry] });
  const failing = new Gauge({ name: 'vcon_index_queue_failing', help: 'Queued vCons whose embedding failed (retried)', registers: [registry] });
  const probe = async () => {
    const h = await services.health.check();
    up.set(h.healthy ? 1 : 0);
    if (h.pool.connections !== null) connections.set(h.pool.connections);
    if (h.index) {
      pending.set(h.index.pending);
      lag.set(h.index.lag_s);
      failing.set(h.index.failing);
    }
  };

  const mcp = () => sources.mcp?.() ?? { sessions: 0, read: 0, write: 0, subscriptions: 0 };
  new Gauge({
    name: 'vcon_mcp_sessions',
    help: 'Open MCP sessions over HTTP, by the scope of their key',
    labelNames: ['scope'] as const,
    registers: [registry],
    collect() {
      const s = mcp();
      this.set({ scope: 'read' }, s.read);
      this.set({ scope: 'write' }, s.write);
    },
  });
  gauge(
    'vcon_mcp_subscriptions',
    'Resources MCP sessions are subscribed to now (each session at most MCP_MAX_SUBSCRIPTIONS)',
    () => mcp().subscriptions,
  );
  gauge('vcon_change_streams_open', 'Change-feed streams (GET /changes/stream) open now', () => services.changes.stats().streams);
  new Counter({
    name: 'vcon_change_events_sent_total',
    help: 'Change-log entries sent to change-feed streams',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(services.changes.stats().events_sent);
    },
  });

  return {
    /** Records one answered request (route: the matched template, never the raw path). */
    observe(method: string, route: string, status: number, seconds: number, errorCode?: string): void {
      const labels = { method, route, status: String(status) };
      requests.inc(labels);
      duration.observe(labels, seconds);
      if (errorCode) errors.inc({ code: errorCode });
    },
    /** The text exposition format, after one bounded health check. */
    async render(): Promise<{ contentType: string; body: string }> {
      await probe();
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
