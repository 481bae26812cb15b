// Many concurrent large bodies against a group started by the launcher: the bytes of bodies read
// and worked on at once never pass BODY_IN_FLIGHT_LIMIT (its /health counters say so), a body
// that would pass it is refused at once with 503 server_busy and Retry-After, the process survives
// and answers the held bodies when they complete; the process runs under the heap ceiling of its
// VCON_MEMORY_LIMIT. (What RSS it keeps is measured by `npm run bench`, not here.)
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorkspace, isAlive, KEY, waitFor, type Workspace } from './helpers.js';

const MB = 1024 * 1024;
const LIMIT = 20 * MB;

/** A valid vCon of about `bytes` bytes of JSON (one recording: few values, many bytes). */
const bodyOf = (bytes: number) =>
  JSON.stringify({
    vcon: '0.3.0',
    subject: 'large',
    parties: [{ name: 'Ann' }],
    dialog: [{ type: 'recording', start: '2025-01-01T10:00:00Z', parties: [0], encoding: 'base64url', body: 'A'.repeat(bytes - 200) }],
  });

interface Held {
  socket: Socket;
  /** Sends the rest of the body; resolves with the answer's status line. */
  finish(): Promise<string>;
}

/** A create whose head and half its body are sent, the rest held back (an upload in progress). */
function holdUpload(api: string, body: string, headers: Record<string, string> = {}): Promise<Held> {
  const url = new URL(`${api}/vcons`);
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  return new Promise((resolve, reject) => {
    let answer = '';
    const answered: ((status: string) => void)[] = [];
    const socket = connect(Number(url.port), url.hostname, () => {
      const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
      socket.write(
        `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${bytes.length}\r\n${extra.join('')}\r\n`,
      );
      socket.write(bytes.subarray(0, half), () =>
        resolve({
          socket,
          finish: () =>
            new Promise((done) => {
              answered.push(done);
              socket.write(bytes.subarray(half));
            }),
        }),
      );
    });
    socket.on('error', reject);
    socket.on('data', (c: Buffer) => {
      answer += c.toString('latin1');
      const line = answer.split('\r\n')[0];
      if (answer.includes('\r\n\r\n')) for (const done of answered.splice(0)) done(line);
    });
  });
}

describe('bodies in flight and the memory ceiling of a launched group', () => {
  let ws: Workspace;
  let api: string;
  let pid: number;
  const health = async () =>
    (await (await fetch(`${api}/health`)).json()) as { bodies: { limit: number; in_flight: number; peak: number; refused: number } };
  beforeAll(async () => {
    ws = createWorkspace(['big'], { big: { REST_API_BODY_LIMIT: '8mb', BODY_IN_FLIGHT_LIMIT: '20mb', VCON_MEMORY_LIMIT: '1gb' } });
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    const entry = ws.registry().big;
    api = `${entry.url}/api/v1`;
    pid = entry.pid;
  }, 120_000);
  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('the heaps share three quarters of VCON_MEMORY_LIMIT: the request thread gets what the index thread does not', () => {
    // 1 GB: 768 MiB of heaps, of which the index thread a fifth (145 old + 8 young), the rest 615.
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain('--max-old-space-size=615');
  });

  test('a body that would pass BODY_IN_FLIGHT_LIMIT is refused with server_busy; the held ones complete', async () => {
    expect((await health()).bodies).toEqual({ limit: LIMIT, in_flight: 0, peak: 0, refused: 0 });
    // Three uploads in progress, 6 MB each: two on the fast create, one on express's path (an Origin).
    const size = 6 * MB;
    const held = [
      await holdUpload(api, bodyOf(size)),
      await holdUpload(api, bodyOf(size)),
      await holdUpload(api, bodyOf(size), { Origin: 'http://example.test' }),
    ];
    await waitFor(async () => (await health()).bodies.in_flight === 3 * Buffer.byteLength(bodyOf(size)), 60_000, 50, '18 MB in flight');
    // Over the bound now, whichever path: 503 server_busy with Retry-After, before the body is read.
    for (const headers of [{}, { origin: 'http://example.test' }] as Record<string, string>[]) {
      const res = await fetch(`${api}/vcons`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
        body: bodyOf(4 * MB),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await res.json()).toMatchObject({ success: false, error: 'server_busy', message: expect.stringMatching(/20971520 bytes/) });
    }
    // A small body still fits.
    const small = await fetch(`${api}/vcons`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: bodyOf(1 * MB),
    });
    expect(small.status).toBe(201);
    for (const h of held) expect(await h.finish()).toMatch(/^HTTP\/1\.1 201/);
    for (const h of held) h.socket.destroy();

    // A burst of 24 concurrent 6 MB creates: each is stored or refused, never more in flight than the bound.
    const results = await Promise.all(
      Array.from({ length: 24 }, () =>
        fetch(`${api}/vcons`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: bodyOf(size),
        }).then(async (res) => ({ status: res.status, error: ((await res.json()) as { error?: string }).error })),
      ),
    );
    for (const r of results) expect([201, 503]).toContain(r.status);
    for (const r of results.filter((x) => x.status === 503)) expect(r.error).toBe('server_busy');
    const after = (await health()).bodies;
    expect(after.in_flight).toBe(0);
    expect(after.peak).toBeLessThanOrEqual(LIMIT);
    expect(after.peak).toBeGreaterThanOrEqual(3 * size);
    expect(after.refused).toBe(2 + results.filter((x) => x.status === 503).length);
    expect(isAlive(pid)).toBe(true);
    const list = await fetch(`${api}/vcons?limit=100`, { headers: { authorization: `Bearer ${KEY}` } });
    const stored = ((await list.json()) as { data: unknown[] }).data.length;
    expect(stored).toBe(4 + results.filter((x) => x.status === 201).length);
  }, 180_000);
});
