// Session limits and expiry of /mcp, and an in-process plugin object, on an app built by hand
// (startTestServer takes env only; these need createMcpHttp options and a plugin object).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createServices } from '../../src/main.js';
import { buildApp } from '../../src/http/app.js';
import { createMcpHttp, type McpHttp } from '../../src/mcp/http.js';
import type { Plugin } from '../../src/plugins/hooks.js';
import { getBuildInfo } from '../../src/version.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { KEY, RO_KEY } from '../helpers/server.js';
import { connectHttp, textOf } from './helpers.js';

const seen: string[] = [];
const inProcess: Plugin = {
  name: 'in-process',
  version: '0.0.1',
  hooks: {
    beforeDelete(uuid, ctx) {
      seen.push(`beforeDelete:${ctx.transport}:${ctx.scope}`);
      throw new Error(`deleting ${uuid} is disabled here`);
    },
    afterCreate(_vcon, ctx) {
      seen.push(`afterCreate:${ctx.transport}:${ctx.scope}`);
    },
  },
};

let t: TestSchema;
let server: Server;
let mcp: McpHttp;
let url: string;

beforeAll(async () => {
  t = await createTestSchema('mcps');
  const config = parseConfig({
    MCP_TRANSPORT: 'http',
    DATABASE_URL: databaseUrl(),
    SUPABASE_DB_SCHEMA: t.schema,
    API_KEYS: KEY,
    API_KEYS_READONLY: RO_KEY,
    LOG_LEVEL: 'silent',
  });
  const log = createLogger(config);
  const services = createServices(t.sql, config, [inProcess]);
  const buildInfo = getBuildInfo();
  mcp = createMcpHttp({ config, log, services, buildInfo, production: false, basePath: config.rest.basePath, idleTimeoutMs: 400, maxSessions: 2 });
  const app = buildApp({ config, log, services, buildInfo, mount: mcp.mount });
  server = await new Promise<Server>((resolve) => {
    const srv = app.listen(0, '127.0.0.1', () => resolve(srv));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await mcp?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await t?.drop();
});

describe('MCP HTTP session limits', () => {
  it('runs an in-process plugin object\'s hooks on tool calls (veto becomes a forbidden result)', async () => {
    const s = await connectHttp(url, KEY);
    try {
      const c = await s.call('create_vcon', { vcon: { subject: 'in-process' } });
      expect(seen).toContain('afterCreate:mcp:write');
      const del = await s.call('delete_vcon', { uuid: c.structuredContent.uuid });
      expect(del.isError).toBe(true);
      expect(textOf(del)).toMatch(/^forbidden: in-process: deleting .* is disabled here/);
      expect((await s.call('get_vcon', { uuid: c.structuredContent.uuid })).isError).toBeFalsy();
    } finally {
      await s.close();
    }
  });

  it('refuses a session beyond maxSessions with 503, and frees the slot when one closes', async () => {
    const a = await connectHttp(url, KEY);
    const b = await connectHttp(url, RO_KEY);
    try {
      await expect(connectHttp(url, KEY)).rejects.toThrow(/503|Too many open MCP sessions/);
      await a.close();
      const c = await connectHttp(url, KEY);
      expect(mcp.stats()).toMatchObject({ sessions: 2, read: 1, write: 1 });
      await c.close();
    } finally {
      await b.close();
    }
  });

  it('closes sessions idle longer than idleTimeoutMs; their id then answers 404', async () => {
    const s = await connectHttp(url, KEY);
    const sid = s.transport.sessionId!;
    expect(mcp.stats().sessions).toBe(1);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(mcp.stats().sessions).toBe(0);
    const res = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEY}`, 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }),
    });
    expect(res.status).toBe(404);
    await s.client.close();
  });
});
