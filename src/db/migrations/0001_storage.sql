-- The storage model (ARCHITECTURE.md "Storage model"): the document is the source of truth;
-- every other table is derived from it and rewritten in the same transaction as each write.
-- Names are unqualified: the runner pins search_path to the group's schema.

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

-- lz4 roughly doubles ingest of TOASTed documents (STACK.md); not every server is built with it.
do $$
begin
  execute 'alter table vcons alter column doc set compression lz4';
exception when others then
  raise notice 'lz4 compression unavailable, keeping the default';
end $$;

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

-- Substring filters (subject, party name/tel/email) use trigram indexes when pg_trgm is present.
do $$
begin
  if exists (select 1 from pg_extension e join pg_namespace n on n.oid = e.extnamespace
             where e.extname = 'pg_trgm' and n.nspname = 'extensions') then
    execute 'create index vcons_subject_trgm_idx on vcons using gin (lower(subject) extensions.gin_trgm_ops)';
    execute 'create index vcon_parties_name_trgm_idx on vcon_parties using gin (lower(name) extensions.gin_trgm_ops)';
    execute 'create index vcon_parties_mailto_trgm_idx on vcon_parties using gin (lower(mailto) extensions.gin_trgm_ops)';
    execute 'create index vcon_parties_tel_trgm_idx on vcon_parties using gin (tel extensions.gin_trgm_ops)';
  end if;
end $$;
