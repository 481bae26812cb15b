-- Embeddings of the search units (ARCHITECTURE.md "Search"). Every vector records the provider and
-- model that made it, and a query is only compared with vectors of its own space.

-- One vector per search unit: the exact rerank and the "matches" of semantic results read these.
create table search_vectors (
  vcon_uuid uuid not null references vcons (uuid) on delete cascade,
  source    text not null,
  idx       integer not null,
  provider  text not null,
  model     text not null,
  vec       bytea not null,
  primary key (vcon_uuid, source, idx)
);

-- One vector per vCon (the mean of its unit vectors) with its sign-bit code: the SQL prefilter
-- scans only the codes, so the rows stay narrow (vectors pushed out of line to TOAST).
create table vcon_vectors (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  provider   text not null,
  model      text not null,
  created_at timestamptz not null,
  units_sig  text not null,
  code       bit(256) not null,
  vec        bytea not null
) with (toast_tuple_target = 128);
alter table vcon_vectors alter column vec set storage external;
create index vcon_vectors_created_idx on vcon_vectors (created_at);

-- vCons waiting for a remote provider (background embedding). Rows are claimed with
-- FOR UPDATE SKIP LOCKED, so several instances can drain one queue.
create table embedding_queue (
  vcon_uuid     uuid primary key references vcons (uuid) on delete cascade,
  enqueued_at   timestamptz not null default clock_timestamp(),
  claimed_until timestamptz,
  attempts      integer not null default 0,
  last_error    text
);
create index embedding_queue_enqueued_idx on embedding_queue (enqueued_at);
