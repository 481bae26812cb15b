// resources/subscribe: an MCP client (the SDK's own, over Streamable HTTP) subscribed to a vCon is
// told of an append made over REST, and of nothing about vCons it does not watch; a session holds
// at most MCP_MAX_SUBSCRIPTIONS, gives them back when it closes, and can't watch what isn't there.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, McpError, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';
import { connectHttp, type HttpSession } from './helpers.js';

const CAP = 3;
let s: TestServer;
let session: HttpSession;
const updated: string[] = [];

beforeAll(async () => {
  s = await startTestServer({ MCP_MAX_SUBSCRIPTIONS: String(CAP) });
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

  it('refuses a subscription past MCP_MAX_SUBSCRIPTIONS naming the limit, and takes one again after an unsubscribe', async () => {
    const own = await connectHttp(s.instance.url!, RO_KEY);
    try {
      const uuid = await create();
      const uris = ['', '/dialog', '/tags', '/analysis'].map((p) => `vcon://v1/vcons/${uuid}${p}`);
      for (const uri of uris.slice(0, CAP)) await own.client.subscribeResource({ uri });
      // Subscribing again to a uri it holds is no new subscription.
      await own.client.subscribeResource({ uri: uris[0] });
      const refused = await own.client.subscribeResource({ uri: uris[CAP] }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(McpError);
      expect((refused as McpError).code).toBe(ErrorCode.InvalidRequest);
      expect((refused as McpError).message).toMatch(
        /too_many_subscriptions: this session is subscribed to 3 resources, the limit \(MCP_MAX_SUBSCRIPTIONS=3\)/,
      );
      await own.client.unsubscribeResource({ uri: uris[1] });
      await own.client.subscribeResource({ uri: uris[CAP] });
    } finally {
      await own.close();
    }
  });

  it("frees a session's subscriptions when it closes", async () => {
    const stats = () => s.instance.mcp!.stats();
    await waitFor(() => stats().sessions === 1, 60_000, 50, 'the other sessions to close');
    const before = stats().subscriptions;
    const own = await connectHttp(s.instance.url!, KEY);
    const uuid = await create();
    // The same uri twice at once is one subscription (the second shares the first while it is answered).
    const uri = `vcon://v1/vcons/${uuid}`;
    await Promise.all([own.client.subscribeResource({ uri }), own.client.subscribeResource({ uri })]);
    await own.client.subscribeResource({ uri: `${uri}/tags` });
    expect(stats().subscriptions).toBe(before + 2);
    await own.close();
    await waitFor(() => stats().sessions === 1 && stats().subscriptions === before, 60_000, 50, 'the closed session to give its subscriptions back');
  });

  it('refuses a vCon that does not exist and a uri whose uuid is malformed, each with a clear error', async () => {
    const missing = randomUUID();
    const notFound = await session.client.subscribeResource({ uri: `vcon://v1/vcons/${missing}/dialog` }).catch((err: unknown) => err);
    expect(notFound).toBeInstanceOf(McpError);
    expect((notFound as McpError).code).toBe(-32002);
    expect((notFound as McpError).message).toContain(`vcon_not_found: vCon ${missing} not found`);
    for (const uri of ['vcon://v1/vcons/not-a-uuid', `vcon://v1/vcons/${'-'.repeat(36)}`, 'vcon://v1/vcons/recent']) {
      const bad = await session.client.subscribeResource({ uri }).catch((err: unknown) => err);
      expect((bad as McpError).code, uri).toBe(ErrorCode.InvalidParams);
      expect((bad as McpError).message, uri).toMatch(/uri: .* names no vCon \(.* is not a uuid\)/);
    }
    expect(s.instance.mcp!.stats().subscriptions).toBeLessThanOrEqual(1);
  });
});
