// resources/subscribe: an MCP client (the SDK's own, over Streamable HTTP) subscribed to a vCon is
// told of an append made over REST, and of nothing about vCons it does not watch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';
import { connectHttp, type HttpSession } from './helpers.js';

let s: TestServer;
let session: HttpSession;
const updated: string[] = [];

beforeAll(async () => {
  s = await startTestServer();
  // A read-only key may watch: subscribing reads nothing it could not read anyway.
  session = await connectHttp(s.instance.url!, RO_KEY);
  session.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
});
afterAll(async () => {
  await session?.close();
  await s?.close();
});

const create = async () => {
  const r = await s.api('/vcons', { method: 'POST', json: { subject: 'watched', parties: [{ name: 'a' }] } });
  expect(r.status).toBe(201);
  return r.body.uuid as string;
};

describe('MCP resource subscriptions', () => {
  it('advertises subscribe and notifies a subscriber of an append made over REST, and only of its vCons', async () => {
    expect(session.client.getServerCapabilities()?.resources?.subscribe).toBe(true);
    const watched = await create();
    const other = await create();
    const uri = `vcon://v1/vcons/${watched}`;
    const part = `vcon://v1/vcons/${watched}/dialog`;
    await session.client.subscribeResource({ uri });
    await session.client.subscribeResource({ uri: part });
    // Writes to a vCon nobody watches, then the append: its notifications come after the other's entry in the log.
    expect((await s.api(`/vcons/${other}/tags/k`, { method: 'PUT', json: { value: 'v' }, key: KEY })).status).toBe(200);
    const append = await s.api(`/vcons/${watched}/dialog`, {
      method: 'POST',
      json: { type: 'text', start: '2025-01-01T00:00:00Z', parties: [0], body: 'hi', mediatype: 'text/plain' },
    });
    expect(append.status).toBeLessThan(300);
    await waitFor(() => updated.includes(uri) && updated.includes(part));
    expect(updated.every((u) => u.includes(watched))).toBe(true);
    // After unsubscribing, an append notifies no more: the hub reads the log in order, so once the
    // notification of a later write to another watched vCon arrives, the append's turn has passed.
    await session.client.unsubscribeResource({ uri });
    await session.client.unsubscribeResource({ uri: part });
    const marker = `vcon://v1/vcons/${other}`;
    await session.client.subscribeResource({ uri: marker });
    const seen = updated.length;
    await s.api(`/vcons/${watched}/dialog`, {
      method: 'POST',
      json: { type: 'text', start: '2025-01-01T00:00:01Z', parties: [0], body: 'again', mediatype: 'text/plain' },
    });
    await s.api(`/vcons/${other}/tags/k`, { method: 'PUT', json: { value: 'w' } });
    await waitFor(() => updated.includes(marker));
    expect(updated.slice(seen)).toEqual([marker]);
  });

  it('refuses a uri that is not a vCon resource, naming it', async () => {
    await expect(session.client.subscribeResource({ uri: 'vcon://v1/tags' })).rejects.toThrow(/uri: only vcon:\/\/v1\/vcons\/\{uuid\}/);
  });
});
