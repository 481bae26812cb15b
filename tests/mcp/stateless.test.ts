// MCP_HTTP_STATELESS=true: Streamable HTTP without sessions, for replicas behind a balancer that
// may send each request anywhere. Every POST stands alone with the scope of the key it carries.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOLS } from '../../src/mcp/tools.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from './helpers.js';

const READ_TOOLS = TOOLS.filter((t) => t.scope === 'read')
  .map((t) => t.name)
  .sort();

let s: TestServer;
let rw: HttpSession;
let ro: HttpSession;

beforeAll(async () => {
  s = await startTestServer({ MCP_HTTP_STATELESS: 'true' });
  [rw, ro] = await Promise.all([connectHttp(s.instance.url!, KEY), connectHttp(s.instance.url!, RO_KEY)]);
});
afterAll(async () => {
  await Promise.all([rw?.client.close(), ro?.client.close()]);
  await s?.close();
});

/** One JSON-RPC request POSTed on its own: no initialize before it, no session id. */
async function lonePost(key: string, body: unknown) {
  const res = await fetch(`${s.instance.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, session: res.headers.get('mcp-session-id'), body: (await res.json()) as any };
}

const vcon = (subject: string) => ({ vcon: '0.3.0', subject, parties: [{ name: 'Ann' }] });

describe('MCP over HTTP without sessions', () => {
  it('serves the SDK client without handing out a session id', async () => {
    expect(rw.transport.sessionId).toBeUndefined();
    const created = await rw.call('create_vcon', { vcon: vcon('stateless one') });
    expect(created.isError).toBeFalsy();
    const got = await rw.call('get_vcon', { uuid: created.structuredContent.uuid });
    expect(got.structuredContent.vcon.subject).toBe('stateless one');
    expect(s.instance.mcp?.stats().sessions).toBe(0);
  });

  it('answers a tool call that arrives alone, as a balancer may deliver it to any replica', async () => {
    const r = await lonePost(KEY, {
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'create_vcon', arguments: { vcon: vcon('alone') } },
    });
    expect(r.status).toBe(200);
    expect(r.session).toBeNull();
    expect(r.body.id).toBe(7);
    const uuid = r.body.result.structuredContent.uuid;
    const read = await s.api(`/vcons/${uuid}`);
    expect(read.body.vcon.subject).toBe('alone');
  });

  it('keeps read-only keys read-only: write tools are neither listed nor callable', async () => {
    expect((await ro.client.listTools()).tools.map((t) => t.name).sort()).toEqual(READ_TOOLS);
    const before = (await s.api('/vcons?limit=100')).body.data.length;
    const viaClient = await ro.client.callTool({ name: 'create_vcon', arguments: { vcon: vcon('ro client') } }).catch((e: Error) => e);
    expect(viaClient instanceof Error || (viaClient as { isError?: boolean }).isError).toBe(true);
    const alone = await lonePost(RO_KEY, {
      jsonrpc: '2.0',
      id: 8,
      method: 'tools/call',
      params: { name: 'delete_vcon', arguments: { uuid: '00000000-0000-4000-8000-000000000001' } },
    });
    expect(alone.body.error ?? alone.body.result?.isError).toBeTruthy();
    expect(JSON.stringify(alone.body)).toMatch(/delete_vcon/);
    expect((await s.api('/vcons?limit=100')).body.data.length).toBe(before);
  });

  it('answers GET and DELETE on /mcp with 405 in the one error format', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${s.instance.url}/mcp`, { method, headers: { authorization: `Bearer ${KEY}`, accept: 'text/event-stream' } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST, OPTIONS');
      expect(await res.json()).toMatchObject({ success: false, error: 'method_not_allowed' });
    }
  });

  it('still requires a key', async () => {
    const res = await fetch(`${s.instance.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(await res.json()).toMatchObject({ error: 'unauthorized', message: 'API key missing' });
  });
});
