-- Webhook deliveries of the group's change log (docs/webhooks.md, docs/architecture.md "Webhooks").
-- Why in PostgreSQL: delivery is at least once across restarts and replicas. A delivery held only
-- in a process's memory is lost when that process crashes or is scaled down, and two replicas
-- would each send every event. Rows here are shared by every replica: one claims a delivery with
-- FOR UPDATE SKIP LOCKED and a lease that expires, so a crashed replica's claim passes to another
-- once its lease runs out (polling only: this also works behind PgBouncer in transaction mode).

-- One row per configured URL (WEBHOOK_URLS). Its state is shared by the replicas: how far the log
-- was turned into deliveries, and whether the endpoint is throttled, failing or disabled.
create table webhook_endpoint (
  url              text primary key,
  -- Change log entries up to this cursor have their delivery rows (set to the horizon on first sight:
  -- a new endpoint receives what is written from then on, not the retained history).
  enqueued_through bigint not null,
  -- Set on the first failure after a success; an endpoint failing for 5 days is disabled.
  failing_since    timestamptz,
  -- 429, 502, 504 or Retry-After: nothing is sent to the endpoint before this.
  throttled_until  timestamptz,
  -- 410 Gone, or failing for 5 days: nothing is sent until an operator enables it again.
  disabled_at      timestamptz,
  disabled_reason  text
);

-- One row per (endpoint, change log entry): the message and its delivery state. The id is the
-- message's webhook-id, the same on every attempt.
create table webhook_delivery (
  id           text primary key,
  endpoint     text not null references webhook_endpoint (url) on delete cascade,
  cursor       bigint not null,
  uuid         uuid not null,
  kind         text not null,
  time         timestamptz not null,
  -- pending (waiting for its next attempt or in flight), delivered, failed (attempts exhausted).
  state        text not null default 'pending' check (state in ('pending', 'delivered', 'failed')),
  attempts     int not null default 0,
  next_at      timestamptz not null,
  -- While set and in the future, one replica is sending it; past it, any replica may claim it again.
  lease_until  timestamptz,
  last_status  int,
  last_error   text,
  created_at   timestamptz not null default now(),
  finished_at  timestamptz,
  unique (endpoint, cursor)
);
-- What a sender claims: an endpoint's due pending deliveries, oldest first.
create index webhook_delivery_due on webhook_delivery (endpoint, next_at, cursor) where state = 'pending';
-- The failed list, newest first.
create index webhook_delivery_failed on webhook_delivery (endpoint, finished_at) where state = 'failed';
