// Webhooks of whole servers: two groups, each with its receiver, see only their own events; no
// API key reaches a delivery or a log line; read-only keys read the webhook routes but change
// nothing; /health names each endpoint's state; WEBHOOK_* are validated like every variable.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { ConfigError, parseConfig } from '../../src/config.js';
import { endpointId } from '../../src/domain/webhook-endpoints.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { waitFor } from '../helpers/poll.js';

const secretA = `whsec_${randomBytes(32).toString('base64')}`;
const secretB = `whsec_${randomBytes(24).toString('base64')}`;
let a: TestServer;
let b: TestServer;
let rxA: Receiver;
let rxB: Receiver;
const logs: string[] = [];

beforeAll(async () => {
  rxA = await startReceiver(() => 204);
  rxB = await startReceiver(() => 204);
  const logTo = { write: (l: string) => void logs.push(l) };
  a = await startTestServer({ WEBHOOK_URLS: rxA.url, WEBHOOK_SECRET: secretA, WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'debug' }, { logTo });
  b = await startTestServer({ WEBHOOK_URLS: rxB.url, WEBHOOK_SECRET: secretB, WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'debug' }, { logTo });
  // The endpoints are registered (their start cursor taken) before the writes below.
  await waitFor(async () => (await a.api('/webhooks')).body.data?.length === 1 && (await b.api('/webhooks')).body.data?.length === 1);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await rxA?.stop();
  await rxB?.stop();
});

const create = async (t: TestServer) => {
  const r = await t.api('/vcons', { method: 'POST', json: { subject: 'group hook', parties: [{ name: 'p' }] } });
  expect(r.status).toBe(201);
  return r.body.uuid as string;
};

describe('webhooks of a group', () => {
  it("delivers each group's events to its own receiver only, signed with its own secret, with no API key anywhere", async () => {
    const ofA = [await create(a), await create(a)];
    const ofB = [await create(b)];
    const uuidsOf = (rx: Receiver) => rx.received.map((r) => (JSON.parse(r.body) as { data: { uuid: string } }).data.uuid);
    await waitFor(() => ofA.every((u) => uuidsOf(rxA).includes(u)) && ofB.every((u) => uuidsOf(rxB).includes(u)));
    expect(new Set(uuidsOf(rxA))).toEqual(new Set(ofA));
    expect(new Set(uuidsOf(rxB))).toEqual(new Set(ofB));
    for (const r of rxA.received) new Webhook(secretA).verify(r.body, r.headers as Record<string, string>);
    for (const r of rxB.received) new Webhook(secretB).verify(r.body, r.headers as Record<string, string>);
    expect(() => new Webhook(secretB).verify(rxA.received[0].body, rxA.received[0].headers as Record<string, string>)).toThrow();
    const everything = [...rxA.received, ...rxB.received].map((r) => JSON.stringify(r)).join('\n') + logs.join('\n');
    for (const secret of [KEY, RO_KEY, secretA, secretB]) expect(everything).not.toContain(secret);
  });

  it('lists endpoints to a read-only key and refuses it replay and enable; /health shows the state', async () => {
    const id = endpointId(rxA.url);
    const list = await a.api('/webhooks', { key: RO_KEY });
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([expect.objectContaining({ id, url: rxA.url, state: 'active', failed: 0 })]);
    for (const path of [`/webhooks/${id}/replay`, `/webhooks/${id}/enable`, `/webhooks/failed/msg_${'0'.repeat(32)}/replay`]) {
      const r = await a.api(path, { method: 'POST', key: RO_KEY });
      expect(r.status, path).toBe(403);
    }
    expect((await a.api(`/webhooks/${id}/enable`, { method: 'POST' })).status).toBe(200);
    expect((await a.api(`/webhooks/${id}/replay`, { method: 'POST' })).body).toEqual({ success: true, replayed: 0 });
    const health = await a.api('/health', { key: null });
    expect(health.body.webhooks).toEqual([
      { id, state: 'active', failing_since: null, disabled_at: null, disabled_reason: null, last_error: null, last_error_at: null },
    ]);
    expect((await a.api('/webhooks/failed', { key: RO_KEY })).body).toEqual({ success: true, data: [] });
  });

  it('answers bad ids and parameters with a 400 or 404 naming them', async () => {
    const bad = await a.api('/webhooks/nope/enable', { method: 'POST' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      error: 'invalid_parameter',
      details: [{ path: 'endpoint', message: expect.stringMatching(/must be an endpoint id/) }],
    });
    const unknown = await a.api(`/webhooks/ep_${'0'.repeat(12)}/enable`, { method: 'POST' });
    expect(unknown.status).toBe(404);
    const missing = await a.api(`/webhooks/failed/msg_${'0'.repeat(32)}/replay`, { method: 'POST' });
    expect(missing.status).toBe(404);
    const limit = await a.api('/webhooks/failed?limit=x');
    expect(limit.status).toBe(400);
    expect(JSON.stringify(limit.body)).toMatch(/limit/);
  });

  it('validates WEBHOOK_URLS, WEBHOOK_SECRET and private literals at start', () => {
    const base = { WEBHOOK_ALLOW_PRIVATE: 'true' };
    const problem = (env: Record<string, string>) => {
      try {
        parseConfig(env);
      } catch (err) {
        return (err as ConfigError).problems.map((p) => `${p.variable}: ${p.message}`).join('; ');
      }
      return 'accepted';
    };
    expect(problem({ ...base, WEBHOOK_URLS: 'https://hooks.example.com/x' })).toMatch(/^WEBHOOK_SECRET: WEBHOOK_URLS is set/);
    expect(problem({ ...base, WEBHOOK_URLS: 'ftp://x', WEBHOOK_SECRET: secretA })).toMatch(/^WEBHOOK_URLS: "ftp:\/\/x" must be an http/);
    expect(problem({ WEBHOOK_SECRET: 'secret' })).toMatch(/^WEBHOOK_SECRET: must be whsec_/);
    expect(problem({ WEBHOOK_SECRET: `whsec_${randomBytes(8).toString('base64')}` })).toMatch(/^WEBHOOK_SECRET: must be whsec_/);
    expect(problem({ WEBHOOK_URLS: 'http://127.0.0.1:9/x', WEBHOOK_SECRET: secretA })).toMatch(/^WEBHOOK_URLS: .* WEBHOOK_ALLOW_PRIVATE=true/);
    expect(problem({ WEBHOOK_URLS: 'http://[::1]:9/x', WEBHOOK_SECRET: secretA })).toMatch(/WEBHOOK_ALLOW_PRIVATE=true/);
    expect(problem({ ...base, WEBHOOK_URLS: 'http://127.0.0.1:9/x', WEBHOOK_SECRET: secretA })).toBe('accepted');
    expect(problem({ WEBHOOK_URLS: 'https://hooks.example.com/x', WEBHOOK_SECRET: secretB })).toBe('accepted');
  });
});
