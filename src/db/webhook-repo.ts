import type { Sql } from './client.js';

/** A delivery as a sender claims it: the message and how many attempts it has had (this one counted). */
export interface ClaimedDelivery {
  id: string;
  cursor: string;
  uuid: string;
  kind: string;
  time: string;
  attempts: number;
}

/** An endpoint's shared state (0004_webhooks.sql). */
export interface EndpointRow {
  url: string;
  failing_since: Date | null;
  throttled_until: Date | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
  last_error: string | null;
  last_error_at: Date | null;
  pending: number;
  failed: number;
  delivered: number;
}

/** A delivery as the failed list shows it. */
export interface DeliveryRow {
  id: string;
  endpoint: string;
  cursor: string;
  uuid: string;
  kind: string;
  state: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  finished_at: string | null;
}

/** Entries turned into deliveries per statement. */
const ENQUEUE_CHUNK = 1000;

const iso = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Webhook endpoints and deliveries (0004_webhooks.sql). Every time is the caller's clock, passed
 * in, so retry schedules and leases are tested without waiting. Shared by the replicas of a group:
 * claims use FOR UPDATE SKIP LOCKED and leases, never LISTEN or session state.
 */
export function createWebhookRepo(sql: Sql) {
  return {
    /** Registers the configured URLs (a new one starts at `horizon`); the others' rows stay, unsent. */
    async register(urls: readonly string[], horizon: bigint): Promise<void> {
      if (urls.length === 0) return;
      await sql`
        insert into webhook_endpoint (url, enqueued_through)
        select u, ${horizon.toString()}::bigint from unnest(${urls as string[]}::text[]) as u
        on conflict (url) do nothing`;
    },

    /**
     * Turns change log entries up to `horizon` into deliveries for each enabled endpoint of `urls`
     * (at most ENQUEUE_CHUNK per endpoint per call); an endpoint another replica is enqueuing for is
     * skipped. Returns how many deliveries were made. Idempotent: (endpoint, cursor) is unique.
     */
    async enqueue(urls: readonly string[], horizon: bigint, now: Date): Promise<number> {
      if (urls.length === 0) return 0;
      return sql.begin(async (tx) => {
        const eps = await tx<{ url: string; through: string }[]>`
          select url, enqueued_through::text as through from webhook_endpoint
          where url = any(${urls as string[]}::text[]) and disabled_at is null and enqueued_through < ${horizon.toString()}::bigint
          order by url for update skip locked`;
        let made = 0;
        for (const ep of eps) {
          const [r] = await tx<{ n: number; last: string | null; read: number }[]>`
            with c as (
              select cursor, uuid, kind, time from change_log
              where cursor > ${ep.through}::bigint and cursor <= ${horizon.toString()}::bigint
              order by cursor limit ${ENQUEUE_CHUNK}),
            ins as (
              insert into webhook_delivery (id, endpoint, cursor, uuid, kind, time, next_at)
              select 'msg_' || replace(gen_random_uuid()::text, '-', ''), ${ep.url}, cursor, uuid, kind, time, ${now} from c
              on conflict (endpoint, cursor) do nothing returning 1)
            select (select count(*)::int from ins) as n, (select max(cursor)::text from c) as last, (select count(*)::int from c) as read`;
          // A full chunk may have left entries below the horizon: the next call goes on from its last.
          const through = r.read === ENQUEUE_CHUNK && r.last !== null ? r.last : horizon.toString();
          await tx`update webhook_endpoint set enqueued_through = greatest(enqueued_through, ${through}::bigint) where url = ${ep.url}`;
          made += r.n;
        }
        return made;
      });
    },

    /**
     * Claims up to `max` due deliveries of one endpoint, oldest first, for `leaseMs`: their attempt
     * count goes up now, so an attempt cut short by a crash still counts. None while the endpoint is
     * throttled or disabled.
     */
    async claim(url: string, now: Date, leaseMs: number, max: number): Promise<ClaimedDelivery[]> {
      const until = new Date(now.getTime() + leaseMs);
      return sql<ClaimedDelivery[]>`
        update webhook_delivery d set attempts = d.attempts + 1, lease_until = ${until}
        where d.id in (
          select id from webhook_delivery
          where endpoint = ${url} and state = 'pending' and next_at <= ${now} and (lease_until is null or lease_until <= ${now})
            and exists (select 1 from webhook_endpoint e where e.url = ${url} and e.disabled_at is null
                        and (e.throttled_until is null or e.throttled_until <= ${now}))
          order by next_at, cursor limit ${max}
          for update skip locked)
        returning d.id, d.cursor::text, d.uuid::text, d.kind, ${sql.unsafe(iso('d.time'))} as time, d.attempts`;
    },

    /** The attempt succeeded: the delivery is done and the endpoint is no longer failing. */
    async delivered(url: string, id: string, status: number, now: Date): Promise<void> {
      await sql`
        with d as (update webhook_delivery set state = 'delivered', lease_until = null, last_status = ${status}, last_error = null,
                   finished_at = ${now} where id = ${id} returning 1)
        update webhook_endpoint set failing_since = null where url = ${url} and failing_since is not null`;
    },

    /**
     * The attempt failed: the delivery waits until `nextAt`, or has failed for good when `nextAt` is
     * null; the endpoint is marked failing (since now unless it was already), throttled until
     * `throttleUntil`, and disabled with `disable` as the reason, or when it has been failing since
     * before `disableIfFailingSince`; its last error becomes `reason` (`error` stays the delivery's).
     * Returns whether the endpoint is now disabled.
     */
    async failed(
      url: string,
      id: string,
      r: { status: number | null; error: string; reason: string; nextAt: Date | null; throttleUntil: Date | null; disable: string | null },
      now: Date,
      disableIfFailingSince: Date,
    ): Promise<boolean> {
      await sql`
        update webhook_delivery set lease_until = null, last_status = ${r.status}, last_error = ${r.error.slice(0, 500)},
          state = ${r.nextAt ? 'pending' : 'failed'}, next_at = coalesce(${r.nextAt}::timestamptz, next_at),
          finished_at = ${r.nextAt ? null : now}
        where id = ${id}`;
      const [e] = await sql<{ disabled: boolean }[]>`
        update webhook_endpoint set
          failing_since = coalesce(failing_since, ${now}),
          last_error = ${r.reason.slice(0, 500)}, last_error_at = ${now},
          throttled_until = case when ${r.throttleUntil}::timestamptz is null then throttled_until
                                 else greatest(coalesce(throttled_until, ${r.throttleUntil}::timestamptz), ${r.throttleUntil}::timestamptz) end,
          disabled_reason = case when disabled_at is not null then disabled_reason
                                 when ${r.disable}::text is not null then ${r.disable}::text
                                 when coalesce(failing_since, ${now}) <= ${disableIfFailingSince} then 'failing for 5 days' end,
          disabled_at = case when disabled_at is not null then disabled_at
                             when ${r.disable}::text is not null or coalesce(failing_since, ${now}) <= ${disableIfFailingSince} then ${now} end
        where url = ${url}
        returning disabled_at is not null as disabled`;
      return e?.disabled ?? false;
    },

    /** Lets a claimed delivery go without an attempt (the process is stopping): it is due again at once. */
    async release(id: string): Promise<void> {
      await sql`update webhook_delivery set lease_until = null, attempts = greatest(attempts - 1, 0) where id = ${id} and state = 'pending'`;
    },

    /** Every endpoint of `urls` with its counts. */
    async endpoints(urls: readonly string[]): Promise<EndpointRow[]> {
      if (urls.length === 0) return [];
      return sql<EndpointRow[]>`
        select e.url, e.failing_since, e.throttled_until, e.disabled_at, e.disabled_reason, e.last_error, e.last_error_at,
               count(*) filter (where d.state = 'pending')::int as pending,
               count(*) filter (where d.state = 'failed')::int as failed,
               count(*) filter (where d.state = 'delivered')::int as delivered
        from webhook_endpoint e left join webhook_delivery d on d.endpoint = e.url
        where e.url = any(${urls as string[]}::text[])
        group by e.url order by e.url`;
    },

    /** Failed deliveries of `urls`, newest first, after the delivery `before` (a page). */
    async failedList(urls: readonly string[], limit: number, endpoint?: string): Promise<DeliveryRow[]> {
      if (urls.length === 0) return [];
      return sql<DeliveryRow[]>`
        select id, endpoint, cursor::text, uuid::text, kind, state, attempts, last_status, last_error,
               ${sql.unsafe(iso('created_at'))} as created_at, ${sql.unsafe(iso('finished_at'))} as finished_at
        from webhook_delivery
        where state = 'failed' and endpoint = any(${urls as string[]}::text[]) ${endpoint ? sql`and endpoint = ${endpoint}` : sql``}
        order by webhook_delivery.finished_at desc, webhook_delivery.cursor desc limit ${limit}`;
    },

    /**
     * Makes failed deliveries pending again, due now, with a fresh attempt count (the same ids):
     * the one `id`, or every failed one of `endpoint`. Returns how many.
     */
    async replay(urls: readonly string[], now: Date, which: { id?: string; endpoint?: string }): Promise<number> {
      const rows = await sql`
        update webhook_delivery set state = 'pending', attempts = 0, next_at = ${now}, lease_until = null, finished_at = null
        where state = 'failed' and endpoint = any(${urls as string[]}::text[])
          ${which.id ? sql`and id = ${which.id}` : sql``} ${which.endpoint ? sql`and endpoint = ${which.endpoint}` : sql``}
        returning 1`;
      return rows.length;
    },

    /** Enables a disabled endpoint again (no longer failing or throttled). Returns whether it was found. */
    async enable(url: string): Promise<boolean> {
      const rows = await sql`
        update webhook_endpoint set disabled_at = null, disabled_reason = null, failing_since = null, throttled_until = null
        where url = ${url} returning 1`;
      return rows.length > 0;
    },

    /** Deletes finished deliveries older than `before` (delivered or failed), at most `max`. */
    async prune(before: Date, max: number): Promise<number> {
      const rows = await sql`
        delete from webhook_delivery where id in (
          select id from webhook_delivery where state <> 'pending' and finished_at < ${before} limit ${max})
        returning 1`;
      return rows.length;
    },
  };
}

export type WebhookRepo = ReturnType<typeof createWebhookRepo>;
