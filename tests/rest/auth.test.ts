import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let uuid: string;
beforeAll(async () => {
  s = await startTestServer({ API_KEYS: `${KEY},both-key`, API_KEYS_READONLY: `${RO_KEY},both-key` });
  uuid = (await s.api('/vcons', { method: 'POST', json: { subject: 'auth', parties: [{ name: 'P' }] } })).body.uuid;
  await s.api(`/vcons/${uuid}/tags/k`, { method: 'PUT', json: { value: 'v' } });
});
afterAll(() => s?.close());

const raw = (path: string, init: RequestInit = {}) => fetch(`${s.base}${path}`, init);

describe('authentication', () => {
  it('401s a missing or invalid key with WWW-Authenticate: Bearer', async () => {
    for (const headers of [{}, { authorization: 'Bearer nope' }, { authorization: 'Basic abc' }, { authorization: 'Bearer' }] as Record<
      string,
      string
    >[]) {
      const r = await raw('/vcons', { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      const body = await r.json();
      expect(body).toMatchObject({ success: false, error: 'unauthorized' });
    }
  });

  it('accepts the Bearer scheme in any case and with leading whitespace', async () => {
    for (const h of [`Bearer ${KEY}`, `bearer ${KEY}`, `BEARER ${KEY}`, `   Bearer ${KEY}`]) {
      expect((await raw('/vcons', { headers: { authorization: h } })).status).toBe(200);
    }
  });

  it('leaves /health, /version, /schema and /examples open', async () => {
    for (const p of ['/health', '/version', '/schema', '/examples/minimal']) expect((await raw(p)).status).toBe(200);
  });

  it('gives a read-only key every read and 403 on every write route, changing nothing', async () => {
    const ro = { authorization: `Bearer ${RO_KEY}` };
    for (const p of [
      '/vcons',
      `/vcons/${uuid}`,
      `/vcons/${uuid}/analysis`,
      `/vcons/${uuid}/attachments`,
      `/vcons/${uuid}/tags`,
      '/tags',
      '/tags/search?tags={"k":"v"}',
      '/discovery/analysis/types',
    ]) {
      expect((await raw(p, { headers: ro })).status, p).toBe(200);
    }
    const json = { ...ro, 'content-type': 'application/json' };
    const writes: [string, string, unknown][] = [
      ['POST', '/vcons', { subject: 'x' }],
      ['POST', '/vcons/batch', [{ subject: 'x' }]],
      ['PATCH', `/vcons/${uuid}`, { subject: 'changed' }],
      ['DELETE', `/vcons/${uuid}`, undefined],
      ['POST', `/vcons/${uuid}/dialog`, { type: 'text' }],
      ['POST', `/vcons/${uuid}/analysis`, { type: 'x', vendor: 'v' }],
      ['POST', `/vcons/${uuid}/attachments`, { purpose: 'x' }],
      ['PUT', `/vcons/${uuid}/tags/k`, { value: 'changed' }],
      ['DELETE', `/vcons/${uuid}/tags/k`, undefined],
      ['DELETE', `/vcons/${uuid}/tags`, undefined],
    ];
    const before = await s.api(`/vcons/${uuid}`);
    for (const [method, path, body] of writes) {
      const r = await raw(path, { method, headers: json, body: body === undefined ? undefined : JSON.stringify(body) });
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(((await r.json()) as any).error).toBe('forbidden');
    }
    const after = await s.api(`/vcons/${uuid}`);
    expect(after.body.vcon).toEqual(before.body.vcon);
    const [{ n }] = await s.instance.sql<{ n: number }[]>`select count(*)::int as n from vcons`;
    expect(n).toBe(1);
  });

  it('treats a key listed in both variables as read-only', async () => {
    const r = await raw('/vcons', { method: 'POST', headers: { authorization: 'Bearer both-key', 'content-type': 'application/json' }, body: '{}' });
    expect(r.status).toBe(403);
  });

  it('reads the key from x-api-key when API_KEY_HEADER=x-api-key', async () => {
    const x = await startTestServer({ API_KEY_HEADER: 'x-api-key' });
    try {
      expect((await fetch(`${x.base}/vcons`, { headers: { 'x-api-key': KEY } })).status).toBe(200);
      expect((await fetch(`${x.base}/vcons`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(401);
      const pre = await fetch(`${x.base}/vcons`, {
        method: 'OPTIONS',
        headers: { origin: 'https://a.example.com', 'access-control-request-method': 'POST' },
      });
      expect(pre.headers.get('access-control-allow-headers')).toMatch(/x-api-key/i);
    } finally {
      await x.close();
    }
  });

  it('answers 503 auth_not_configured when auth is required and no key exists; off with API_AUTH_REQUIRED=false', async () => {
    const none = await startTestServer({ API_KEYS: '', API_KEYS_READONLY: '' });
    try {
      const r = await fetch(`${none.base}/vcons`);
      expect(r.status).toBe(503);
      expect(((await r.json()) as any).error).toBe('auth_not_configured');
      expect((await fetch(`${none.base}/health`)).status).toBe(200);
    } finally {
      await none.close();
    }
    const open = await startTestServer({ API_AUTH_REQUIRED: 'false', API_KEYS: '' });
    try {
      expect((await fetch(`${open.base}/vcons`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(201);
    } finally {
      await open.close();
    }
  });
});

describe('CORS', () => {
  it('answers preflights before auth with the allowed methods and headers', async () => {
    const r = await raw('/vcons', { method: 'OPTIONS', headers: { origin: 'https://x.example.com', 'access-control-request-method': 'DELETE' } });
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('access-control-allow-methods')).toBe('GET, POST, PUT, PATCH, DELETE, OPTIONS');
    expect(r.headers.get('access-control-allow-headers')).toBe('Content-Type, Authorization');
  });

  it('adds no CORS headers to a request without Origin, and exposes headers to one with it', async () => {
    const plain = await raw('/health');
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
    expect(plain.headers.get('access-control-expose-headers')).toBeNull();
    const cross = await raw('/health', { headers: { origin: 'https://x.example.com' } });
    expect(cross.headers.get('access-control-allow-origin')).toBe('*');
    expect(cross.headers.get('access-control-expose-headers')).toMatch(/X-Request-Id/);
  });

  it('echoes only listed origins', async () => {
    const c = await startTestServer({ CORS_ORIGIN: 'https://a.example.com,https://b.example.com' });
    try {
      const ok = await fetch(`${c.base}/health`, { headers: { origin: 'https://b.example.com' } });
      expect(ok.headers.get('access-control-allow-origin')).toBe('https://b.example.com');
      expect(ok.headers.get('vary')).toMatch(/Origin/);
      const no = await fetch(`${c.base}/health`, { headers: { origin: 'https://evil.example.com' } });
      expect(no.headers.get('access-control-allow-origin')).toBeNull();
      // Not cross-origin: no CORS headers, but caches still learn that the answer varies by Origin.
      const plain = await fetch(`${c.base}/health`);
      expect(plain.headers.get('access-control-expose-headers')).toBeNull();
      expect(plain.headers.get('vary')).toMatch(/Origin/);
    } finally {
      await c.close();
    }
  });
});

describe('key handling', () => {
  it('never writes keys to the logs', async () => {
    const lines: string[] = [];
    const { parseConfig } = await import('../../src/config.js');
    const { startInstance } = await import('../../src/main.js');
    const { createLogger } = await import('../../src/logger.js');
    const { databaseUrl, adminSql, testSchemaName } = await import('../helpers/db.js');
    const schema = testSchemaName('logs');
    const config = parseConfig({
      MCP_TRANSPORT: 'http',
      MCP_HTTP_PORT: '0',
      DATABASE_URL: databaseUrl(),
      SUPABASE_DB_SCHEMA: schema,
      API_KEYS: 'super-secret-key-1',
      LOG_LEVEL: 'info',
    });
    const log = createLogger(config, { write: (l: string) => lines.push(l) });
    const inst = await startInstance(config, { log });
    try {
      await fetch(`${inst.url}/api/v1/vcons?party_email=someone@example.com`, { headers: { authorization: 'Bearer super-secret-key-1' } });
      await fetch(`${inst.url}/api/v1/vcons`, { headers: { authorization: 'Bearer wrong-secret-key-2' } });
      await fetch(`${inst.url}/api/v1/vcons/${randomUUID()}`, { headers: { 'x-api-key': 'super-secret-key-1' } });
    } finally {
      await inst.stop();
      const admin = adminSql();
      await admin.unsafe(`drop schema if exists "${schema}" cascade`);
      await admin.end();
    }
    const all = lines.join('\n');
    expect(all).toMatch(/request completed/);
    expect(all).not.toMatch(/super-secret-key-1|wrong-secret-key-2|someone@example\.com/);
    // The access line (written through a child logger without the root's redaction): the root's
    // bindings, then the request, its status and time, in this order.
    const access = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request completed');
    expect(access.map((l) => [l.level, (l.res as { statusCode: number }).statusCode])).toEqual([
      [30, 200],
      [40, 401],
      [40, 401],
    ]);
    for (const l of access) expect(Object.keys(l)).toEqual(['level', 'time', 'pid', 'instance', 'schema', 'req', 'res', 'responseTime', 'msg']);
    expect(access[0]).toMatchObject({ schema, req: { method: 'GET', path: '/api/v1/vcons' } });
    expect(Object.keys(access[0].req as object)).toEqual(['id', 'method', 'path']);
  });
});
