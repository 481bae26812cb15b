// The keep-alive race (the density bench once counted requests without an answer): a server that
// closes an idle keep-alive connection just as a client sends its next request on it leaves that
// request with a socket close. The server tells clients a short `Keep-Alive: timeout` and keeps the
// connection far longer, so a client that honours the hint (fetch/undici drops idle sockets before
// it) still closes first when its event loop runs seconds late. Real server process, raw sockets.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseUrl, testSchemaName } from '../helpers/db.js';
import { sleep, spawnServer, stopAndDrop, type ServerProcess } from './helpers.js';

const schema = testSchemaName('hard_ka');
let server: ServerProcess | undefined;
afterAll(() => stopAndDrop(server, schema));

/** One keep-alive connection: send a request, read one whole response head (or learn it closed). */
function connection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let buffered = '';
  let closed = false;
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((w) => w());
  socket.on('data', (d) => {
    buffered += String(d);
    wake();
  });
  socket.on('close', () => {
    closed = true;
    wake();
  });
  socket.on('error', () => undefined);
  return {
    /** The status line and headers of the answer, or 'closed' when the server closed instead. */
    async get(path: string): Promise<string> {
      buffered = '';
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end >= 0) {
          const head = buffered.slice(0, end);
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          if (buffered.length >= end + 4 + length) return head;
        }
        if (closed) return 'closed';
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    close: () => socket.destroy(),
  };
}

describe('keep-alive', () => {
  it('tells clients a timeout well below the one it enforces, and answers a request sent at the advertised timeout plus a late client', async () => {
    server = await spawnServer({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema });
    const port = Number(new URL(server.url).port);
    const c = connection(port);
    try {
      const first = await c.get('/api/v1/health');
      expect(first).toMatch(/^HTTP\/1\.1 200/);
      const hint = Number(/^keep-alive: timeout=(\d+)/im.exec(first)?.[1]);
      expect(hint).toBeGreaterThan(0);
      // A client honouring the hint has dropped the socket by now; one whose event loop is ~5 s
      // late reuses it now. The idle time is the point of the test, not a wait for an event.
      await sleep((hint + 5) * 1000);
      const second = await c.get('/api/v1/health');
      expect(second, 'the server closed an idle connection before a late client reused it').toMatch(/^HTTP\/1\.1 200/);
    } finally {
      c.close();
    }
  }, 120_000);

  it('a request that asks to close gets no keep-alive hint', async () => {
    const port = Number(new URL(server!.url).port);
    const socket = net.connect(port, '127.0.0.1');
    let head = '';
    await new Promise<void>((resolve) => {
      socket.on('data', (d) => (head += String(d)));
      socket.on('close', () => resolve());
      socket.write('GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    });
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toMatch(/^connection: close/im);
    expect(head).not.toMatch(/^keep-alive:/im);
  });
});
