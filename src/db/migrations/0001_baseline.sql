-- The baseline schema of a group (ARCHITECTURE.md "Storage model"): the document is the source of
-- truth; every other table is derived from it and rewritten in the same transaction as each write.
-- Names are unqualified: the runner pins search_path to the group's schema.
-- Unconditional on purpose, so every group's schema is the same: what depends on the server (lz4,
-- pg_trgm) is the runner's re-runnable optional step (ensureOptional in src/db/migrate.ts).
-- This file squashes the development history 0001_storage..0013 (README "Migrations").

create table vcons (
  uuid              uuid primary key,
  -- json, not jsonb: jsonb reorders keys, and the round trip promises key order (API.md).
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

create table vcon_parties (
  vcon_uuid uuid not null references vcons (uuid) on delete cascade,
  idx       integer not null,
  name      text,
  tel       text,
  mailto    text,
  party_uuid text,
  primary key (vcon_uuid, idx)
);

create table vcon_dialogs (
  vcon_uuid  uuid not null references vcons (uuid) on delete cascade,
  idx        integer not null,
  type       text,
  start_at   timestamptz,
  duration   double precision,
  mediatype  text,
  encoding   text,
  body_bytes integer,
  primary key (vcon_uuid, idx)
);

create table vcon_analyses (
  vcon_uuid  uuid not null references vcons (uuid) on delete cascade,
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
  vcon_uuid  uuid not null references vcons (uuid) on delete cascade,
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
  vcon_uuid uuid not null references vcons (uuid) on delete cascade,
  key       text not null,
  value     text not null,
  primary key (vcon_uuid, key)
);
create index vcon_tags_key_value_idx on vcon_tags (key, value, vcon_uuid);

-- One row per searchable text; the weight follows the source (subject highest).
create table search_units (
  vcon_uuid uuid not null references vcons (uuid) on delete cascade,
  source    text not null check (source in ('subject', 'party', 'dialog', 'analysis', 'attachment')),
  idx       integer not null,
  body      text not null,
  tsv       tsvector generated always as (
    setweight(
      to_tsvector('english'::regconfig, body),
      (case source when 'subject' then 'A' when 'party' then 'B' when 'analysis' then 'C' else 'D' end)::"char"
    )
  ) stored,
  primary key (vcon_uuid, source, idx)
);
create index search_units_tsv_idx on search_units using gin (tsv);

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

-- One vector per vCon (the mean of its unit vectors), pushed out of line to TOAST.
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

-- One weighted tsvector per vCon for keyword ranking: a common word matches several units of the
-- same vCon, and ranking every matching unit grew with the unit count (ARCHITECTURE.md "Search").
-- search_units stays the source of snippets and matches. Written by src/db/search-repo.ts (VCON_TSV).
create table vcon_search (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  created_at timestamptz not null,
  tsv        tsvector not null
);
create index vcon_search_tsv_idx on vcon_search using gin (tsv);
create index vcon_search_created_idx on vcon_search (created_at);
