#!/usr/bin/env node
// vcon-server: one group's instance. Composition root: config → logger → sql → migrate → services
// → express app (REST + MCP over HTTP) or MCP over stdio.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger, type Logger } from './logger.js';
import { getBuildInfo } from './version.js';
import { createSql, type Sql } from './db/client.js';
import { migrate, MigrationError } from './db/migrate.js';
import { acquireEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded.js';
import { withCredentials } from './db/roles.js';
import { createTransactor, createVconRepo } from './db/vcon-repo.js';
import { createTagRepo } from './db/tag-repo.js';
import { createDiscoveryRepo } from './db/discovery-repo.js';
import { createIntrospectionRepo } from './db/introspection-repo.js';
import { createAnalyzeRepo } from './db/analyze-repo.js';
import { createAnalyticsRepo } from './db/analytics-repo.js';
import { loadPlugins, PluginLoadError, type Plugin } from './plugins/index.js';
import { createHealthService } from './services/health-service.js';
import { createVconService } from './services/vcon-service.js';
import { createTagService } from './services/tag-service.js';
import { createDiscoveryService } from './services/discovery-service.js';
import { createMetaService } from './services/meta-service.js';
import { createDatabaseService } from './services/database-service.js';
import { createAnalyticsService } from './services/analytics-service.js';
import type { Services } from './services/index.js';
import { createSearchRepo, createVectorWriter } from './db/search-repo.js';
import { createEmbeddingProvider } from './embeddings/index.js';
import { createEmbeddingWorker, createSearchService } from './services/search-service.js';
import { buildApp } from './http/app.js';
import { createMcpHttp, type McpHttp } from './mcp/http.js';

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
  stop(): Promise<void>;
}

/** Wires the services of one instance over a pinned pool. Exported for tests and tools. */
export function createServices(sql: Sql, config: Config, plugins: readonly Plugin[] = [], log?: Logger, databaseUrl = config.db.url): Services {
  const buildInfo = getBuildInfo();
  // Search (issue #5): embeddings are written by a DerivedWriter inside every write transaction.
  const searchLog = (log ?? createLogger(config)).child({ component: 'search' });
  const embedder = createEmbeddingProvider(config, searchLog);
  const vectorWriter = createVectorWriter(embedder);
  const transact = createTransactor(sql, [vectorWriter]);
  const vcons = createVconService({ repo: createVconRepo(sql, [vectorWriter]), transact, plugins });
  const searchRepo = createSearchRepo(sql);
  // An inline provider loads its word vectors on first use (~0.5 s once, ~45 MB): an idle group
  // stays small and ten groups start fast. A remote provider drains its queue in the background.
  if (!embedder.inline) {
    createEmbeddingWorker({
      repo: searchRepo,
      transact: (fn) => sql.begin((tx) => fn(createSearchRepo(tx))) as never,
      provider: embedder,
      log: searchLog,
    }).start();
  }
  return {
    health: createHealthService({
      ping: async () => {
        await sql`select 1`;
      },
      schema: config.db.schema,
      label: config.label,
      buildInfo,
    }),
    vcons,
    tags: createTagService({ vcons, repo: createTagRepo(sql), plugins }),
    discovery: createDiscoveryService({ repo: createDiscoveryRepo(sql), plugins }),
    meta: createMetaService(),
    search: createSearchService({ repo: searchRepo, provider: embedder, plugins }),
    database: createDatabaseService({
      repo: createIntrospectionRepo(sql, config.db.schema),
      // The server's URL with the analyze role's name and password, or the pool's own identity.
      analyzer: createAnalyzeRepo({
        url: withCredentials(databaseUrl ?? '', config.db.analyze ? undefined : config.db.user, config.db.analyze ? undefined : config.db.password),
        schema: config.db.schema,
        user: config.db.analyze?.user,
        password: config.db.analyze?.password,
        applicationName: `vcon-${config.label ?? config.db.schema}-analyze`.slice(0, 60),
      }),
      analyzeTimeoutMs: Math.min(config.db.statementTimeoutMs, 10_000),
    }),
    analytics: createAnalyticsService({ repo: createAnalyticsRepo(sql), plugins }),
    plugins,
  };
}

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
  const sql = createSql({
    url,
    schema: config.db.schema,
    max: config.db.poolMax,
    applicationName: `vcon-${config.label ?? config.db.schema}`.slice(0, 60),
    // No request may hang on a runaway statement: every statement of the pool is bounded.
    statementTimeoutMs: config.db.statementTimeoutMs,
  });
  const cleanup = async () => {
    await sql.end({ timeout: 5 }).catch(() => undefined);
    await embedded?.release();
  };
  try {
    await migrate(sql, config.db.schema, { log });
    const plugins = await loadPlugins(config.plugins, log);
    const services = createServices(sql, config, plugins, log, url);
    if (config.auth.required && config.rest.enabled) {
      if (config.auth.keys.length === 0 && config.auth.readOnlyKeys.length === 0) {
        log.warn('API_AUTH_REQUIRED is true but no API_KEYS are set: every authenticated route answers 503');
      } else if (config.auth.readOnlyKeys.length === 0) {
        log.warn('no read-only keys configured (API_KEYS_READONLY): every key can write');
      }
    }
    if (config.mcp.transport !== 'http') {
      return { config, log, sql, services, stop: cleanup };
    }
    const buildInfo = getBuildInfo();
    const mcp = createMcpHttp({ config, log, services, buildInfo, production: config.production, basePath: config.rest.basePath });
    const app = buildApp({ config, log, services, buildInfo, mount: mcp.mount });
    const server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(config.mcp.port, config.mcp.host, () => resolve(s));
      s.once('error', reject);
    });
    server.keepAliveTimeout = 5_000;
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
    return { config, log, sql, services, server, mcp, port, url: baseUrl, stop };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/**
 * A standby (`--standby`, started by vcon-launch's foreground supervisor over IPC) has loaded every
 * module and waits for `{type: 'start', env}`: a crashed group comes back without a cold start.
 */
function waitForStart(): Promise<Record<string, string | undefined>> {
  return new Promise((resolve) => {
    // The supervisor is gone: there is nothing to stand by for.
    const onDisconnect = () => process.exit(0);
    const onMessage = (m: unknown) => {
      const msg = m as { type?: string; env?: Record<string, string | undefined> } | null;
      if (msg?.type !== 'start' || !msg.env) return;
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
      resolve(msg.env);
    };
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
  });
}

/** The bin: load config, start, report readiness over IPC, stop gracefully on signals. */
async function runMain(): Promise<void> {
  const standbyEnv = process.argv.includes('--standby') && process.send ? await waitForStart() : undefined;
  let config: Config;
  try {
    config = loadConfig(standbyEnv);
  } catch (err) {
    process.stderr.write(`vcon-server: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const log = createLogger(config);
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
    process.send({ type: 'ready', pid: process.pid, port: instance.port ?? null, url: instance.url ?? null, schema: config.db.schema, label: config.label });
  }
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
