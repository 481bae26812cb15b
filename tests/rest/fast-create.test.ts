// The hot create's fast path (src/http/fast-create.ts) answers exactly as express's path does: the
// same status, headers, body and access log line for a created vCon, a replaced one, invalid JSON,
// a validation error, a busy pool and a database gone; and it leaves every other request
// (refusals, CORS, query strings, other media types, charsets and encodings) to express.
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KEY, loggedLines, RO_KEY, SETUPS, start, type Logged, type Started } from './fast-path-helpers.js';
import { waitFor } from '../helpers/poll.js';

// Counts the requests the fast path takes: both paths answer alike by design, so only this tells
// that the fast one answered.
const fastTaken = vi.hoisted(() => ({ count: 0 }));
vi.mock(import('../../src/http/fast-create.js'), async (importOriginal) => {
  const real = await importOriginal();
  const createFastCreate = (deps: Parameters<typeof real.createFastCreate>[0]) => {
    const fast = real.createFastCreate(deps);
    return fast && ((...args: Parameters<typeof fast>) => fast(...args) && ++fastTaken.count > 0);
  };
  return { ...real, createFastCreate };
});

interface Answer {
  id: string;
  status: number;
  headers: Record<string, string>;
  body: string;
  logged: Logged[];
}

/** One POST with a fixed request id; its answer and its access log line(s). */
async function post(s: Started, path: string, body: string | Buffer, headers: Record<string, string>): Promise<Answer> {
  const id = headers['x-request-id'] ?? `t-${randomUUID()}`;
  const r = await fetch(`${s.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers, 'x-request-id': id },
    body,
  });
  const text = await r.text();
  const out: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    if (k !== 'date') out[k] = v;
  });
  return { id, status: r.status, headers: out, body: text, logged: await loggedLines(s, id) };
}

/**
 * The same create through the fast path and through express's (`?wait_for=search`, which answers
 * alike once indexed). `body(uuid)` makes each request's document; the uuids differ (a second
 * create of one uuid is a replacement), and the answers are compared with the uuid taken out.
 */
async function both(s: Started, body: (uuid: string) => string, headers: Record<string, string>, uuids = [randomUUID(), randomUUID()]) {
  const before = fastTaken.count;
  const fast = await post(s, '/vcons', body(uuids[0]), headers);
  expect(fastTaken.count, 'the fast path answered the first request').toBe(before + 1);
  const slow = await post(s, '/vcons?wait_for=search', body(uuids[1]), headers);
  expect(fastTaken.count, "express's path answered the second").toBe(before + 1);
  const strip = (a: Answer, uuid: string) => ({
    status: a.status,
    headers: { ...a.headers, 'x-request-id': '', 'content-length': '' },
    body: a.body.replaceAll(uuid, '<uuid>').replaceAll(a.id, '<id>'),
    logged: a.logged.map((l) => ({ level: l.level, msg: l.msg, method: l.req?.method, path: l.req?.path, res: l.res })),
  });
  expect(strip(fast, uuids[0])).toEqual(strip(slow, uuids[1]));
  expect(Number(fast.headers['content-length'])).toBe(Buffer.byteLength(fast.body));
  expect(fast.logged).toHaveLength(1);
  return fast;
}

const vcon = (uuid: string) =>
  JSON.stringify({ vcon: '0.3.0', uuid, subject: 'fast create ünïcode ✓', parties: [{ name: 'P', tel: '+15550001111' }] });

describe.each(SETUPS)('POST /vcons fast path, %s', (_name, env, auth) => {
  let s: Started;
  beforeAll(async () => {
    s = await start(env);
  });
  afterAll(() => s?.close());

  it('creates as express does: 201, headers, body, log line; the vCon is stored and searchable', async () => {
    const uuid = randomUUID();
    const fast = await both(s, vcon, auth, [uuid, randomUUID()]);
    expect(fast.status).toBe(201);
    expect(JSON.parse(fast.body)).toEqual({ success: true, uuid, created: true });
    expect(fast.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(fast.headers['x-version']).toBeTruthy();
    expect(fast.logged[0]).toMatchObject({ level: 30, msg: 'request completed', req: { method: 'POST' }, res: { statusCode: 201 } });
    const got = await s.api(`/vcons/${uuid}`, { headers: auth, key: null });
    expect(got.body.vcon).toMatchObject({ uuid, subject: 'fast create ünïcode ✓' });
    const found = await s.api('/vcons/search/content?q=fast+create', { headers: auth, key: null });
    expect(found.body.results.map((r: { vcon_uuid?: string; uuid?: string }) => r.vcon_uuid ?? r.uuid)).toContain(uuid);
  });

  it('replaces an existing uuid as express does (200, created false)', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    for (const u of [a, b]) expect((await post(s, '/vcons?wait_for=search', vcon(u), auth)).status).toBe(201);
    const fast = await both(s, vcon, auth, [a, b]);
    expect(fast.status).toBe(200);
    expect(JSON.parse(fast.body)).toEqual({ success: true, uuid: a, created: false });
  });

  it('answers invalid JSON and an invalid vCon with the same 400s', async () => {
    const broken = await both(s, (u) => `{"uuid":"${u}","subject":`, auth);
    expect(broken.status).toBe(400);
    expect(JSON.parse(broken.body)).toMatchObject({ success: false, error: 'invalid_json' });
    const invalid = await both(s, (u) => JSON.stringify({ vcon: '0.3.0', uuid: u, parties: 'nobody' }), auth);
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.body)).toMatchObject({ success: false, error: 'validation_failed' });
  });

  it('reads a body with a BOM and a charset=utf-8 type as express does', async () => {
    const fast = await both(s, (u) => `\uFEFF${vcon(u)}`, { ...auth, 'content-type': 'application/vcon+json; charset=UTF-8' });
    expect(fast.status).toBe(201);
  });

  it('creates from a body of only a BOM as express does (an empty JSON text is {})', async () => {
    const before = fastTaken.count;
    const fast = await post(s, '/vcons', '\uFEFF', auth);
    expect(fastTaken.count).toBe(before + 1);
    const slow = await post(s, '/vcons?wait_for=search', '\uFEFF', auth);
    expect([fast.status, slow.status]).toEqual([201, 201]);
    expect(JSON.parse(fast.body)).toMatchObject({ success: true, created: true });
  });

  it('logs a client gone mid-body as express does: "request aborted", not a database outage', async () => {
    const url = new URL(s.base);
    const id = `t-${randomUUID()}`;
    const body = vcon(randomUUID());
    const head = Object.entries({ ...auth, 'content-type': 'application/json', 'content-length': String(body.length), 'x-request-id': id })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const before = fastTaken.count;
    await new Promise<void>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(`POST ${url.pathname}/vcons HTTP/1.1\r\nhost: ${url.host}\r\n${head}\r\n${body.slice(0, 20)}`);
        // Gone once the fast path has the request and waits for the rest of its body.
        waitFor(() => fastTaken.count === before + 1, 60_000, 5, 'the fast path to take the request').then(() => {
          socket.destroy();
          resolve();
        }, reject);
      });
      socket.on('error', reject);
    });
    expect(fastTaken.count).toBe(before + 1);
    const logged = await loggedLines(s, id, true);
    expect(logged.map((l) => l.msg)).toEqual(['request aborted']);
  });

  it('reads a body that arrives in pieces whole (one chunk is decoded as it is, several joined)', async () => {
    const url = new URL(s.base);
    const uuid = randomUUID();
    // Multi-byte characters split across the pieces: decoding each piece alone would mangle them.
    const body = Buffer.from(JSON.stringify({ vcon: '0.3.0', uuid, subject: `split ${'é😀'.repeat(40)} end` }));
    const head = Object.entries({ ...auth, 'content-type': 'application/json', 'content-length': String(body.length) })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    const before = fastTaken.count;
    const answer = await new Promise<string>((resolve, reject) => {
      let got = '';
      const socket = connect(Number(url.port), url.hostname, async () => {
        socket.write(`POST ${url.pathname}/vcons HTTP/1.1\r\nhost: ${url.host}\r\nconnection: close\r\n${head}\r\n`);
        for (const [from, to] of [
          [0, 31],
          [31, 101],
          [101, body.length],
        ]) {
          await new Promise((r) => setTimeout(r, 30));
          socket.write(body.subarray(from, to));
        }
      });
      socket.on('data', (d) => (got += d.toString()));
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
    });
    expect(fastTaken.count).toBe(before + 1);
    expect(answer).toMatch(/^HTTP\/1\.1 201 /);
    expect(JSON.parse((await s.instance.services.vcons.getText(uuid)) as string).subject).toBe(JSON.parse(body.toString()).subject);
  });

  it('answers a busy pool with the same 503 database_busy and Retry-After', async () => {
    const { admission } = s.instance.services;
    const held: (() => void)[] = [];
    while (admission.stats().in_use < admission.stats().size) held.push(await admission.acquire());
    try {
      const fast = await both(s, vcon, auth);
      expect(fast.status).toBe(503);
      expect(fast.headers['retry-after']).toBeTruthy();
      expect(JSON.parse(fast.body)).toMatchObject({ success: false, error: 'database_busy' });
    } finally {
      for (const release of held) release();
    }
  });

  it('leaves refusals, CORS, query strings, other types, charsets and encodings to express', async () => {
    const before = fastTaken.count;
    const expectExpress = async (body: string | Buffer, headers: Record<string, string>, status: number, path = '/vcons') => {
      const r = await post(s, path, body, headers);
      expect(r.status, JSON.stringify(headers)).toBe(status);
      expect(r.logged).toHaveLength(1);
      return r;
    };
    if (env.API_AUTH_REQUIRED !== 'false') {
      await expectExpress(vcon(randomUUID()), {}, 401);
      await expectExpress(vcon(randomUUID()), env.API_KEY_HEADER ? { 'x-api-key': 'wrong' } : { authorization: 'Bearer wrong' }, 401);
      await expectExpress(vcon(randomUUID()), env.API_KEY_HEADER ? { 'x-api-key': RO_KEY } : { authorization: `Bearer ${RO_KEY}` }, 403);
    }
    const cross = await expectExpress(vcon(randomUUID()), { ...auth, origin: 'https://a.example.com' }, 201);
    expect(cross.headers['access-control-allow-origin']).toBe(env.CORS_ORIGIN ? 'https://a.example.com' : '*');
    await expectExpress(vcon(randomUUID()), auth, 201, '/vcons?wait_for=search');
    await expectExpress(vcon(randomUUID()), { ...auth, 'content-type': 'text/plain' }, 415);
    await expectExpress(vcon(randomUUID()), { ...auth, 'content-type': 'application/json; charset=iso-8859-1' }, 415);
    await expectExpress(gzipSync(vcon(randomUUID())), { ...auth, 'content-encoding': 'gzip' }, 201);
    expect(fastTaken.count).toBe(before);
  });
});

describe('POST /vcons fast path with the database gone', () => {
  it('answers 503 database_unavailable as express does, with one log line each', async () => {
    const s = await start({});
    try {
      await s.instance.sql.end({ timeout: 1 });
      const fast = await both(s, vcon, { authorization: `Bearer ${KEY}` });
      expect(fast.status).toBe(503);
      expect(JSON.parse(fast.body)).toMatchObject({ success: false, error: 'database_unavailable' });
    } finally {
      await s.close();
    }
  });
});
