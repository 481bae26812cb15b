// The server builds each request and response on express's own prototypes (createAppServer), so
// express's per-request prototype swap finds nothing to change: the swap is what made every
// request dearer (docs/architecture.md, "The request path and what it costs").
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { describe, expect, it } from 'vitest';
import { createAppServer } from '../../src/http/app.js';
import { startTestServer } from '../helpers/server.js';

/** The prototypes of a request and its response as node hands them over, and after express has run. */
function watchPrototypes(server: Server) {
  const seen: { arrival: [object | null, object | null]; afterExpress: [object | null, object | null] }[] = [];
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    seen.push({ arrival: [Object.getPrototypeOf(req), Object.getPrototypeOf(res)], afterExpress: [null, null] });
  });
  // Listeners added after the app's run after express's synchronous dispatch, when it has set its prototypes.
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    seen.at(-1)!.afterExpress = [Object.getPrototypeOf(req), Object.getPrototypeOf(res)];
  });
  return seen;
}

describe('createAppServer', () => {
  it("builds requests and responses on the app's prototypes, which stay node's, and serves as express does", async () => {
    const app = express();
    app.use(express.json());
    app.get('/q', (req, res) => {
      res.json({ q: req.query.a, ok: req instanceof IncomingMessage && res instanceof ServerResponse });
    });
    app.post('/echo', (req, res) => {
      res.status(201).json(req.body);
    });
    const server = createAppServer(app);
    const seen = watchPrototypes(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const get = await fetch(`${url}/q?a=1`);
      expect(await get.json()).toEqual({ q: '1', ok: true });
      const post = await fetch(`${url}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":[1,2]}' });
      expect(post.status).toBe(201);
      expect(await post.json()).toEqual({ x: [1, 2] });
      expect(seen).toHaveLength(2);
      for (const s of seen) {
        expect(s.arrival).toEqual([app.request, app.response]);
        expect(s.afterExpress).toEqual(s.arrival);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('createAppServer on a node whose request types are classes', () => {
  it("falls back to node's plain server, which express still serves", async () => {
    // What a later node with class constructors would hand over: they can't be called on an object.
    class Request extends IncomingMessage {}
    class Response<R extends IncomingMessage = IncomingMessage> extends ServerResponse<R> {}
    const app = express();
    app.get('/q', (req, res) => {
      res.json({ q: req.query.a });
    });
    const server = createAppServer(app, { IncomingMessage: Request, ServerResponse: Response });
    const seen = watchPrototypes(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const r = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/q?a=2`);
      expect(await r.json()).toEqual({ q: '2' });
      expect(seen).toHaveLength(1);
      expect(seen[0].arrival).toEqual([IncomingMessage.prototype, ServerResponse.prototype]);
      expect(seen[0].afterExpress).toEqual([app.request, app.response]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('the instance server', () => {
  it("hands express requests and responses that already have its prototypes, on REST and MCP's routes", async () => {
    const s = await startTestServer();
    try {
      const seen = watchPrototypes(s.instance.server!);
      expect((await s.api('/health')).status).toBe(200);
      expect((await s.api('/vcons?limit=1')).status).toBe(200);
      const mcp = await fetch(new URL('/mcp', s.base), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      await mcp.arrayBuffer();
      expect(seen).toHaveLength(3);
      for (const r of seen) {
        expect(r.arrival[0]).not.toBe(IncomingMessage.prototype);
        expect(r.arrival[1]).not.toBe(ServerResponse.prototype);
        expect(r.afterExpress).toEqual(r.arrival);
      }
    } finally {
      await s.close();
    }
  });
});
