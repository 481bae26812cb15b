// The access log's levels: a client closing an event stream (the MCP session stream, GET
// /changes/stream) is how such a stream ends, logged at info; a request cut before its answer was
// complete on an ordinary route still warns.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, KEY, type TestServer } from '../helpers/server.js';
import { openChangeStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/poll.js';
import { connectHttp } from '../mcp/helpers.js';

interface Line {
  level: number;
  msg: string;
  req?: { method: string; path: string };
}

const WARN = 40;
const INFO = 30;
const lines: Line[] = [];
let srv: TestServer;

beforeAll(async () => {
  srv = await startTestServer({ LOG_LEVEL: 'info' }, { logTo: { write: (l: string) => void lines.push(JSON.parse(l) as Line) } });
});
afterAll(async () => {
  await srv?.close();
});

/** The access log line of the first request to `path` with this method (waits for it). */
const lineOf = (method: string, path: string) =>
  waitFor(() => lines.find((l) => l.req?.method === method && l.req.path === path), 60_000, 20, `the log line of ${method} ${path}`);

describe('access log levels', () => {
  it('a change stream the client closes is logged at info, not as an aborted request', async () => {
    const stream = openChangeStream(srv.base);
    await waitFor(() => stream.status() === 200, 60_000, 20, 'the stream to open');
    await stream.close();
    const line = await lineOf('GET', '/api/v1/changes/stream');
    expect(line).toMatchObject({ level: INFO, msg: 'stream closed by the client' });
  });

  it("an MCP session's GET stream the client closes is logged at info", async () => {
    const session = await connectHttp(srv.instance.url!, KEY);
    await session.sseOpen;
    // A client that goes away without ending its session (no DELETE): its stream is cut.
    await session.client.close();
    const line = await lineOf('GET', '/mcp');
    expect(line).toMatchObject({ level: INFO, msg: 'stream closed by the client' });
    expect(lines.filter((l) => l.msg === 'request aborted')).toEqual([]);
  });

  it('a request cut before its answer was complete still warns', async () => {
    // A body announced as 1,000 bytes, 10 sent, and the connection dropped once the server has the request.
    const received = new Promise<void>((resolve) => srv.instance.server!.once('request', () => resolve()));
    const req = request(new URL(`${srv.base}/vcons`), {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': '1000' },
    });
    req.on('error', () => undefined);
    req.write('{"vcon": "');
    await received;
    req.destroy();
    const line = await lineOf('POST', '/api/v1/vcons');
    expect(line).toMatchObject({ level: WARN, msg: 'request aborted' });
  });
});
