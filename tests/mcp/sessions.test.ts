// Session limits and expiry of /mcp, and an in-process plugin object, on an app built by hand
// (startTestServer takes env only; these need createMcpHttp options and a plugin object).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Plugin } from '../../src/plugins/hooks.js';
import { createTestSchema, type TestSchema } from '../helpers/db.js';
import { KEY } from '../helpers/server.js';
import { connectHttp, textOf } from './helpers.js';
import { serveByHand, type HandBuilt } from './hand-built.js';

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

type Running = HandBuilt;

/** An app with its own /mcp: the idle test gets a short idle timeout of its own, so a slow moment between two calls of another test never expires that test's session. */
const startApp = (idleTimeoutMs: number): Promise<Running> => serveByHand(t, [inProcess], { idleTimeoutMs, maxSessions: 2 });

let main: Running;
let url: string;

beforeAll(async () => {
  t = await createTestSchema('mcps');
  main = await startApp(60 * 60_000);
  ({ url } = main);
});

afterAll(async () => {
  await main?.close();
  await t?.drop();
});

describe('MCP HTTP session limits', () => {
  it("runs an in-process plugin object's hooks on tool calls (veto becomes a forbidden result)", async () => {
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

  // Caps and eviction (per key, per instance, busy sessions, 429/503): session-caps.test.ts.

  it('closes sessions idle longer than idleTimeoutMs; their id then answers 404', async () => {
    const short = await startApp(1_000);
    const { url, mcp } = short;
    try {
      // Connecting at all proves the session existed (the handshake is two requests on it).
      const s = await connectHttp(url, KEY);
      const sid = s.transport.sessionId!;
      await vi.waitFor(() => expect(mcp.stats().sessions).toBe(0), { timeout: 60_000, interval: 50 });
      const res = await fetch(`${url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${KEY}`,
          'mcp-session-id': sid,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }),
      });
      expect(res.status).toBe(404);
      await s.client.close();
    } finally {
      await short.close();
    }
  });
});
