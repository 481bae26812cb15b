import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ REST_API_BODY_LIMIT: '64kb' });
});
afterAll(() => s?.close());

const expectErrorFormat = (body: any, code: string) => {
  expect(body).toMatchObject({ success: false, error: code });
  expect(typeof body.message).toBe('string');
  expect(body.message.length).toBeGreaterThan(5);
  expect(typeof body.request_id).toBe('string');
};

describe('HTTP shell', () => {
  it('puts provenance and request id headers on every response, errors included', async () => {
    for (const path of ['/health', '/version', '/no-such-route']) {
      const r = await s.api(path, { key: null, headers: { 'x-request-id': 'trace-123' } });
      expect(r.headers.get('x-version')).toMatch(/^\d+\.\d+\.\d+/);
      expect(r.headers.get('x-git-commit')).toBeTruthy();
      expect(r.headers.get('x-build-time')).toBeTruthy();
      expect(r.headers.get('x-request-id')).toBe('trace-123');
    }
    const generated = await s.api('/version', { key: null });
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('reports the real package version, fixed commit and build time', async () => {
    const { version } = JSON.parse(await import('node:fs').then((fs) => fs.readFileSync('package.json', 'utf8')));
    const a = await s.api('/version', { key: null });
    const b = await s.api('/version', { key: null });
    expect(a.body).toMatchObject({ success: true, version, api_base_path: '/api/v1' });
    expect(a.body.build_time).toBe(b.body.build_time);
    expect(a.headers.get('x-build-time')).toBe(a.body.build_time);
  });

  it('answers unknown routes with 404 route_not_found in the error format', async () => {
    const r = await s.api('/nope');
    expect(r.status).toBe(404);
    expectErrorFormat(r.body, 'route_not_found');
    expect(r.body.request_id).toBe(r.headers.get('x-request-id'));
    const outside = await fetch(`${s.instance.url}/elsewhere`);
    expect(outside.status).toBe(404);
    expectErrorFormat(await outside.json(), 'route_not_found');
  });

  it('answers malformed JSON with 400 invalid_json', async () => {
    const r = await s.api('/vcons', { method: 'POST', body: '{"subject": ', headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(400);
    expectErrorFormat(r.body, 'invalid_json');
  });

  it('answers bodies over the limit with 413 payload_too_large', async () => {
    const r = await s.api('/vcons', { method: 'POST', json: { subject: 'x'.repeat(70 * 1024) } });
    expect(r.status).toBe(413);
    expectErrorFormat(r.body, 'payload_too_large');
  });

  it('answers other content types with 415, and accepts the vCon media types and gzip', async () => {
    const r = await s.api('/vcons', { method: 'POST', body: 'subject=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(r.status).toBe(415);
    expectErrorFormat(r.body, 'unsupported_media_type');
    for (const type of ['application/vcon', 'application/vcon+json', 'application/json; charset=utf-8']) {
      const ok = await s.api('/vcons', { method: 'POST', body: JSON.stringify({ subject: type }), headers: { 'content-type': type } });
      expect(ok.status).toBe(201);
    }
    const gz = await s.api('/vcons', {
      method: 'POST',
      body: gzipSync(JSON.stringify({ subject: 'gzipped' })),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    expect(gz.status).toBe(201);
    expect((await s.api(`/vcons/${gz.body.uuid}`)).body.vcon.subject).toBe('gzipped');
  });

  it('answers a body that does not decompress with 400 invalid_json naming the encoding', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const r = await s.api('/vcons', {
        method: 'POST',
        body: 'not compressed',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
      });
      expect(r.status).toBe(400);
      expectErrorFormat(r.body, 'invalid_json');
      expect(r.body.message).toContain(`Content-Encoding: ${encoding}`);
    }
  });

  it('answers a wrong method on a known path with 405', async () => {
    const r = await s.api('/vcons', { method: 'PUT', json: {} });
    expect(r.status).toBe(405);
    expectErrorFormat(r.body, 'method_not_allowed');
    // RFC 9110: a 405 names the methods the path does serve.
    expect(r.headers.get('allow')).toBe('GET, POST, HEAD, OPTIONS');
    const batch = await s.api('/vcons/batch');
    expect(batch.status).toBe(405);
    expect(batch.headers.get('allow')).toBe('POST, OPTIONS');
    // The routes that need no key too, with a key or without one.
    for (const path of ['/health', '/version', '/schema', '/openapi.json', '/examples/minimal']) {
      for (const key of [undefined, null]) {
        const r = await s.api(path, { method: 'POST', json: {}, key });
        expect(r.status, `POST ${path}`).toBe(405);
        expectErrorFormat(r.body, 'method_not_allowed');
        expect(r.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
      }
    }
  });

  it('answers a well-formed JSON body that is not an object with validation_failed, not invalid_json', async () => {
    for (const body of ['"a string"', '42', 'null', 'true']) {
      const r = await s.api('/vcons', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expectErrorFormat(r.body, 'validation_failed');
      expect(r.body.details).toEqual([{ path: '(root)', message: 'must be an object' }]);
      const batch = await s.api('/vcons/batch', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      expect(batch.status).toBe(400);
      expectErrorFormat(batch.body, 'validation_failed');
    }
  });

  it('hides hints in production', async () => {
    const prod = await startTestServer({ NODE_ENV: 'production' });
    try {
      const r = await prod.api('/vcons', { key: 'wrong' });
      expect(r.status).toBe(401);
      expect(r.body.hint).toBeUndefined();
      const dev = await s.api('/vcons', { key: 'wrong' });
      expect(dev.body.hint).toBeTruthy();
    } finally {
      await prod.close();
    }
  });

  it('leaves the REST routes out when REST_API_ENABLED=false, keeping /health', async () => {
    const off = await startTestServer({ REST_API_ENABLED: 'false' });
    try {
      expect((await off.api('/vcons')).status).toBe(404);
      expect((await off.api('/health', { key: null })).status).toBe(200);
    } finally {
      await off.close();
    }
  });

  it('serves under a configured base path', async () => {
    const v2 = await startTestServer({ REST_API_BASE_PATH: '/v2' });
    try {
      expect(v2.base.endsWith('/v2')).toBe(true);
      expect((await v2.api('/vcons')).status).toBe(200);
      expect((await fetch(`${v2.instance.url}/api/v1/vcons`)).status).toBe(404);
    } finally {
      await v2.close();
    }
  });
});
