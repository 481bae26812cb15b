// An instance's app built by hand around createMcpHttp, for tests that need its options (session
// caps, idle timeout) or in-process plugin objects, which startTestServer (env only) can't pass.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createServices } from '../../src/main.js';
import { buildApp } from '../../src/http/app.js';
import { createMcpHttp, type McpHttp, type McpHttpOptions } from '../../src/mcp/http.js';
import type { Plugin } from '../../src/plugins/hooks.js';
import { getBuildInfo } from '../../src/version.js';
import { databaseUrl, type TestSchema } from '../helpers/db.js';
import { KEY, RO_KEY } from '../helpers/server.js';

export interface HandBuilt {
  url: string;
  mcp: McpHttp;
  close(): Promise<void>;
}

type McpOptions = Pick<McpHttpOptions, 'idleTimeoutMs' | 'maxSessions' | 'sessionsPerKey' | 'sessionsPerReadOnlyKey'>;

/** Serves REST and MCP on 127.0.0.1 (any port) over the given schema, with the test keys. */
export async function serveByHand(t: TestSchema, plugins: Plugin[], options: McpOptions = {}): Promise<HandBuilt> {
  const config = parseConfig({
    MCP_TRANSPORT: 'http',
    DATABASE_URL: databaseUrl(),
    SUPABASE_DB_SCHEMA: t.schema,
    API_KEYS: KEY,
    API_KEYS_READONLY: RO_KEY,
    LOG_LEVEL: 'silent',
  });
  const log = createLogger(config);
  const services = createServices(t.sql, config, plugins);
  const buildInfo = getBuildInfo();
  const mcp = createMcpHttp({
    config,
    log,
    services,
    buildInfo,
    production: false,
    basePath: config.rest.basePath,
    validation: config.validation,
    maxSubscriptions: config.mcp.maxSubscriptions,
    ...options,
  });
  const app = buildApp({ config, log, services, buildInfo, mount: mcp.mount });
  const server = await new Promise<Server>((resolve) => {
    const srv = app.listen(0, '127.0.0.1', () => resolve(srv));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    mcp,
    async close() {
      await mcp.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
