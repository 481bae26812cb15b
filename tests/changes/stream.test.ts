import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';
import { openChangeStream } from '../helpers/sse.js';

/** An open SSE connection of a test server: the events parsed so far, and a way to close it. */
const openStream = (t: TestServer, query = '', headers: Record<string, string> = {}, key = KEY) => openChangeStream(t.base, query, headers, key);

let s: TestServer;
let other: TestServer;
beforeAll(async () => {
  [s, other] = await Promise.all([startTestServer(), startTestServer()]);
});
afterAll(() => Promise.all([s?.close(), other?.close()]));

const create = async (t: TestServer, subject: string) => {
  const r = await t.api('/vcons', { method: 'POST', json: { subject, parties: [] } });
  expect(r.status).toBe(201);
  return r.body.uuid as string;
};

describe('GET /changes/stream', () => {
  it('starts with a ready event and a retry hint, sends each change with its cursor as id, and resumes by Last-Event-ID without a gap or a duplicate', async () => {
    const first = openStream(s, '?after=now', {}, RO_KEY);
    await waitFor(() => first.events.find((e) => e.event === 'ready'), 60_000, 20, 'the ready event');
    expect(first.status()).toBe(200);
    expect(first.events[0].retry).toMatch(/^\d+$/);
    const start = first.events[0].id!;
    const before = [await create(s, 'a'), await create(s, 'b'), await create(s, 'c')];
    await waitFor(() => first.changes().length >= 3, 60_000, 20, 'three events');
    await first.close();
    const got = first.changes();
    expect(got.map((e) => e.uuid)).toEqual(before);
    expect(got.every((e) => e.kind === 'created' && e.id === e.cursor && e.key_id === undefined)).toBe(true);
    expect(BigInt(got[0].cursor)).toBeGreaterThan(BigInt(start));
    // Written while no stream is open: a reconnect with the last id gets exactly these.
    const lastId = got[got.length - 1].id;
    const after = [await create(s, 'd'), await create(s, 'e')];
    const second = openStream(s, '?after=0', { 'Last-Event-ID': lastId });
    await waitFor(() => second.changes().length >= 2, 60_000, 20, 'the events written while disconnected');
    const third = await create(s, 'f');
    await waitFor(() => second.changes().length >= 3, 60_000, 20, 'the live event');
    await second.close();
    expect(second.events[0]).toMatchObject({ event: 'ready', id: lastId });
    expect(second.changes().map((e) => e.uuid)).toEqual([...after, third]);
  });

  it('filters by kind, shows a group only its own changes, and ends with an end event on shutdown', async () => {
    const t = await startTestServer();
    const stream = openStream(t, '?kinds=deleted');
    const foreign = openStream(other, '?after=now');
    try {
      await waitFor(() => stream.events.length > 0 && foreign.events.length > 0, 60_000, 20, 'both ready events');
      const uuid = await create(t, 'mine');
      expect((await t.api(`/vcons/${uuid}`, { method: 'DELETE' })).status).toBe(200);
      await waitFor(() => stream.changes().length >= 1, 60_000, 20, 'the deletion');
      expect(stream.changes().map((e) => [e.uuid, e.kind])).toEqual([[uuid, 'deleted']]);
      // The other group's stream, open all along, saw none of it, and its log holds none of it.
      const page = await other.api('/changes');
      expect(JSON.stringify(page.body.data)).not.toContain(uuid);
      expect(foreign.changes().filter((e) => e.uuid === uuid)).toEqual([]);
    } finally {
      await t.instance.stop();
      await waitFor(() => stream.ended(), 60_000, 20, 'the stream to end');
      expect(stream.events.at(-1)).toMatchObject({ event: 'end' });
      await t.close();
      await foreign.close();
    }
  });

  it('refuses a bad cursor with a 400 naming it', async () => {
    const r = await fetch(`${s.base}/changes/stream`, { headers: { authorization: `Bearer ${KEY}`, 'Last-Event-ID': 'x1' } });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: string; details: { path: string }[] };
    expect(body.error).toBe('invalid_parameter');
    expect(body.details[0].path).toBe('Last-Event-ID');
    const k = await fetch(`${s.base}/changes/stream?kinds=nope`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(k.status).toBe(400);
    expect(((await k.json()) as { details: { path: string }[] }).details[0].path).toBe('kinds');
  });
});
