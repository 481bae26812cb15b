// createAppServer (src/http/app.ts): requests and responses are born with express's prototypes, so
// express's per-request Object.setPrototypeOf changes nothing (it cost ~40 µs of CPU per request).
import { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { createAppServer } from '../../src/http/app.js';

describe('createAppServer', () => {
  it("gives req and res express's prototypes before express sees them, and express works as before", async () => {
    const app = express();
    app.get('/p/:id', (req, res) => {
      res
        .status(201)
        .json({ id: req.params.id, q: req.query.a, path: req.path, isReq: req instanceof IncomingMessage, isRes: res instanceof ServerResponse });
    });
    const server = createAppServer(app);
    const seen: boolean[] = [];
    const protos = app as unknown as { request: object; response: object };
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      seen.push(Object.getPrototypeOf(req) === protos.request && Object.getPrototypeOf(res) === protos.response);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const r = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/p/x1?a=b`);
      expect(r.status).toBe(201);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await r.json()).toEqual({ id: 'x1', q: 'b', path: '/p/x1', isReq: true, isRes: true });
      expect(seen).toEqual([true]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
