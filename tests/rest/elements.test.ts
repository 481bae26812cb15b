// VCON_MAX_ELEMENTS: a body of many small JSON values is refused with 413 too_many_elements,
// naming the bound, before it is parsed (REST's fast create and express's path, a batch, MCP), and
// a vCon may not grow past the bound by appends either. Real vCons and a recording of megabytes
// are far inside it.
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';
import { connectHttp } from '../mcp/helpers.js';

/** The finding's body: 1.8 million `{}` in one vCon's attachment (5.4 MB). */
const manyValues = (n = 1_800_000) =>
  `{"vcon":"0.3.0","subject":"many","attachments":[{"type":"x","encoding":"json","body":[${Array(n).fill('{}').join(',')}]}]}`;

const tooMany = (max: number) => ({
  success: false,
  error: 'too_many_elements',
  message: expect.stringContaining(`more than ${max} JSON values (VCON_MAX_ELEMENTS)`),
  details: [{ path: '(root)', message: expect.stringContaining(`at most ${max} JSON values`) }],
});

describe('VCON_MAX_ELEMENTS, the default', () => {
  let s: TestServer;
  const big = manyValues();
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s?.close());
  afterEach(() => vi.restoreAllMocks());

  /** Calls of JSON.parse on a text at least as long as the finding's body. */
  const parsesOfBig = (spy: { mock: { calls: unknown[][] } }) =>
    spy.mock.calls.filter((c) => typeof c[0] === 'string' && c[0].length >= big.length).length;

  it('refuses the 1.8 million {} body with 413 before parsing it, on either REST path and in a batch', async () => {
    const parse = vi.spyOn(JSON, 'parse');
    for (const [path, body, headers] of [
      ['/vcons', big, {}],
      ['/vcons', big, { origin: 'http://example.test' }],
      ['/vcons/batch', `[${big}]`, {}],
    ] as const) {
      const r = await s.api(path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
      expect(r.status, path).toBe(413);
      expect(r.body).toMatchObject(tooMany(250_000));
    }
    expect(parsesOfBig(parse)).toBe(0);
    expect((await s.api('/vcons')).body.data).toEqual([]);
  }, 120_000);

  it('answers /health while such a body is being read, and refuses it once read', async () => {
    const url = new URL(s.base);
    const bytes = Buffer.from(big);
    const socket = connect(Number(url.port), url.hostname);
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString()));
    socket.write(
      `POST ${url.pathname}/vcons HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`,
    );
    socket.write(bytes.subarray(0, bytes.length - 1));
    // The server holds the body (counted in flight), unanswered, while /health answers.
    await waitFor(async () => (await s.api('/health', { key: null })).body.bodies.in_flight === bytes.length);
    const h = await s.api('/health', { key: null });
    expect(h.status).toBe(200);
    expect(answer).toBe('');
    socket.write(bytes.subarray(bytes.length - 1));
    await waitFor(() => answer.includes('\r\n\r\n{') && answer.trimEnd().endsWith('}'));
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject(tooMany(250_000));
    expect((await s.api('/health', { key: null })).body.bodies.in_flight).toBe(0);
  });

  it('refuses it through MCP too, and keeps a 14 MB recording (few values)', async () => {
    const mcp = await connectHttp(s.instance.url!, KEY);
    try {
      const parse = vi.spyOn(JSON, 'parse');
      const doc = JSON.parse(big) as unknown;
      parse.mockClear();
      await expect(mcp.call('create_vcon', { vcon: doc })).rejects.toThrow(/413|too_many_elements/);
      expect(parsesOfBig(parse)).toBe(0);
    } finally {
      await mcp.close();
    }
    const recording = {
      vcon: '0.3.0',
      parties: [{ name: 'Ann' }],
      dialog: [{ type: 'recording', start: '2025-01-01T10:00:00Z', parties: [0], encoding: 'base64url', body: 'A'.repeat(14 * 1024 * 1024) }],
    };
    expect((await s.api('/vcons', { method: 'POST', json: recording })).status).toBe(201);
  }, 120_000);
});

describe('VCON_MAX_ELEMENTS=1000', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ VCON_MAX_ELEMENTS: '1000' });
  });
  afterAll(() => s?.close());

  it('refuses an append that would grow a vCon past the bound, and leaves the vCon as it was', async () => {
    const doc = { vcon: '0.3.0', subject: 'grows', attachments: [{ type: 'x', encoding: 'json', body: Array.from({ length: 900 }, () => 1) }] };
    const created = await s.api('/vcons', { method: 'POST', json: doc });
    expect(created.status).toBe(201);
    const uuid = created.body.uuid as string;
    const more = { type: 'y', encoding: 'json', body: Array.from({ length: 200 }, () => 1) };
    const r = await s.api(`/vcons/${uuid}/attachments`, { method: 'POST', json: more });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject(tooMany(1000));
    const after = await s.api(`/vcons/${uuid}`);
    expect(after.body.vcon.attachments).toHaveLength(1);
    const schema = await s.api('/schema', { key: null });
    expect(schema.body['x-limits']).toEqual({ max_body_bytes: 20 * 1024 * 1024, max_elements: 1000, max_depth: 100 });
    // A body over the bound is refused whole.
    expect((await s.api('/vcons', { method: 'POST', json: { ...doc, attachments: [{ type: 'x', body: Array(1000).fill(0) }] } })).status).toBe(413);
  });
});
