// A route's pool turn (`admitted`) over real HTTP: a request whose client disconnects while it waits for a
// pool turn gives the turn back when it gets it (else the pool stays full for good).
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdmission } from '../../src/services/admission.js';
import { admitted } from '../../src/http/admission.js';
import { waitFor } from '../helpers/poll.js';

describe('admitted routes', () => {
  const admission = createAdmission({ limit: 1, maxWaitMs: 10_000 });
  let hold: (() => void) | undefined;
  let server: Server;
  let port: number;
  let closedSockets = 0;
  beforeAll(async () => {
    const app = express();
    app.get(
      '/slow',
      admitted(
        admission,
        (_req, res) =>
          new Promise<void>((done) => {
            hold = () => {
              res.end('slow');
              done();
            };
          }),
      ),
    );
    app.get(
      '/fast',
      admitted(admission, async (_req, res) => {
        res.end('fast');
      }),
    );
    server = createServer(app);
    server.on('connection', (socket) => socket.on('close', () => closedSockets++));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.text());

  it('a request abandoned while queued releases its turn once granted', async () => {
    const slow = get('/slow');
    const release = await waitFor(() => hold, 60_000, 5, '/slow to hold its turn');
    // Queued behind /slow, then abandoned by its client.
    const abandoned = httpRequest({ port, host: '127.0.0.1', path: '/fast' });
    abandoned.on('error', () => undefined);
    abandoned.end();
    await waitFor(() => admission.stats().waiting >= 1, 60_000, 5, '/fast to queue');
    abandoned.destroy();
    // The server has seen the client go (its 'close' fired while the request was still queued).
    await waitFor(() => closedSockets >= 1, 60_000, 5, 'the server to see the client go');
    expect(closedSockets).toBe(1);
    release();
    expect(await slow).toBe('slow');
    // The pool has its one turn back: the next request is served, not held until database_busy.
    expect(await get('/fast')).toBe('fast');
    expect(admission.stats()).toMatchObject({ in_use: 0, waiting: 0 });
  });
});
