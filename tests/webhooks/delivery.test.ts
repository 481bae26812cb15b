// Webhook delivery against local receivers, with an injected clock: retries, timeouts, a receiver
// that restarts, throttling, 410, disabling after 5 days, leases of a crashed replica, replay and
// the refusal of private targets. Every request is verified with Standard Webhooks' own verifier.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { createChangeService } from '../../src/services/change-service.js';
import { createChangeRepo } from '../../src/db/change-repo.js';
import { createWebhookRepo } from '../../src/db/webhook-repo.js';
import { createWebhookService, RETRY_SCHEDULE_MS, type Clock } from '../../src/services/webhook-service.js';
import { endpointId } from '../../src/domain/webhook-endpoints.js';
import { privateAddressProblem } from '../../src/domain/addresses.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { waitFor } from '../helpers/poll.js';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
let s: TestServer;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});
afterAll(() => s?.close());

class FakeClock implements Clock {
  t = Date.now();
  now() {
    return this.t;
  }
}

/** A webhook service of the test server's schema with its own clock (a replica of the group). */
async function service(urls: string[], opts: { clock?: FakeClock; timeoutMs?: number; allowPrivate?: boolean; start?: boolean } = {}) {
  const clock = opts.clock ?? new FakeClock();
  const changes = createChangeService({ repo: createChangeRepo(s.instance.sql), retentionHours: 168, pollMs: 20 });
  const repo = createWebhookRepo(s.instance.sql);
  const svc = createWebhookService({
    repo,
    changes,
    urls,
    secret,
    allowPrivate: opts.allowPrivate ?? true,
    clock,
    random: () => 0.5,
    timeoutMs: opts.timeoutMs ?? 60_000,
    pollMs: 20,
  });
  if (opts.start !== false) await svc.start();
  cleanups.push(async () => {
    await svc.stop();
    changes.stop();
  });
  return { svc, clock, repo, changes };
}

const create = async (subject = 'hook') => {
  const r = await s.api('/vcons', { method: 'POST', json: { subject, parties: [{ name: 'a' }] } });
  expect(r.status).toBe(201);
  return r.body.uuid as string;
};

interface Delivery {
  id: string;
  state: string;
  attempts: number;
  next_at: Date;
  lease_until: Date | null;
  last_status: number | null;
  last_error: string | null;
  uuid: string;
  kind: string;
}
const rows = (url: string) =>
  s.instance.sql<
    Delivery[]
  >`select id, state, attempts, next_at, lease_until, last_status, last_error, uuid::text, kind from webhook_delivery where endpoint = ${url} order by cursor`;

/**
 * Waits until `done` holds for the deliveries of `url`, moving the clock to when the next one can be
 * sent whenever it does not: the earliest due one, but not before the endpoint's throttle ends (a
 * delivery due meanwhile waits for it, as in real time). Not while an attempt is in flight: a jump
 * past its lease would hand it to another claim mid-attempt, which real time never does within the
 * response timeout. `done` and the move are decided on one read (one statement, one snapshot): an
 * attempt that ended between two reads could otherwise have the clock moved past the state `done`
 * waits for (a refused connection answers within the gap), and the deliveries run on to failed.
 */
const until = (clock: FakeClock, url: string, wake: () => void, done: (all: Delivery[]) => boolean | Promise<boolean>) =>
  waitFor(
    async () => {
      const all = await s.instance.sql<(Delivery & { throttled_until: Date | null })[]>`
        select d.id, d.state, d.attempts, d.next_at, d.lease_until, d.last_status, d.last_error, d.uuid::text, d.kind,
               (select e.throttled_until from webhook_endpoint e where e.url = ${url}) as throttled_until
        from webhook_delivery d where d.endpoint = ${url} order by d.cursor`;
      if (await done(all)) return true;
      const pending = all.filter((d) => d.state === 'pending');
      // Nothing in flight and nothing due before the new time: no attempt can change the rows read.
      if (pending.length > 0 && pending.every((d) => d.lease_until === null)) {
        const t = Math.max(Math.min(...pending.map((d) => d.next_at.getTime())), all[0].throttled_until?.getTime() ?? 0);
        if (t > clock.t) clock.t = t;
      }
      wake();
      return false;
    },
    180_000,
    50,
    `deliveries of ${url}`,
  );

/** Standard Webhooks' verifier, run as of the moment the request was sent (the clock's time then). */
function verify(body: string, headers: Record<string, unknown>, at: number) {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
  try {
    return new Webhook(secret).verify(body, headers as Record<string, string>) as {
      type: string;
      data: { uuid: string; kind: string; cursor: string };
    };
  } finally {
    vi.useRealTimers();
  }
}

describe('webhook delivery', () => {
  it('delivers every event at least once through failures, timeouts and a restart, on the schedule, each attempt signed afresh', async () => {
    const attempts = new Map<string, number>();
    const clock = new FakeClock();
    const sentAt: number[] = [];
    const rx: Receiver = await startReceiver((r) => {
      sentAt.push(clock.t);
      const id = r.headers['webhook-id'] as string;
      const n = (attempts.get(id) ?? 0) + 1;
      attempts.set(id, n);
      return n === 1 ? 500 : n === 2 ? 'hang' : 204;
    });
    cleanups.push(() => rx.stop());
    // Long enough that a loaded machine's answers come well within it; only the hanging ones reach it.
    const { svc } = await service([rx.url], { clock, timeoutMs: 10_000 });
    const uuids = [await create(), await create(), await create()];
    expect((await s.api(`/vcons/${uuids[0]}/tags/stage`, { method: 'PUT', json: { value: 'x' } })).status).toBeLessThan(300);
    expect((await s.api(`/vcons/${uuids[1]}`, { method: 'DELETE' })).status).toBeLessThan(300);
    const want = 5;

    // The first attempts fail with 500: each waits exactly the schedule's 5 s (jitter fixed at its middle).
    await waitFor(async () => {
      const r = await rows(rx.url);
      return r.length === want && r.every((d) => d.attempts === 1 && d.lease_until === null && d.last_status === 500);
    });
    for (const d of await rows(rx.url)) expect(d.next_at.getTime() - clock.t).toBe(RETRY_SCHEDULE_MS[1]);

    // The second attempts get no answer within the timeout: the next waits 5 min.
    const failedAt = clock.t + RETRY_SCHEDULE_MS[1];
    await until(clock, rx.url, svc.wake, (all) =>
      all.every((d) => d.attempts === 2 && d.lease_until === null && /no response within 10 s/.test(d.last_error ?? '')),
    );
    for (const d of await rows(rx.url)) expect(d.next_at.getTime() - failedAt).toBe(RETRY_SCHEDULE_MS[2]);
    for (const res of rx.hanging.splice(0)) res.destroy();

    // The receiver is down when they come due: connection refused, then back on its port.
    await rx.stop();
    await until(clock, rx.url, svc.wake, (all) => all.every((d) => d.attempts === 3 && d.lease_until === null));
    // The delivery keeps the error in full; the endpoint's last error (keyless /health shows it) names no address.
    expect((await rows(rx.url))[0].last_error).toContain(`127.0.0.1:${rx.port}`);
    expect((await svc.list())[0]).toMatchObject({
      state: 'failing',
      last_error: 'connection refused',
      last_error_at: new Date(clock.t).toISOString(),
    });
    await rx.start();
    await until(clock, rx.url, svc.wake, (all) => all.every((d) => d.state === 'delivered'));

    // Every request, failed or not, carries a valid signature; the id is the same on every attempt
    // and each attempt has its own timestamp and signature.
    const byId = new Map<string, { ts: string; sig: string }[]>();
    const events: string[] = [];
    rx.received.forEach((r, i) => {
      const msg = verify(r.body, r.headers, sentAt[i]);
      const id = r.headers['webhook-id'] as string;
      byId.set(id, [...(byId.get(id) ?? []), { ts: r.headers['webhook-timestamp'] as string, sig: r.headers['webhook-signature'] as string }]);
      if (!events.includes(`${msg.data.uuid}:${msg.data.kind}`)) events.push(`${msg.data.uuid}:${msg.data.kind}`);
      expect(msg.type).toBe(`vcon.${msg.data.kind}`);
    });
    expect(byId.size).toBe(want);
    for (const tries of byId.values()) {
      expect(tries.length).toBe(3); // 500, timeout, 204 (the attempts while down never reached it)
      expect(new Set(tries.map((t) => t.ts)).size).toBe(3);
      expect(new Set(tries.map((t) => t.sig)).size).toBe(3);
    }
    expect(events.sort()).toEqual([...uuids.map((u) => `${u}:created`), `${uuids[0]}:tags_changed`, `${uuids[1]}:deleted`].sort());
  });

  it('a dead endpoint delays no other: the live one gets everything while the dead one holds requests open', async () => {
    const dead = await startReceiver(() => 'hang');
    const live = await startReceiver(() => 204);
    cleanups.push(async () => {
      await dead.stop();
      await live.stop();
    });
    await service([dead.url, live.url]);
    const uuids = [];
    for (let i = 0; i < 8; i++) uuids.push(await create());
    await waitFor(() => live.received.length >= 8 && dead.hanging.length >= 1);
    const got = live.received.map((r) => (JSON.parse(r.body) as { data: { uuid: string } }).data.uuid);
    expect(new Set(got)).toEqual(new Set(uuids));
  });

  it('429 with Retry-After throttles the endpoint; 410 disables it until enabled; /health names it', async () => {
    let mode: 'throttle' | 'gone' | 'ok' = 'throttle';
    const rx = await startReceiver(() => (mode === 'throttle' ? { status: 429, headers: { 'retry-after': '120' } } : mode === 'gone' ? 410 : 204));
    cleanups.push(() => rx.stop());
    const { svc, clock } = await service([rx.url]);
    const id = endpointId(rx.url);
    await create();
    await waitFor(async () => (await svc.list()).find((e) => e.id === id)?.state === 'throttled');
    const [d] = await rows(rx.url);
    expect(d.next_at.getTime() - clock.t).toBe(120_000);
    const ep = (await svc.list())[0];
    expect(new Date(ep.throttled_until!).getTime() - clock.t).toBe(120_000);
    // A write while throttled is due at once but waits for the throttle: nothing is claimed before it ends.
    const during = await create();
    await waitFor(async () => (await rows(rx.url)).some((r) => r.uuid === during));
    expect(await createWebhookRepo(s.instance.sql).claim(rx.url, new Date(clock.t + 119_000), 1000, 10)).toEqual([]);
    expect((await rows(rx.url)).find((r) => r.uuid === during)?.attempts).toBe(0);

    mode = 'gone';
    await until(clock, rx.url, svc.wake, async () => (await svc.list())[0].state === 'disabled');
    expect((await svc.list())[0].disabled_reason).toBe('answered 410 Gone');
    const at = new Date(clock.t).toISOString();
    expect(await svc.health()).toEqual([
      {
        id,
        state: 'disabled',
        failing_since: expect.any(String),
        disabled_at: at,
        disabled_reason: 'answered 410 Gone',
        last_error: 'answered 410',
        last_error_at: at,
      },
    ]);
    const before = rx.received.length;
    const later = await create();
    await svc.enable(id);
    mode = 'ok';
    await until(
      clock,
      rx.url,
      svc.wake,
      (all) => all.every((r) => r.state === 'delivered') && [during, later].every((u) => all.some((r) => r.uuid === u)),
    );
    expect(rx.received.length).toBeGreaterThan(before);
  });

  it('an endpoint failing for 5 days is disabled; failed deliveries are listed and replayed with the same id', async () => {
    let ok = false;
    const rx = await startReceiver(() => (ok ? 204 : 503));
    cleanups.push(() => rx.stop());
    const { svc, clock } = await service([rx.url]);
    const first = await create();
    // Every attempt of the schedule fails: the delivery has failed for good.
    await until(clock, rx.url, svc.wake, (all) => all[0]?.state === 'failed');
    expect((await rows(rx.url))[0].attempts).toBe(RETRY_SCHEDULE_MS.length);
    expect((await svc.list())[0].state).toBe('failing');
    const failed = await svc.failed({ endpoint: endpointId(rx.url) });
    expect(failed.map((f) => [f.uuid, f.attempts, f.last_status])).toEqual([[first, RETRY_SCHEDULE_MS.length, 503]]);

    // Two days on, the next write's first attempt fails too: failing since over 5 days, disabled.
    clock.t += 2 * 86_400_000;
    await create();
    await waitFor(async () => (await svc.list())[0].state === 'disabled');
    expect((await svc.list())[0].disabled_reason).toBe('failing for 5 days');

    ok = true;
    await svc.enable(endpointId(rx.url));
    expect(await svc.replayDelivery(failed[0].id)).toBe(1);
    await until(clock, rx.url, svc.wake, (all) => all.every((r) => r.state === 'delivered'));
    const ids = rx.received.filter((r) => (JSON.parse(r.body) as { data: { uuid: string } }).data.uuid === first).map((r) => r.headers['webhook-id']);
    expect(new Set(ids)).toEqual(new Set([failed[0].id]));
    expect(ids.length).toBe(RETRY_SCHEDULE_MS.length + 1);
  });

  it('a new endpoint starts at the end of the log, even while an older transaction runs', async () => {
    const earlier = await create('before the endpoint');
    const rx = await startReceiver(() => 204);
    cleanups.push(() => rx.stop());
    // A transaction with an id, open while the endpoint registers: the horizon cannot pass it yet.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let opened!: () => void;
    const isOpen = new Promise<void>((r) => (opened = r));
    const held = s.instance.sql.begin(async (tx) => {
      await tx`select pg_current_xact_id()`;
      opened();
      await gate;
    });
    await isOpen;
    let samples = 0;
    const base = createChangeRepo(s.instance.sql);
    const changes = createChangeService({ repo: { ...base, sample: () => (samples++, base.sample()) }, retentionHours: 168, pollMs: 20 });
    const svc = createWebhookService({ repo: createWebhookRepo(s.instance.sql), changes, urls: [rx.url], secret, allowPrivate: true, pollMs: 20 });
    cleanups.push(async () => {
      release();
      await svc.stop();
      changes.stop();
    });
    const started = svc.start();
    const registered = async () => (await s.instance.sql`select 1 from webhook_endpoint where url = ${rx.url}`).length > 0;
    try {
      // Either registered already (at a horizon below the writes before it), or still waiting on the transaction.
      await waitFor(async () => samples >= 3 || (await registered()));
    } finally {
      release();
      await held;
    }
    await started;
    const later = await create('after the endpoint');
    await waitFor(() => rx.received.some((r) => r.body.includes(later)));
    const got = rx.received.map((r) => (JSON.parse(r.body) as { data: { uuid: string } }).data.uuid);
    expect(got).not.toContain(earlier);
    expect(got).toEqual([later]);
  });

  it("a crashed replica's claim is taken over once its lease expires, never before", async () => {
    const rx = await startReceiver(() => 204);
    cleanups.push(() => rx.stop());
    const { svc, clock, repo, changes } = await service([rx.url], { start: false });
    await repo.register([rx.url], await changes.settledHorizon());
    const uuid = await create();
    await waitFor(async () => (await repo.enqueue([rx.url], await changes.horizonNow(), new Date(clock.t))) > 0);
    // The crashed replica claimed it for 60 s and never answered.
    expect((await repo.claim(rx.url, new Date(clock.t), 60_000, 10)).map((d) => d.uuid)).toEqual([uuid]);
    await svc.start();
    expect(await repo.claim(rx.url, new Date(clock.t + 59_000), 60_000, 10)).toEqual([]);
    clock.t += 60_000;
    svc.wake();
    await waitFor(async () => (await rows(rx.url))[0].state === 'delivered');
    expect((await rows(rx.url))[0].attempts).toBe(2);
    expect(rx.received.length).toBe(1);
  });

  it('refuses a private target without WEBHOOK_ALLOW_PRIVATE, whatever the name resolves to', async () => {
    const rx = await startReceiver(() => 204);
    cleanups.push(() => rx.stop());
    // A name, not a literal: the address is known only when the connection resolves it.
    const url = rx.url.replace('127.0.0.1', 'localhost');
    await service([url], { allowPrivate: false });
    await create();
    await waitFor(async () => (await rows(url))[0]?.last_error);
    expect((await rows(url))[0].last_error).toMatch(/^refused: localhost resolves to .* private, loopback/);
    expect(rx.received).toEqual([]);
  });

  it('classifies addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.100.100.200',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
    ])
      expect(privateAddressProblem(a), a).toMatch(/private/);
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(privateAddressProblem(a), a).toBeUndefined();
  });
});
