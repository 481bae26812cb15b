#!/usr/bin/env node
// vcon-server: one group's instance. Composition root: config → logger → sql → migrate → services
// → express app (REST + MCP over HTTP) or MCP over stdio.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, parseKeys, type Config, type EnvInput } from './config.js';
import { createLogger, type Logger } from './logger.js';
import { getBuildInfo } from './version.js';
import { createSql, type Sql, type SqlOptions } from './db/client.js';
import { analyzeApplicationNameOf, applicationNameOf } from './db/server-limits.js';
import { migrate, MigrationError } from './db/migrate.js';
import { acquireEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.js';
import { schemaIdentityProblem, withCredentials } from './db/roles.js';
import { DatabaseIdentityError } from './domain/errors.js';
import { createTransactor, createVconRepo } from './db/vcon-repo.js';
import { createTagRepo } from './db/tag-repo.js';
import { createDiscoveryRepo } from './db/discovery-repo.js';
import { createIntrospectionRepo } from './db/introspection-repo.js';
import { createAnalyzeRepo } from './db/analyze-repo.js';
import { createAnalyticsRepo } from './db/analytics-repo.js';
import { loadPlugins, PluginLoadError, type Plugin } from './plugins/index.js';
import { createHealthService } from './services/health-service.js';
import { createAdmission } from './services/admission.js';
import { createBodyBudget } from './services/body-budget.js';
import { createVconService } from './services/vcon-service.js';
import { createTagService } from './services/tag-service.js';
import { createDiscoveryService } from './services/discovery-service.js';
import { createMetaService } from './services/meta-service.js';
import { MAX_DEPTH } from './domain/vcon.js';
import { ANALYZE_TIMEOUT_MAX_MS, createDatabaseService } from './services/database-service.js';
import { createAnalyticsService } from './services/analytics-service.js';
import { createChangeService } from './services/change-service.js';
import { createChangeRepo } from './db/change-repo.js';
import { createWebhookService } from './services/webhook-service.js';
import { createWebhookRepo } from './db/webhook-repo.js';
import type { Services } from './services/index.js';
import { createEmbeddingProvider } from './embeddings/index.js';
import { createSearch } from './search.js';
import { buildApp, createAppServer } from './http/app.js';
import { createSendTimeout } from './http/send-timeout.js';
import { createMetrics } from './services/metrics.js';
import express, { type Express, type RequestHandler } from 'express';
import type { McpHttp, McpHttpOptions } from './mcp/http.js';
import { keyIdOf } from './transport/auth.js';
import type { Scope } from './services/context.js';

export interface Instance {
  config: Config;
  log: Logger;
  sql: Sql;
  services: Services;
  /** Set in HTTP mode. */
  server?: Server;
  /** The MCP Streamable HTTP endpoint and its sessions (HTTP mode). */
  mcp?: McpHttp;
  port?: number;
  url?: string;
  /** Takes new keys (API_KEYS, API_KEYS_READONLY, METRICS_KEY) without a restart; ConfigError when one is invalid. */
  reloadKeys(env: EnvInput): Promise<KeysReloaded>;
  stop(): Promise<void>;
}

/** What a key reload left: how many keys of each kind, and the MCP sessions it closed. */
export interface KeysReloaded {
  keys: number;
  readOnlyKeys: number;
  metricsKey: boolean;
  sessionsClosed: number;
}

/** Wires the services of one instance over a pinned pool. Exported for tests and tools. */
export function createServices(
  sql: Sql,
  config: Config,
  plugins: readonly Plugin[] = [],
  log?: Logger,
  databaseUrl = config.db.url,
  /** A server process indexes on a thread of its own, with a pool of these settings. */
  indexThread?: SqlOptions,
): Services {
  const buildInfo = getBuildInfo();
  // Search: writes queue their vCons in their own transaction and the index worker (of every
  // instance) indexes them in batches; a search first indexes what was acknowledged before it.
  // An inline provider loads its word vectors on first use (~0.5 s once, ~45 MB): an idle group
  // stays small and ten groups start fast.
  // Each component's logger is a child of the root: a child of a child would repeat `component`.
  const root = log ?? createLogger(config);
  const searchLog = root.child({ component: 'search' });
  const search = createSearch({
    sql,
    provider: createEmbeddingProvider(config, searchLog),
    plugins,
    log: searchLog,
    thread: indexThread ? { sql: indexThread, config } : undefined,
  });
  const transact = createTransactor(sql);
  const vcons = createVconService({
    repo: createVconRepo(sql),
    transact,
    plugins,
    index: search.writes,
    maxElements: config.limits.maxElements,
    validation: config.validation,
    log: root.child({ component: 'vcons' }),
  });
  search.start();
  const changes = createChangeService({
    repo: createChangeRepo(sql),
    retentionHours: config.changes.retentionHours,
    log: root.child({ component: 'changes' }),
  });
  changes.start();
  const webhooks = createWebhookService({
    repo: createWebhookRepo(sql),
    changes,
    urls: config.webhooks.urls,
    secret: config.webhooks.secret,
    allowPrivate: config.webhooks.allowPrivate,
    log: root.child({ component: 'webhooks' }),
    version: buildInfo.version,
  });
  webhooks.start().catch((err: Error) => root.error({ err: err.message }, 'webhooks not started'));
  // Requests take turns on the request pool (config.db.pool); without a thread of its own the
  // indexer works on the same pool as requests (tests, tools), all of it theirs. Every request of
  // REST and MCP takes a turn here: while the role no longer pins this instance's schema (found at
  // /health), none is admitted, so nothing of another schema is served.
  const identity: { problem: string | undefined } = { problem: undefined };
  const admission = createAdmission({
    limit: indexThread ? config.db.pool.requests : config.db.pool.size,
    maxWaitMs: config.db.queueTimeoutMs,
    refusal: () => (identity.problem ? new DatabaseIdentityError(identity.problem) : undefined),
  });
  const bodies = createBodyBudget(config.limits.bodyInFlight);
  return {
    admission,
    bodies,
    health: createHealthService({
      // One round trip that also counts this instance's server connections (by application_name).
      ping: async () => {
        const problem = await schemaIdentityProblem(sql, config.db.schema);
        if (problem && problem !== identity.problem)
          root.error({ problem }, "the database role does not pin this instance's schema; refusing requests");
        identity.problem = problem;
        if (problem) throw new DatabaseIdentityError(problem);
        const [r] = await sql<{ n: number; pending: number; lag_s: number; failing: number }[]>`
          select (select count(*)::int from pg_stat_activity
                   where datname = current_database() and application_name = current_setting('application_name')) as n,
                 q.pending, q.lag_s, q.failing
          from (select count(*)::int as pending,
                       coalesce(extract(epoch from clock_timestamp() - min(enqueued_at)), 0)::float8 as lag_s,
                       count(*) filter (where last_error is not null)::int as failing
                from index_queue) q`;
        // Rows no wake announced (written by another process of the group): index them here too.
        if (r.pending > r.failing) search.pendingSeen();
        return {
          connections: r.n,
          index: {
            pending: r.pending,
            lag_s: Math.round(r.lag_s * 1000) / 1000,
            failing: r.failing,
            thread: search.threadRunning(),
            thread_out_of_heap: search.threadOutOfHeap(),
            thread_failed: search.threadFailed(),
          },
        };
      },
      admission,
      webhooks: webhooks.enabled ? () => webhooks.health() : undefined,
      pool: config.db.pool,
      bodies,
      schema: config.db.schema,
      label: config.label,
      buildInfo,
    }),
    vcons,
    tags: createTagService({ vcons, repo: createTagRepo(sql), plugins }),
    discovery: createDiscoveryService({ repo: createDiscoveryRepo(sql), plugins }),
    meta: createMetaService({ bodyBytes: config.rest.bodyLimit, elements: config.limits.maxElements, depth: MAX_DEPTH }, config.validation),
    search: search.service,
    database: createDatabaseService({
      repo: createIntrospectionRepo(sql, config.db.schema),
      // The server's URL with the analyze role's name and password, or the pool's own identity.
      analyzer: createAnalyzeRepo({
        url: withCredentials(databaseUrl ?? '', config.db.analyze ? undefined : config.db.user, config.db.analyze ? undefined : config.db.password),
        schema: config.db.schema,
        user: config.db.analyze?.user,
        password: config.db.analyze?.password,
        applicationName: analyzeApplicationNameOf(config.label, config.db.schema),
      }),
      // At most 5 s: the answer comes well inside the 10 s a client may wait before calling it a hang.
      analyzeTimeoutMs: Math.min(config.db.statementTimeoutMs, ANALYZE_TIMEOUT_MAX_MS),
    }),
    analytics: createAnalyticsService({ repo: createAnalyticsRepo(sql), plugins }),
    plugins,
    changes,
    webhooks,
    stop: async () => {
      await webhooks.stop();
      changes.stop();
      await search.stop();
    },
  };
}

/**
 * Behind PgBouncer the schema is pinned by the role's own search_path (no startup parameter gets
 * through): refuse to serve when it is not, rather than reading and writing another schema.
 */
async function checkPinnedByRole(sql: Sql, schema: string): Promise<void> {
  const [{ search_path }] = await sql<{ search_path: string }[]>`select current_setting('search_path') as search_path`;
  const first = search_path
    .split(',')[0]
    ?.trim()
    .replace(/^"(.*)"$/, '$1');
  if (first !== schema) {
    throw new ConfigError([
      {
        variable: 'DB_POOLER',
        message: `with pgbouncer the role must pin the schema, but its search_path is "${search_path}" (expected "${schema}" first); run \`vcon-launch provision --group <name>\` and connect as the role it creates`,
      },
    ]);
  }
}

/**
 * The MCP endpoint, loaded on its first request: the MCP SDK and the tool definitions are ~10 MB
 * of a process's memory, which a group used only over REST (or idle) never needs.
 */
function lazyMcpHttp(opts: McpHttpOptions): McpHttp {
  let loaded: McpHttp | undefined;
  let loading: Promise<RequestHandler> | undefined;
  let closed = false;
  const load = () =>
    (loading ??= import('./mcp/http.js').then((m) => {
      loaded = m.createMcpHttp(opts);
      if (closed) void loaded.close();
      const router = express.Router();
      loaded.mount(router as unknown as Express);
      return router as RequestHandler;
    }));
  return {
    mount(app) {
      app.all('/mcp', (req, res, next) => {
        load().then((handle) => handle(req, res, next), next);
      });
    },
    stats: () => loaded?.stats() ?? { sessions: 0, read: 0, write: 0, subscriptions: 0 },
    revoke: async (keep) => (loaded ? loaded.revoke(keep) : 0),
    async close() {
      closed = true;
      await loaded?.close();
    },
  };
}

/** How long the server keeps an idle keep-alive connection, and the timeout it tells clients. */
export const KEEP_ALIVE_MS = 30_000;
export const KEEP_ALIVE_HINT_S = 5;

/** Starts one instance from a validated config. In HTTP mode it listens before resolving. */
export async function startInstance(config: Config, opts: { log?: Logger } = {}): Promise<Instance> {
  const log = opts.log ?? createLogger(config);
  let embedded: EmbeddedPostgres | undefined;
  let url = config.db.url;
  if (!url) {
    embedded = await acquireEmbeddedPostgres(path.join(config.dataDir, 'embedded'), log);
    url = embedded.url;
    log.info({ port: embedded.port }, 'using the embedded PostgreSQL (no DATABASE_URL set)');
  }
  // The group's own role (set by vcon-launch) replaces whoever the URL names.
  url = withCredentials(url, config.db.user, config.db.password);
  // DB_POOL_MAX divides into the request pool and the index thread's connection (config.db.pool):
  // the launcher's budget counts DB_POOL_MAX, so together they never exceed it.
  const { requests, index } = config.db.pool;
  const poolOptions: SqlOptions = {
    url,
    schema: config.db.schema,
    max: requests,
    applicationName: applicationNameOf(config.label, config.db.schema, config.replica),
    // No request may hang on a runaway statement: every statement of the pool is bounded.
    statementTimeoutMs: config.db.statementTimeoutMs,
    idleTimeoutS: config.db.idleTimeoutS,
    pooler: config.db.pooler,
  };
  const sql = createSql(poolOptions);
  let services: Services | undefined;
  let mcpHttp: McpHttp | undefined;
  // Every reader of the keys (REST and MCP auth, /metrics) looks them up in config.auth on each
  // request, so replacing the lists is the reload; sessions opened with a key that is gone (or now
  // gives another scope) are closed rather than left to run on.
  const reloadKeys = async (env: EnvInput): Promise<KeysReloaded> => {
    const next = parseKeys(env);
    config.auth.keys = next.keys;
    config.auth.readOnlyKeys = next.readOnlyKeys;
    config.metrics.key = next.metricsKey;
    // A key in both lists is read-only, as auth decides.
    const scopes = new Map<string, Scope>([
      ...next.keys.map((k) => [keyIdOf(k), 'write'] as const),
      ...next.readOnlyKeys.map((k) => [keyIdOf(k), 'read'] as const),
    ]);
    const sessionsClosed = (await mcpHttp?.revoke((s) => !config.auth.required || scopes.get(s.keyId ?? '') === s.scope)) ?? 0;
    const out = { keys: next.keys.length, readOnlyKeys: next.readOnlyKeys.length, metricsKey: next.metricsKey !== undefined, sessionsClosed };
    log.info({ keys: out.keys, read_only_keys: out.readOnlyKeys, metrics_key: out.metricsKey, sessions_closed: sessionsClosed }, 'keys reloaded');
    return out;
  };
  const cleanup = async () => {
    // Background work first: it would otherwise run on into a closed pool.
    await services?.stop();
    await sql.end({ timeout: 5 }).catch(() => undefined);
    await embedded?.release();
  };
  try {
    if (config.db.pooler === 'pgbouncer') await checkPinnedByRole(sql, config.db.schema);
    await migrate(sql, config.db.schema, { log }).catch((err: Error) => {
      // PgBouncer refuses the startup parameters that pin the schema: say which setting fixes it.
      if (/unsupported startup parameter/i.test(err.message)) {
        throw new ConfigError([
          { variable: 'DB_POOLER', message: `the server refused a startup parameter (${err.message}): behind PgBouncer set DB_POOLER=pgbouncer` },
        ]);
      }
      throw err;
    });
    // The role must own the schema its connections resolve to: never serve another schema's data.
    const problem = await schemaIdentityProblem(sql, config.db.schema);
    if (problem) throw new ConfigError([{ variable: 'DATABASE_URL', message: problem }]);
    const plugins = await loadPlugins(config.plugins, log);
    // The index thread: one connection of its own (counted with the pool's by application_name).
    services = createServices(sql, config, plugins, log, url, index ? { ...poolOptions, max: index } : undefined);
    // Webhook endpoints are registered (their start cursor taken) before the first write is served.
    await services.webhooks.ready();
    if (config.auth.required && config.rest.enabled) {
      if (config.auth.keys.length === 0 && config.auth.readOnlyKeys.length === 0) {
        log.warn('API_AUTH_REQUIRED is true but no API_KEYS are set: every authenticated route answers 503');
      } else if (config.auth.readOnlyKeys.length === 0) {
        log.warn('no read-only keys configured (API_KEYS_READONLY): every key can write');
      }
    }
    if (config.mcp.transport !== 'http') {
      return { config, log, sql, services, reloadKeys, stop: cleanup };
    }
    const buildInfo = getBuildInfo();
    const mcp = lazyMcpHttp({
      config,
      log,
      services,
      buildInfo,
      production: config.production,
      basePath: config.rest.basePath,
      validation: config.validation,
      maxSubscriptions: config.mcp.maxSubscriptions,
    });
    mcpHttp = mcp;
    const metrics = createMetrics({ services, mcp: () => mcp.stats() });
    const app = buildApp({ config, log, services, buildInfo, mount: mcp.mount, metrics });
    const server = await new Promise<Server>((resolve, reject) => {
      const s = createAppServer(app).listen(config.mcp.port, config.mcp.host, () => resolve(s));
      s.once('error', reject);
    });
    // The keep-alive race: a server that closes an idle connection just as the client sends its
    // next request on it leaves that request without an answer (UND_ERR_SOCKET / ECONNRESET; the
    // density bench's resets). Clients that honour `Keep-Alive: timeout=N` (undici/fetch, Node's
    // agent, most libraries) drop idle sockets a little before N, so we advertise a short N but
    // keep the socket much longer: a client whose event loop runs up to ~25 s late under load
    // still closes first. Below headersTimeout (60 s), as Node requires for keep-alive to work.
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    const sendTimeout = createSendTimeout(config.limits.sendTimeoutMs, log);
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      sendTimeout(res);
      if (req.httpVersion === '1.1' && !/\bclose\b/i.test(req.headers.connection ?? '')) res.setHeader('Keep-Alive', `timeout=${KEEP_ALIVE_HINT_S}`);
    });
    const port = (server.address() as AddressInfo).port;
    const host = config.mcp.host.includes(':') ? `[${config.mcp.host}]` : config.mcp.host;
    const baseUrl = `http://${host}:${port}`;
    log.info({ url: baseUrl, api: `${baseUrl}${config.rest.basePath}`, mcp: `${baseUrl}/mcp` }, 'listening');
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        // Stop accepting, let in-flight requests finish (bounded), then close the pool. MCP sessions
        // close first: their open SSE streams would otherwise hold the server until the timeout.
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        await mcp.close();
        // Change streams end with their end event (they would otherwise hold the server too).
        services?.changes.stop();
        server.closeIdleConnections();
        // A keep-alive connection whose response finishes after close() turns idle and would stay
        // open until keepAliveTimeout: close such connections as they turn idle.
        const reaper = setInterval(() => server.closeIdleConnections(), 50);
        const timer = setTimeout(() => server.closeAllConnections(), config.shutdownTimeoutMs);
        await closed;
        clearTimeout(timer);
        clearInterval(reaper);
        await cleanup();
        log.info('stopped');
      })());
    return { config, log, sql, services, server, mcp, port, url: baseUrl, reloadKeys, stop };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/**
 * A standby (`--standby`, started by vcon-launch over IPC) has loaded every module and waits for
 * `{type: 'start', env, runAs?}`: a crashed group comes back without a cold start, and a group
 * started as its own OS user gets its keys and passwords here rather than in its environment.
 */
function waitForStart(): Promise<Record<string, string | undefined>> {
  return new Promise((resolve) => {
    // The supervisor is gone: there is nothing to stand by for.
    const onDisconnect = () => process.exit(0);
    const onMessage = (m: unknown) => {
      const msg = m as { type?: string; env?: Record<string, string | undefined>; runAs?: { uid: number; gid: number } } | null;
      if (msg?.type !== 'start' || !msg.env) return;
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
      // A standby of a root launcher becomes the group's unprivileged user before it reads anything
      // of the group's (supplementary groups first: they would survive the switch).
      if (msg.runAs) {
        process.setgroups?.([]);
        process.setgid?.(msg.runAs.gid);
        process.setuid?.(msg.runAs.uid);
      }
      resolve(msg.env);
    };
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
  });
}

/**
 * `{type: 'reload', env}` from the launcher's supervisor (`vcon-launch reload`): the instance takes
 * the keys of `env` and answers `{type: 'reloaded', ok, ...}`. Nothing else of `env` is read.
 */
function listenForReloads(instance: Instance): void {
  // The supervisor may be gone by the time the answer is ready: a closed channel is not an error here.
  const answer = (msg: object) => process.send?.(msg, undefined, undefined, () => undefined);
  process.on('message', (m: unknown) => {
    const msg = m as { type?: string; env?: EnvInput } | null;
    if (msg?.type !== 'reload' || !msg.env) return;
    instance.reloadKeys(msg.env).then(
      (r) => answer({ type: 'reloaded', ok: true, ...r }),
      (err: Error) => answer({ type: 'reloaded', ok: false, error: err.message }),
    );
  });
}

/** The bin: load config, start, report readiness over IPC, stop gracefully on signals. */
export async function runMain(): Promise<void> {
  const standbyEnv = process.argv.includes('--standby') && process.send ? await waitForStart() : undefined;
  let config: Config;
  try {
    config = loadConfig(standbyEnv);
  } catch (err) {
    process.stderr.write(`vcon-server: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const log = createLogger(config);
  // Launched detached, stderr is a pipe to the supervisor: if it goes away, writes there fail with
  // EPIPE, which must not end the process (the logger moves to the log file's descriptor).
  if (config.logs.fallbackFd !== undefined) for (const s of [process.stdout, process.stderr]) s.on('error', () => undefined);
  let instance: Instance;
  try {
    instance = await startInstance(config, { log });
  } catch (err) {
    const known = err instanceof MigrationError || err instanceof PluginLoadError || err instanceof ConfigError;
    log.fatal({ err: known ? (err as Error).message : err }, 'start failed');
    process.stderr.write(`vcon-server: start failed: ${(err as Error).message}\n`);
    log.flush();
    process.exit(1);
  }
  if (process.send) {
    process.send({
      type: 'ready',
      pid: process.pid,
      port: instance.port ?? null,
      url: instance.url ?? null,
      schema: config.db.schema,
      label: config.label,
      // The user it runs as, from the process itself (a standby switched users on its start message).
      uid: process.getuid?.() ?? null,
    });
  }
  if (process.send) listenForReloads(instance);
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), config.shutdownTimeoutMs + 5_000);
    force.unref();
    instance.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  if (config.mcp.transport === 'stdio') {
    const { serveStdio } = await import('./mcp/stdio.js');
    await serveStdio(instance);
  }
}

const invokedDirectly = (() => {
  try {
    return realpathSync(process.argv[1] ?? '') === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
})();
if (invokedDirectly) void runMain();
