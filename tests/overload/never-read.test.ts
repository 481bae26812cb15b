// A client that asks for a large answer and never reads it holds nothing of the group's: the pool
// turn goes back when the answer starts (every route alike), and an answer the
// client does not take within SEND_TIMEOUT_MS has its connection closed.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';

/** Larger than the loopback socket buffers of both ends together, so the answer stays in the server. */
const RECORDING_BYTES = 14 * 1024 * 1024;

const bigVcon = () => ({
  vcon: '0.3.0',
  subject: 'never read',
  parties: [{ name: 'Ann' }],
  dialog: [
    {
      type: 'recording',
      start: '2025-01-01T10:00:00Z',
      parties: [0],
      mediatype: 'audio/x-wav',
      encoding: 'base64url',
      body: 'A'.repeat(RECORDING_BYTES),
    },
  ],
});

interface Stalled {
  socket: Socket;
  /** The bytes received so far. */
  received: () => number;
  /** The Content-Length the answer announced. */
  length: number;
}

/** Asks for `path` on a raw socket, reads the first chunk of the answer (its head), then stops reading. */
function askAndStall(s: TestServer, path: string): Promise<Stalled> {
  const url = new URL(`${s.base}${path}`);
  return new Promise((resolve, reject) => {
    let received = 0;
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${RO_KEY}\r\n\r\n`);
    });
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      if (received === 0) {
        socket.pause();
        const head = chunk.toString('latin1');
        const length = /content-length: (\d+)/i.exec(head);
        if (!head.startsWith('HTTP/1.1 200') || !length) reject(new Error(`unexpected answer: ${head.slice(0, 200)}`));
        else resolve({ socket, received: () => received, length: Number(length[1]) });
      }
      received += chunk.length;
    });
  });
}

describe('a client that never reads its answer', () => {
  let s: TestServer;
  let uuid: string;
  const stalled: Stalled[] = [];
  beforeAll(async () => {
    // One turn (the pool less the index thread's connection), a short wait for it, and a send
    // timeout far beyond the test: only the release at the answer's start can free the turn.
    s = await startTestServer({ DB_POOL_MAX: '2', DB_QUEUE_TIMEOUT_MS: '200', SEND_TIMEOUT_MS: '3600000' });
    const r = await s.api('/vcons', { method: 'POST', json: bigVcon() });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(201);
    uuid = r.body.uuid;
  }, 120_000);
  afterAll(async () => {
    for (const x of stalled) x.socket.destroy();
    await s?.close();
  });

  it('gives the pool turn back once its answer has started: other requests of the group succeed', async () => {
    expect(s.instance.services.admission.stats().size).toBe(1);
    // The stored text (plain GET) and the route with a query string, two stalled clients each.
    for (const path of [`/vcons/${uuid}?format=full`, `/vcons/${uuid}?format=full`, `/vcons/${uuid}`, `/vcons/${uuid}`]) {
      stalled.push(await askAndStall(s, path));
    }
    for (const x of stalled) expect(x.received()).toBeLessThan(x.length);
    expect(s.instance.services.admission.stats()).toMatchObject({ in_use: 0, waiting: 0 });
    const h = await s.api('/health', { key: null });
    expect(h.status).toBe(200);
    expect(h.body.pool).toMatchObject({ in_use: 0, waiting: 0 });
    const list = await s.api('/vcons');
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(list.body.data.map((v: { uuid: string }) => v.uuid)).toContain(uuid);
    const summary = await s.api(`/vcons/${uuid}?format=summary`, { key: RO_KEY });
    expect(summary.status).toBe(200);
    // The stalled answers are still unread: nothing above finished them.
    for (const x of stalled) expect(x.received()).toBeLessThan(x.length);
  }, 120_000);
});

describe('SEND_TIMEOUT_MS', () => {
  let s: TestServer;
  const lines: string[] = [];
  beforeAll(async () => {
    s = await startTestServer({ SEND_TIMEOUT_MS: '300', LOG_LEVEL: 'warn' }, { logTo: { write: (l: string) => void lines.push(l) } });
  }, 60_000);
  afterAll(() => s?.close());

  it('closes the connection of an answer its client did not take, and the client sees the answer cut short', async () => {
    const r = await s.api('/vcons', { method: 'POST', json: bigVcon() });
    expect(r.status).toBe(201);
    const x = await askAndStall(s, `/vcons/${r.body.uuid}?format=full`);
    const cut = (l: string) => l.includes('did not take its answer');
    await waitFor(() => lines.some(cut), 60_000, 50, 'the send timeout');
    expect(JSON.parse(lines.find(cut)!)).toMatchObject({ level: 40, send_timeout_ms: 300 });
    // Reading again now, the client gets what the operating system still held, then the end.
    const closed = new Promise<void>((resolve) => x.socket.once('close', () => resolve()));
    x.socket.resume();
    await closed;
    expect(x.received()).toBeLessThan(x.length);
    expect((await s.api('/health', { key: null })).body.pool).toMatchObject({ in_use: 0, waiting: 0 });
  }, 120_000);
});
