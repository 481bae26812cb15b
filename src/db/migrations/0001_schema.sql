-- The schema of a group (docs/architecture.md "Storage model"): the document is the source of
-- truth; every other table is derived from it, by the write itself (the derived rows, in the same
-- transaction) or by the indexer (the search tables, from the index queue).
-- Names are unqualified: the runner pins search_path to the group's schema, and it runs as the
-- group's own role, which then owns everything here.
-- Unconditional on purpose, so every group's schema is the same: what depends on the server (lz4,
-- pg_trgm) is the runner's re-runnable optional step (ensureOptional in src/db/migrate.ts).
-- This file squashes the development history 0001_baseline..0007 (README "Migrations").

create table vcons (
  uuid              uuid primary key,
  -- json, not jsonb: jsonb reorders keys, and the round trip promises key order.
  doc               json not null,
  kind              text not null default 'plain' check (kind in ('plain', 'signed', 'encrypted')),
  subject           text,
  created_at        timestamptz not null,
  updated_at        timestamptz,
  parties_count     integer not null default 0,
  dialog_count      integer not null default 0,
  analysis_count    integer not null default 0,
  attachments_count integer not null default 0,
  tags_updated_at   timestamptz,
  tags_sig          text,
  stored_at         timestamptz not null default now()
);

create index vcons_created_idx on vcons (created_at desc, uuid desc);
create index vcons_tags_updated_idx on vcons (tags_updated_at desc, uuid desc) where tags_updated_at is not null;

-- The derived rows of a write: the facts list filters, tag search, discovery and analytics read.
-- Written only by src/db/vcon-repo.ts, in the write's transaction, with the vCon row inserted or
-- locked first. No foreign keys: a key check per derived row (a lookup of the vCon FOR KEY SHARE)
-- was about a fifth of PostgreSQL's time per batch, and the write already holds that row. They go
-- with their vCon however it is deleted through the statement triggers at the end of this file.

create table vcon_parties (
  vcon_uuid  uuid not null,
  idx        integer not null,
  name       text,
  tel        text,
  mailto     text,
  party_uuid text,
  primary key (vcon_uuid, idx)
);

-- One row per vCon: the facts of its dialogs as arrays in dialog order (element i is dialog i).
-- Analytics, the only reader, unnests them over a date range of vCons; one row per dialog cost a
-- key entry per dialog (~1,700 rows for 100 bench vCons).
create table vcon_dialogs (
  vcon_uuid  uuid primary key,
  types      text[] not null,
  durations  double precision[] not null,
  mediatypes text[] not null,
  encodings  text[] not null,
  body_bytes integer[] not null
);

create table vcon_analyses (
  vcon_uuid  uuid not null,
  idx        integer not null,
  type       text,
  vendor     text,
  product    text,
  schema     text,
  encoding   text,
  body_bytes integer,
  primary key (vcon_uuid, idx)
);
create index vcon_analyses_type_idx on vcon_analyses (type, vcon_uuid);

create table vcon_attachments (
  vcon_uuid  uuid not null,
  idx        integer not null,
  purpose    text,
  type       text,
  encoding   text,
  mediatype  text,
  body_bytes integer,
  primary key (vcon_uuid, idx)
);
create index vcon_attachments_purpose_idx on vcon_attachments (purpose, vcon_uuid) where purpose is not null;
create index vcon_attachments_type_idx on vcon_attachments (type, vcon_uuid) where type is not null;

create table vcon_tags (
  vcon_uuid uuid not null,
  key       text not null,
  value     text not null,
  primary key (vcon_uuid, key)
);
create index vcon_tags_key_value_idx on vcon_tags (key, value, vcon_uuid);

-- The search tables, written by the indexer under FOR KEY SHARE of the vCon: they keep their
-- foreign keys, and a delete of the vCon cascades to them.

-- vCons waiting to be indexed: a write queues its vCons in its own transaction; the indexer of any
-- instance takes rows with FOR UPDATE SKIP LOCKED (claims are row locks, which a crash releases).
-- After a failed embedding a row waits until retry_at. seq orders the queue and marks what a
-- search waits for: rows acknowledged before it began.
create sequence index_queue_seq as bigint;
create table index_queue (
  vcon_uuid   uuid primary key references vcons (uuid) on delete cascade,
  enqueued_at timestamptz not null default clock_timestamp(),
  attempts    integer not null default 0,
  last_error  text,
  retry_at    timestamptz,
  seq         bigint not null default nextval('index_queue_seq')
);
alter sequence index_queue_seq owned by index_queue.seq;
create index index_queue_seq_idx on index_queue (seq);

-- The searchable texts of a vCon, one row per vCon: a JSON array of {source, idx, body} in
-- (source, idx) order, read by key for the few vCons of a result page (matches and snippets, whose
-- tsvectors are computed then). Not compressed: written once a round, read by key.
create table search_units (
  vcon_uuid uuid primary key references vcons (uuid) on delete cascade,
  units     json not null
);
alter table search_units alter column units set storage external;

-- Embeddings (docs/architecture.md "Search"). Every vector records the provider and model that made
-- it, and a query is only compared with vectors of its own space.

-- One vector per search unit: stored only for a remote provider (the local providers embed a
-- page's units at query time).
create table search_vectors (
  vcon_uuid uuid not null references vcons (uuid) on delete cascade,
  source    text not null,
  idx       integer not null,
  provider  text not null,
  model     text not null,
  vec       bytea not null,
  primary key (vcon_uuid, source, idx)
);

-- One vector per vCon (the embedding of its whole text), pushed out of line to TOAST.
create table vcon_vectors (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  provider   text not null,
  model      text not null,
  created_at timestamptz not null,
  units_sig  text not null,
  vec        bytea not null
) with (toast_tuple_target = 128);
alter table vcon_vectors alter column vec set storage external;

-- The sign-bit code of each vCon vector. The Hamming prefilter scans every code of a group, so the
-- codes get a narrow table of their own (~120 bytes a row): inline beside the 1–6 KB vectors, values
-- below the 2 KB TOAST threshold stay in the heap whatever toast_tuple_target says. Instances keep
-- the codes in memory and catch up on recent writes through changed_at (src/embeddings/code-index.ts).
create table vcon_codes (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  provider   text not null,
  model      text not null,
  created_at timestamptz not null,
  code       bit(256) not null,
  changed_at timestamptz not null default clock_timestamp()
);
create index vcon_codes_created_idx on vcon_codes (created_at);
create index vcon_codes_changed_idx on vcon_codes (changed_at);

-- One weighted tsvector per vCon for keyword ranking: a common word matches several units of the
-- same vCon, and ranking every matching unit grew with the unit count. Written by the indexer
-- (src/db/search-index-repo.ts).
create table vcon_search (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  created_at timestamptz not null,
  tsv        tsvector not null
);
create index vcon_search_tsv_idx on vcon_search using gin (tsv);
create index vcon_search_created_idx on vcon_search (created_at);

-- Derived rows go with their vCon however it is deleted: the API's delete, and an operator's delete
-- or truncate in SQL (a retention job). Statement triggers with a transition table cost nothing on
-- insert or update; a deleting statement pays one delete per derived table. Each statement of the
-- function takes a fresh snapshot (READ COMMITTED): rows that a write of the vCon committed while
-- the delete waited for its row lock are seen and removed too. `= any(array)` rather than a join
-- with the transition table: the function's plan is made once, and an index scan of the given uuids
-- suits one vCon and a retention batch alike.
create function vcons_delete_derived() returns trigger
language plpgsql set search_path from current as $$
declare
  uuids uuid[] := array(select uuid from gone);
begin
  delete from vcon_parties where vcon_uuid = any (uuids);
  delete from vcon_dialogs where vcon_uuid = any (uuids);
  delete from vcon_analyses where vcon_uuid = any (uuids);
  delete from vcon_attachments where vcon_uuid = any (uuids);
  delete from vcon_tags where vcon_uuid = any (uuids);
  return null;
end $$;

create trigger vcons_delete_derived after delete on vcons
  referencing old table as gone
  for each statement execute function vcons_delete_derived();

create function vcons_truncate_derived() returns trigger
language plpgsql set search_path from current as $$
begin
  truncate vcon_parties, vcon_dialogs, vcon_analyses, vcon_attachments, vcon_tags;
  return null;
end $$;

create trigger vcons_truncate_derived after truncate on vcons
  for each statement execute function vcons_truncate_derived();
