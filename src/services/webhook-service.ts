// Webhooks (docs/webhooks.md): every change log entry of the group is delivered to each URL of
// WEBHOOK_URLS, signed per Standard Webhooks, at least once, from delivery rows every replica
// shares (0004_webhooks.sql).
import { Webhook } from 'standardwebhooks';
import { AppError } from '../domain/errors.js';
import { endpointId, redactUrl, type EndpointHealth } from '../domain/webhook-endpoints.js';
import { parseParams, WebhookFailedQuery } from '../domain/params.js';
import type { WebhookRepo, ClaimedDelivery, EndpointRow } from '../db/webhook-repo.js';
import type { ChangeService } from './change-service.js';
import { createSender, type Sender, type SendResult } from './webhook-sender.js';

/** Standard Webhooks' schedule: the delay before each attempt (the first at once); then the delivery has failed. */
export const RETRY_SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000];
/** An endpoint failing this long (no success in between) is disabled. */
export const DISABLE_AFTER_MS = 5 * 86_400_000;
/** How long a receiver has to answer. */
export const RESPONSE_TIMEOUT_MS = 15_000;
/** Attempts in flight per endpoint per process. */
const CONCURRENCY = 4;
/** The longest Retry-After honoured (a larger one waits this long). */
const MAX_RETRY_AFTER_MS = 86_400_000;
/** How long finished deliveries are kept (like the change log's default retention). */
const KEEP_FINISHED_MS = 7 * 86_400_000;

/** The time, injectable so schedules are tested without waiting. */
export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

export interface WebhookServiceDeps {
  repo: WebhookRepo;
  changes: Pick<ChangeService, 'settledHorizon' | 'horizon' | 'watch'>;
  urls: readonly string[];
  /** WEBHOOK_SECRET (whsec_…). */
  secret: string | undefined;
  allowPrivate: boolean;
  log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void; error(obj: object, msg: string): void };
  clock?: Clock;
  /** 0..1, for the jitter of retry delays. */
  random?: () => number;
  timeoutMs?: number;
  /** How often due deliveries are looked for when nothing wakes the sender (another replica's writes, retries coming due). */
  pollMs?: number;
  /** The version sent in User-Agent. */
  version?: string;
  sender?: Sender;
}

/** An endpoint as GET /webhooks shows it: the URL without credentials or query (they may hold tokens). */
export interface EndpointView {
  id: string;
  url: string;
  state: EndpointHealth['state'];
  failing_since: string | null;
  throttled_until: string | null;
  disabled_at: string | null;
  disabled_reason: string | null;
  /** What the last failed attempt came to, in words that name no host ("answered 500", "connection refused"); kept after a success. */
  last_error: string | null;
  last_error_at: string | null;
  pending: number;
  failed: number;
  delivered: number;
}

/** The delay before attempt `attempts + 1` (with ±10 % jitter), or null when `attempts` were the last. */
export function retryDelay(attempts: number, random: () => number): number | null {
  if (attempts >= RETRY_SCHEDULE_MS.length) return null;
  return Math.round(RETRY_SCHEDULE_MS[attempts] * (0.9 + 0.2 * random()));
}

/** Retry-After as milliseconds from `now` (seconds or an HTTP date), bounded; undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  const ms = /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - now;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS);
}

/** The body of a delivery: Standard Webhooks' type, timestamp and data (the thin entry, as the stream shows it). */
export function payloadOf(d: Pick<ClaimedDelivery, 'cursor' | 'uuid' | 'kind' | 'time'>): string {
  return JSON.stringify({ type: `vcon.${d.kind}`, timestamp: d.time, data: { cursor: d.cursor, uuid: d.uuid, kind: d.kind, time: d.time } });
}

const isoOrNull = (d: Date | null) => (d ? d.toISOString() : null);

export function createWebhookService(deps: WebhookServiceDeps) {
  const { repo, urls } = deps;
  const clock = deps.clock ?? systemClock;
  const random = deps.random ?? Math.random;
  const timeoutMs = deps.timeoutMs ?? RESPONSE_TIMEOUT_MS;
  // A claim outlives the response timeout: a crashed replica's claims are taken over after it.
  const leaseMs = timeoutMs * 2 + 5_000;
  const pollMs = deps.pollMs ?? 1_000;
  const signer = deps.secret ? new Webhook(deps.secret) : undefined;
  const sender = deps.sender ?? createSender({ allowPrivate: deps.allowPrivate, timeoutMs });
  const byId = new Map(urls.map((u) => [endpointId(u), u]));
  const stopping = new AbortController();
  const loops: Promise<void>[] = [];
  /** Per endpoint: resolves the sleeping loop early. */
  const wakers = new Map<string, () => void>();
  let enqueueWaker: () => void = () => undefined;
  const now = () => new Date(clock.now());
  const userAgent = `vcon-launch/${deps.version ?? 'dev'}`;

  const sleep = (ms: number, set: (wake: () => void) => void) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        stopping.signal.removeEventListener('abort', done);
        resolve();
      }
      set(done);
      stopping.signal.addEventListener('abort', done, { once: true });
    });

  /** One attempt of one delivery, and what follows from its answer. */
  async function attempt(url: string, d: ClaimedDelivery): Promise<void> {
    const body = payloadOf(d);
    const at = now();
    // Signed afresh at each attempt (receivers refuse old timestamps); the id stays the delivery's.
    const headers = {
      'content-type': 'application/json',
      'user-agent': userAgent,
      'webhook-id': d.id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signer!.sign(d.id, at, body),
    };
    const r: SendResult = await sender.send(url, headers, body);
    const done = now();
    const id = endpointId(url);
    if (r.status !== null && r.status >= 200 && r.status < 300) {
      await repo.delivered(url, d.id, r.status, done);
      return;
    }
    const status = r.status;
    const error =
      r.status === null ? r.error : r.status >= 300 && r.status < 400 ? `answered ${r.status} (redirects are not followed)` : `answered ${r.status}`;
    // The endpoint's last error names no host: /health shows it without a key.
    const reason = r.status === null ? r.reason : error;
    const delay = retryDelay(d.attempts, random);
    const after = r.status === null ? undefined : retryAfterMs(r.retryAfter, done.getTime());
    const throttle = status === 429 || status === 502 || status === 504 || after !== undefined;
    // Throttled: nothing goes to the endpoint before Retry-After (else the schedule's next delay).
    const throttleMs = throttle ? (after ?? delay ?? RETRY_SCHEDULE_MS[1]) : undefined;
    const nextAt = delay === null ? null : new Date(done.getTime() + Math.max(delay, throttleMs ?? 0));
    const disable = status === 410 ? 'answered 410 Gone' : null;
    const disabled = await repo.failed(
      url,
      d.id,
      { status, error, reason, nextAt, throttleUntil: throttleMs === undefined ? null : new Date(done.getTime() + throttleMs), disable },
      done,
      new Date(done.getTime() - DISABLE_AFTER_MS),
    );
    deps.log?.warn(
      { endpoint: id, delivery: d.id, attempt: d.attempts, status, error, next_at: nextAt?.toISOString() ?? null, disabled },
      nextAt ? 'webhook delivery failed; will retry' : 'webhook delivery failed for good',
    );
  }

  /** Sends one endpoint's due deliveries, CONCURRENCY at a time: its slowness is its own. */
  async function runEndpoint(url: string): Promise<void> {
    const id = endpointId(url);
    const inFlight = new Set<Promise<void>>();
    while (!stopping.signal.aborted) {
      let claimed: ClaimedDelivery[] = [];
      try {
        if (inFlight.size < CONCURRENCY) claimed = await repo.claim(url, now(), leaseMs, CONCURRENCY - inFlight.size);
      } catch (err) {
        deps.log?.warn({ endpoint: id, err: (err as Error).message }, 'webhook deliveries not claimed');
      }
      for (const d of claimed) {
        const p: Promise<void> = attempt(url, d)
          .catch((err: Error) => deps.log?.error({ endpoint: id, delivery: d.id, err: err.message }, 'webhook delivery not recorded'))
          .finally(() => {
            inFlight.delete(p);
            wakers.get(url)?.();
          });
        inFlight.add(p);
      }
      if (claimed.length > 0 && inFlight.size < CONCURRENCY) continue;
      await sleep(pollMs, (wake) => wakers.set(url, wake));
    }
    // Attempts still in flight get a moment to record their answer; one cut off is sent again once its lease expires.
    await Promise.race([Promise.allSettled(inFlight), new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
  }

  /** Turns new change log entries into deliveries whenever the horizon moves (and every pollMs). */
  async function runEnqueue(): Promise<void> {
    deps.changes.watch(() => enqueueWaker(), stopping.signal);
    while (!stopping.signal.aborted) {
      try {
        const made = await repo.enqueue(urls, deps.changes.horizon, now());
        if (made > 0) for (const wake of wakers.values()) wake();
        if (made > 0) continue;
      } catch (err) {
        deps.log?.warn({ err: (err as Error).message }, 'webhook deliveries not enqueued');
      }
      await sleep(pollMs, (wake) => (enqueueWaker = wake));
    }
  }

  function view(e: EndpointRow): EndpointView {
    const t = clock.now();
    const state = e.disabled_at
      ? 'disabled'
      : e.throttled_until && e.throttled_until.getTime() > t
        ? 'throttled'
        : e.failing_since
          ? 'failing'
          : 'active';
    return {
      id: endpointId(e.url),
      url: redactUrl(e.url),
      state,
      failing_since: isoOrNull(e.failing_since),
      throttled_until: isoOrNull(e.throttled_until),
      disabled_at: isoOrNull(e.disabled_at),
      disabled_reason: e.disabled_reason,
      last_error: e.last_error,
      last_error_at: isoOrNull(e.last_error_at),
      pending: e.pending,
      failed: e.failed,
      delivered: e.delivered,
    };
  }

  function wake(): void {
    enqueueWaker();
    for (const w of wakers.values()) w();
  }

  const urlOf = (id: string): string => {
    const url = byId.get(id);
    if (!url) throw new AppError(404, 'webhook_not_found', `no webhook endpoint ${id}; GET /webhooks lists them`);
    return url;
  };

  let started: Promise<void> | undefined;
  async function begin(): Promise<void> {
    if (urls.length === 0) return;
    await repo.register(urls, await deps.changes.settledHorizon());
    loops.push(runEnqueue(), ...urls.map((u) => runEndpoint(u)));
    const prune = setInterval(() => {
      repo.prune(new Date(clock.now() - KEEP_FINISHED_MS), 10_000).catch(() => undefined);
    }, 600_000);
    prune.unref();
    stopping.signal.addEventListener('abort', () => clearInterval(prune), { once: true });
  }

  return {
    /** Whether any URL is configured. */
    enabled: urls.length > 0,

    /** Registers the endpoints and starts sending (nothing without WEBHOOK_URLS). */
    start(): Promise<void> {
      return (started ??= begin());
    },

    /** Resolves once start has registered the endpoints (or failed to). */
    ready(): Promise<void> {
      return (started ?? Promise.resolve()).catch(() => undefined);
    },

    /** Looks for due deliveries now (tests advance the clock, then wake). */
    wake,

    /** GET /webhooks: the endpoints, their state and counts. */
    async list(): Promise<EndpointView[]> {
      return (await repo.endpoints(urls)).map(view);
    },

    /** GET /webhooks/failed: deliveries whose attempts ran out, newest first. */
    async failed(raw: unknown) {
      const q = parseParams(WebhookFailedQuery, raw);
      const rows = await repo.failedList(urls, q.limit, q.endpoint === undefined ? undefined : urlOf(q.endpoint));
      return rows.map(({ endpoint, ...r }) => ({ ...r, endpoint: endpointId(endpoint) }));
    },

    /** POST /webhooks/failed/{id}/replay: one failed delivery is sent again (same webhook-id). */
    async replayDelivery(id: string): Promise<number> {
      const n = await repo.replay(urls, now(), { id });
      if (n === 0) throw new AppError(404, 'delivery_not_found', `no failed delivery ${id}; GET /webhooks/failed lists them`);
      wake();
      return n;
    },

    /** POST /webhooks/{id}/replay: every failed delivery of the endpoint is sent again. */
    async replayEndpoint(id: string): Promise<number> {
      const n = await repo.replay(urls, now(), { endpoint: urlOf(id) });
      wake();
      return n;
    },

    /** POST /webhooks/{id}/enable: a disabled endpoint receives again, from where it stopped. */
    async enable(id: string): Promise<void> {
      await repo.enable(urlOf(id));
      wake();
    },

    /** For /health and `vcon-launch status`: each endpoint's state and why (no URL: /health answers without a key). */
    async health(): Promise<EndpointHealth[] | null> {
      if (urls.length === 0) return null;
      return (await repo.endpoints(urls)).map(view).map(({ id, state, failing_since, disabled_at, disabled_reason, last_error, last_error_at }) => ({
        id,
        state,
        failing_since,
        disabled_at,
        disabled_reason,
        last_error,
        last_error_at,
      }));
    },

    /** Stops sending; attempts in flight finish (bounded by the response timeout). */
    async stop(): Promise<void> {
      stopping.abort();
      await Promise.allSettled(loops);
      sender.close();
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
