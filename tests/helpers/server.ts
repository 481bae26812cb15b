import { parseConfig, type EnvInput } from '../../src/config.js';
import { startInstance, type Instance } from '../../src/main.js';
import { createLogger } from '../../src/logger.js';
import type { DestinationStream } from 'pino';
import { adminSql, databaseUrl, testSchemaName } from './db.js';
import { checkAgainstDocument } from './openapi-check.js';

export const KEY = 'test-key-rw';
export const RO_KEY = 'test-key-ro';

/** One answered request, as `api()` saw it (for the opt-in OpenAPI response check). */
export interface ApiExchange {
  method: string;
  path: string;
  status: number;
  headers: Headers;
  body: any;
}

export interface TestServerOptions {
  /** Called with every `api()` response; throw to fail the request (tests/openapi uses it). */
  onResponse?: (x: ApiExchange) => void;
  /** Where the instance's log lines go (with LOG_LEVEL in env); none by default. */
  logTo?: DestinationStream;
}

export interface TestServer {
  instance: Instance;
  base: string;
  schema: string;
  /** fetch against the REST base with the read-write key unless headers say otherwise. */
  api(path: string, init?: RequestInit & { json?: unknown; key?: string | null }): Promise<{ status: number; headers: Headers; body: any }>;
  close(): Promise<void>;
}

/** Starts a real instance (HTTP, port 0) in its own throwaway schema. */
export async function startTestServer(env: EnvInput = {}, opts: TestServerOptions = {}): Promise<TestServer> {
  const schema = (env.SUPABASE_DB_SCHEMA as string | undefined) ?? testSchemaName('srv');
  const config = parseConfig({
    MCP_TRANSPORT: 'http',
    MCP_HTTP_PORT: '0',
    DATABASE_URL: databaseUrl(),
    SUPABASE_DB_SCHEMA: schema,
    API_KEYS: KEY,
    API_KEYS_READONLY: RO_KEY,
    LOG_LEVEL: 'silent',
    VCON_INSTANCE_LABEL: `label-${schema}`,
    // A request waits for a pool turn up to a minute, not 5 s: on a loaded machine a burst of test
    // requests would otherwise meet database_busy. Tests of that answer set their own bound.
    DB_QUEUE_TIMEOUT_MS: '60000',
    ...env,
  });
  const dropSchema = async () => {
    if (env.SUPABASE_DB_SCHEMA) return;
    const admin = adminSql();
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await admin.end();
  };
  let instance: Instance;
  try {
    instance = await startInstance(config, { log: createLogger(config, opts.logTo) });
  } catch (err) {
    // A start that fails after migrating (a plugin that cannot load) leaves no schema behind.
    await dropSchema();
    throw err;
  }
  const base = `${instance.url}${config.rest.basePath}`;
  // VCON_OPENAPI_CHECK=1 validates every api() response of any suite against GET /openapi.json.
  const onResponse = opts.onResponse ?? (process.env.VCON_OPENAPI_CHECK ? await checkAgainstDocument(base) : undefined);
  return {
    instance,
    base,
    schema,
    async api(path, init = {}) {
      const headers = new Headers(init.headers);
      const key = init.key === undefined ? KEY : init.key;
      if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
      let body = init.body;
      if (init.json !== undefined) {
        body = JSON.stringify(init.json);
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      }
      const res = await fetch(`${base}${path}`, { ...init, headers, body });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        /* not JSON */
      }
      onResponse?.({ method: init.method ?? 'GET', path, status: res.status, headers: res.headers, body: parsed });
      return { status: res.status, headers: res.headers, body: parsed };
    },
    async close() {
      await instance.stop();
      await dropSchema();
    },
  };
}
