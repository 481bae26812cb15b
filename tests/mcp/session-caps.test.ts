// One key can't lock the others out of MCP. Sessions are capped per key
// (read-only keys lower) and per instance; a key at its cap gives up its own idlest session, a
// full instance closes the idlest session of the key holding the most, and only sessions busy
// with a call are never closed. An app built by hand (hand-built.ts) with caps and a gating plugin.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Plugin } from '../../src/plugins/hooks.js';
import { createTestSchema, type TestSchema } from '../helpers/db.js';
import { KEY, RO_KEY } from '../helpers/server.js';
import { serveByHand, type HandBuilt } from './hand-built.js';
import { connectHttp, type HttpSession } from './helpers.js';
import { waitFor } from '../helpers/poll.js';

/** Creates wait here until the test opens the gate: sessions provably busy with a call. */
let gate: Promise<void> = Promise.resolve();
let arrived = 0;
const gating: Plugin = {
  name: 'gate',
  version: '0.0.1',
  hooks: {
    async beforeCreate() {
      arrived++;
      await gate;
    },
  },
};

let t: TestSchema;
const running: HandBuilt[] = [];
const open: HttpSession[] = [];

beforeAll(async () => {
  t = await createTestSchema('mcpcap');
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close().catch(() => undefined)));
});
afterAll(async () => {
  for (const r of running) await r.close();
  await t?.drop();
});

/** A server with the given caps (none given: the configured defaults). */
async function serve(caps: Parameters<typeof serveByHand>[2] = {}) {
  const served = await serveByHand(t, [gating], caps);
  running.push(served);
  return served;
}

const session = async (url: string, key: string) => {
  const s = await connectHttp(url, key);
  open.push(s);
  return s;
};

/** A bare initialize, as a client that never comes back sends it. */
const initialize = (url: string, key: string) =>
  fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'flood', version: '1' } },
    }),
  });

/** A tools/list on a session id: 200 while it lives, 404 once it was closed. */
const listStatus = async (url: string, key: string, sid: string) =>
  (
    await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${key}`,
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    })
  ).status;

const until = (what: string, ok: () => boolean, ms = 60_000) => waitFor(ok, ms, 20, what);

describe('MCP sessions per key', () => {
  it('1,000 initialize calls from a read-only key do not lock the read-write key out (default caps)', async () => {
    const { mcp, url } = await serve();
    const statuses = new Map<number, number>();
    let next = 0;
    // 20 at a time, as a flooding client would send them.
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < 1000) {
          next++;
          const res = await initialize(url, RO_KEY);
          await res.body?.cancel();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        }
      }),
    );
    expect(Object.fromEntries(statuses)).toEqual({ 200: 1000 });
    // The read-only key holds no more than its cap; the rest were its own idle sessions, closed.
    expect(mcp.stats()).toMatchObject({ read: 20, write: 0 });
    const rw = await session(url, KEY);
    const r = await rw.call('list_vcons', {});
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect(mcp.stats()).toMatchObject({ read: 20, write: 1 });
  }, 180_000); // a thousand sessions built and closed on a busy 2-core machine

  it('a key at its cap gives up its own least recently used idle session', async () => {
    const { mcp, url } = await serve({ sessionsPerReadOnlyKey: 3 });
    const [a, b, c] = [await session(url, RO_KEY), await session(url, RO_KEY), await session(url, RO_KEY)];
    await a.call('get_version'); // a is now more recently used than b
    const d = await session(url, RO_KEY);
    expect(mcp.stats().read).toBe(3);
    expect(await listStatus(url, RO_KEY, b.transport.sessionId!)).toBe(404);
    for (const s of [a, c, d]) expect(await listStatus(url, RO_KEY, s.transport.sessionId!)).toBe(200);
  });

  it('refuses with 429 too_many_sessions only when every session of the key is busy with a call', async () => {
    const { url } = await serve({ sessionsPerKey: 2 });
    const [a, b] = [await session(url, KEY), await session(url, KEY)];
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    arrived = 0;
    const calls = [a.call('create_vcon', { vcon: { subject: 'busy a' } }), b.call('create_vcon', { vcon: { subject: 'busy b' } })];
    await until('both calls to be in progress', () => arrived === 2);
    const res = await initialize(url, KEY);
    const body = (await res.json()) as { error: string; success: boolean };
    expect([res.status, body.error]).toEqual([429, 'too_many_sessions']);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(body.success).toBe(false);
    // Another key is not affected by this key's busy sessions.
    expect((await initialize(url, RO_KEY)).status).toBe(200);
    open();
    for (const r of await Promise.all(calls)) expect(r.isError).toBeFalsy();
    // Once a call ends, its session is idle again and gives way to a new one.
    expect((await initialize(url, KEY)).status).toBe(200);
  });

  it("a full instance closes the idlest session of the key holding the most, not another key's", async () => {
    const { mcp, url } = await serve({ maxSessions: 4, sessionsPerKey: 10, sessionsPerReadOnlyKey: 10 });
    const rw = await session(url, KEY);
    const ro = [await session(url, RO_KEY), await session(url, RO_KEY), await session(url, RO_KEY)];
    await rw.call('get_version'); // older than every read-only session: still not the one to go
    const rw2 = await session(url, KEY);
    expect(mcp.stats()).toMatchObject({ sessions: 4, read: 2, write: 2 });
    expect(await listStatus(url, RO_KEY, ro[0].transport.sessionId!)).toBe(404);
    for (const s of [rw, rw2]) expect(await listStatus(url, KEY, s.transport.sessionId!)).toBe(200);
  });

  it('refuses with 503 when the instance is full and every session is busy', async () => {
    const { url } = await serve({ maxSessions: 1 });
    const a = await session(url, KEY);
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    arrived = 0;
    const call = a.call('create_vcon', { vcon: { subject: 'busy' } });
    await until('the call to be in progress', () => arrived === 1);
    const res = await initialize(url, RO_KEY);
    expect([res.status, ((await res.json()) as { error: string }).error]).toEqual([503, 'service_unavailable']);
    open();
    expect((await call).isError).toBeFalsy();
  });
});
