// The hot read's fast path (src/http/fast-get.ts) answers exactly as express's path does: the
// same status, headers, body and access log line, for a stored vCon, an unknown one, a busy pool;
// and it leaves every other request (refusals, CORS, query strings, other methods) to express.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createFastGet } from '../../src/http/fast-get.js';
import { getBuildInfo } from '../../src/version.js';
import { KEY, loggedLines, RO_KEY, SETUPS, start, type Logged, type Started } from './fast-path-helpers.js';

// Counts the requests the app's fast path takes: both paths answer alike by design, so only this
// tells that the fast one answered.
const fastTaken = vi.hoisted(() => ({ count: 0 }));
vi.mock(import('../../src/http/fast-get.js'), async (importOriginal) => {
  const real = await importOriginal();
  const createFastGet = (deps: Parameters<typeof real.createFastGet>[0]) => {
    const fast = real.createFastGet(deps);
    return fast && ((...args: Parameters<typeof fast>) => fast(...args) && ++fastTaken.count > 0);
  };
  return { ...real, createFastGet };
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The access log lines of this request (by its request id). */
  logged: Logged[];
}

/** One request with a fixed request id; its answer and its access log line(s). */
async function ask(s: Started, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  const id = headers['x-request-id'] ?? `t-${randomUUID()}`;
  const r = await fetch(`${s.base}${path}`, { method, headers: { 'x-request-id': id, ...headers } });
  const body = await r.text();
  const out: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    if (k !== 'date') out[k] = v;
  });
  return { status: r.status, headers: out, body, logged: await loggedLines(s, id) };
}

/** The same request through the fast path and (with a query string) through express's path. */
async function both(s: Started, path: string, headers: Record<string, string> = {}) {
  const id = `t-${randomUUID()}`;
  const before = fastTaken.count;
  const fast = await ask(s, path, { ...headers, 'x-request-id': id });
  expect(fastTaken.count, 'the fast path answered the first request').toBe(before + 1);
  const slow = await ask(s, `${path}?format=full`, { ...headers, 'x-request-id': id });
  expect(fastTaken.count, "express's path answered the second").toBe(before + 1);
  // The two requests share an id: each answer's own line is the one written after it.
  slow.logged = slow.logged.slice(fast.logged.length);
  return { fast, slow };
}

/** The access log line without what differs between any two requests (time, duration). */
const lineOf = (l: Logged) => ({ level: l.level, msg: l.msg, req: l.req, res: l.res });

function expectSame(a: Answer, b: Answer) {
  expect(a.status).toBe(b.status);
  expect(a.headers).toEqual(b.headers);
  expect(a.body).toBe(b.body);
  expect(a.logged).toHaveLength(1);
  expect(b.logged).toHaveLength(1);
  expect(lineOf(a.logged[0])).toEqual(lineOf(b.logged[0]));
}

describe.each(SETUPS)('GET /vcons/:uuid fast path, %s', (_name, env, auth) => {
  let s: Started;
  let uuid: string;
  beforeAll(async () => {
    s = await start(env);
    const r = await fetch(`${s.base}/vcons`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ subject: 'fast ünïcode ✓', parties: [{ name: 'P', tel: '+15550001111' }], dialog: [] }),
    });
    expect(r.status).toBe(201);
    uuid = ((await r.json()) as { uuid: string }).uuid;
  });
  afterAll(() => s?.close());

  it('answers a stored vCon as express does: status, headers, body, log line', async () => {
    const { fast, slow } = await both(s, `/vcons/${uuid}`, auth);
    expect(fast.status).toBe(200);
    expect(JSON.parse(fast.body)).toMatchObject({ success: true, vcon: { uuid, subject: 'fast ünïcode ✓' } });
    expect(fast.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(fast.headers['content-length'])).toBe(Buffer.byteLength(fast.body));
    expect(fast.headers['x-version']).toBeTruthy();
    expect(fast.logged[0]).toMatchObject({
      level: 30,
      msg: 'request completed',
      req: { method: 'GET', path: `${new URL(s.base).pathname.replace(/\/$/, '')}/vcons/${uuid}` },
    });
    expectSame(fast, slow);
  });

  it('lower-cases an upper-case uuid as express does', async () => {
    const { fast, slow } = await both(s, `/vcons/${uuid.toUpperCase()}`, auth);
    expect(fast.status).toBe(200);
    expectSame(fast, slow);
  });

  it('answers an unknown vCon with the same 404 and one log line', async () => {
    const { fast, slow } = await both(s, `/vcons/${randomUUID()}`, auth);
    expect(fast.status).toBe(404);
    expect(JSON.parse(fast.body)).toMatchObject({ success: false, error: 'vcon_not_found' });
    expectSame(fast, slow);
  });

  it('answers a busy pool with the same 503 database_busy and Retry-After', async () => {
    const { admission } = s.instance.services;
    const held: (() => void)[] = [];
    while (admission.stats().in_use < admission.stats().size) held.push(await admission.acquire());
    try {
      const { fast, slow } = await both(s, `/vcons/${uuid}`, auth);
      expect(fast.status).toBe(503);
      expect(fast.headers['retry-after']).toBeTruthy();
      expect(JSON.parse(fast.body)).toMatchObject({ success: false, error: 'database_busy' });
      expectSame(fast, slow);
    } finally {
      for (const release of held) release();
    }
  });

  it('gives a request without a usable X-Request-Id a new one, in the header and the log line', async () => {
    const r = await fetch(`${s.base}/vcons/${uuid}`, { headers: { ...auth, 'x-request-id': 'not valid!' } });
    expect(r.status).toBe(200);
    const id = r.headers.get('x-request-id')!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await loggedLines(s, id)).toHaveLength(1);
  });

  it('leaves refusals, CORS and other methods to express, with one log line each', async () => {
    if (env.API_AUTH_REQUIRED !== 'false') {
      for (const headers of [{}, { authorization: 'Bearer wrong' }, { 'x-api-key': 'wrong' }] as Record<string, string>[]) {
        const r = await ask(s, `/vcons/${uuid}`, headers);
        expect(r.status).toBe(401);
        expect(r.headers['www-authenticate']).toBe('Bearer');
        expect(JSON.parse(r.body)).toMatchObject({ success: false, error: 'unauthorized' });
        expect(r.logged).toHaveLength(1);
        expect(r.logged[0]).toMatchObject({ level: 40, res: { statusCode: 401 } });
      }
      const ro = await ask(s, `/vcons/${uuid}`, env.API_KEY_HEADER ? { 'x-api-key': RO_KEY } : { authorization: `Bearer ${RO_KEY}` });
      expect(ro.status).toBe(200);
    }
    const bad = await ask(s, `/vcons/${uuid.slice(0, -1)}x`, auth);
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body)).toMatchObject({ success: false, error: 'invalid_parameter' });
    expect(bad.logged).toHaveLength(1);

    const origin = 'https://a.example.com';
    const cross = await ask(s, `/vcons/${uuid}`, { ...auth, origin });
    expect(cross.status).toBe(200);
    expect(cross.headers['access-control-allow-origin']).toBe(env.CORS_ORIGIN ? origin : '*');
    expect(cross.headers['access-control-expose-headers']).toMatch(/X-Request-Id/);
    const plain = await ask(s, `/vcons/${uuid}`, auth);
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    expect(cross.body).toBe(plain.body);

    const head = await ask(s, `/vcons/${uuid}`, auth, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['content-length']).toBe(plain.headers['content-length']);
  });
});

describe('GET /vcons/:uuid fast path with the database gone', () => {
  it('answers 503 database_unavailable as express does, with one log line each', async () => {
    const s = await start({});
    try {
      const uuid = randomUUID();
      await s.instance.sql.end({ timeout: 1 });
      const { fast, slow } = await both(s, `/vcons/${uuid}`, { authorization: `Bearer ${KEY}` });
      expect(fast.status).toBe(503);
      expect(JSON.parse(fast.body)).toMatchObject({ success: false, error: 'database_unavailable' });
      expectSame(fast, slow);
    } finally {
      await s.close().catch(() => undefined);
    }
  });
});

describe('which requests the fast path takes', () => {
  let s: Started;
  let server: Server;
  let port: number;
  const taken: boolean[] = [];
  beforeAll(async () => {
    s = await start({});
    const { config, services } = s.instance;
    const fast = createFastGet({
      config,
      services,
      buildInfo: getBuildInfo(),
      requestId: () => randomUUID(),
      logRequest: () => undefined,
    })!;
    server = createServer((req, res) => {
      const took = fast(req, res, () => res.writeHead(500).end());
      taken.push(took);
      if (!took) res.writeHead(204).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
    await s?.close();
  });

  const takes = async (path: string, init: RequestInit = {}) => {
    taken.length = 0;
    await (await fetch(`http://127.0.0.1:${port}${path}`, init)).arrayBuffer();
    return taken[0];
  };

  it('takes only GET <base>/vcons/<uuid> with a known key and no Origin', async () => {
    const uuid = randomUUID();
    const key = { authorization: `Bearer ${KEY}` };
    expect(await takes(`/api/v1/vcons/${uuid}`, { headers: key })).toBe(true);
    expect(await takes(`/api/v1/vcons/${uuid}`, { headers: { authorization: `Bearer ${RO_KEY}` } })).toBe(true);
    expect(await takes(`/api/v1/vcons/${uuid.toUpperCase()}`, { headers: key })).toBe(true);
    for (const [path, init] of [
      [`/api/v1/vcons/${uuid}`, {}],
      [`/api/v1/vcons/${uuid}`, { headers: { authorization: 'Bearer nope' } }],
      [`/api/v1/vcons/${uuid}`, { headers: { ...key, origin: 'https://a.example.com' } }],
      [`/api/v1/vcons/${uuid}`, { headers: key, method: 'HEAD' }],
      [`/api/v1/vcons/${uuid}`, { headers: key, method: 'DELETE' }],
      [`/api/v1/vcons/${uuid}?format=metadata`, { headers: key }],
      [`/api/v1/vcons/${uuid}/`, { headers: key }],
      [`/api/v1/vcons/${uuid.slice(0, -1)}g`, { headers: key }],
      [`/api/v1/vcons/%${uuid.slice(1)}`, { headers: key }],
      [`/API/V1/vcons/${uuid}`, { headers: key }],
      [`/api/v1/vcons/batch`, { headers: key }],
    ] as [string, RequestInit][]) {
      expect([path, init, await takes(path, init)]).toEqual([path, init, false]);
    }
  });

  it('leaves a GET with a body to express (its body parser judges it)', async () => {
    const uuid = randomUUID();
    const send = (headers: Record<string, string>, body?: string) =>
      new Promise<void>((resolve, reject) => {
        taken.length = 0;
        const r = request({ host: '127.0.0.1', port, path: `/api/v1/vcons/${uuid}`, method: 'GET', headers }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        r.on('error', reject);
        r.end(body);
      });
    const key = { authorization: `Bearer ${KEY}` };
    await send({ ...key, 'content-type': 'text/plain', 'content-length': '5' }, 'hello');
    expect(taken[0]).toBe(false);
    await send({ ...key, 'transfer-encoding': 'chunked' }, 'hello');
    expect(taken[0]).toBe(false);
    await send({ ...key, 'content-length': '0' });
    expect(taken[0]).toBe(true);
  });

  it('is off when a plugin has a read hook, when REST is off, and when no key is configured', async () => {
    const { config, services } = s.instance;
    const deps = { config, services, buildInfo: getBuildInfo(), requestId: () => '', logRequest: () => undefined };
    expect(createFastGet(deps)).toBeTypeOf('function');
    expect(
      createFastGet({ ...deps, services: { ...services, plugins: [{ name: 'p', version: '1', hooks: { afterRead: async () => undefined } }] } }),
    ).toBeUndefined();
    expect(
      createFastGet({ ...deps, services: { ...services, plugins: [{ name: 'p', version: '1', hooks: { beforeRead: async () => undefined } }] } }),
    ).toBeUndefined();
    expect(createFastGet({ ...deps, config: { ...config, rest: { ...config.rest, enabled: false } } })).toBeUndefined();
    expect(createFastGet({ ...deps, config: { ...config, auth: { ...config.auth, keys: [], readOnlyKeys: [] } } })).toBeUndefined();
  });
});
