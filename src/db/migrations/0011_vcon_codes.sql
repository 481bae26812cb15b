-- The Hamming prefilter scans every code of a group, so the codes get a narrow table of their own
-- (~120 bytes a row): inline in vcon_vectors each row carried its 1–6 KB vector, which values
-- below the 2 KB TOAST threshold keep in the heap whatever toast_tuple_target says.
create table vcon_codes (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  provider   text not null,
  model      text not null,
  created_at timestamptz not null,
  code       bit(256) not null
);
insert into vcon_codes (vcon_uuid, provider, model, created_at, code)
  select vcon_uuid, provider, model, created_at, code from vcon_vectors;
create index vcon_codes_created_idx on vcon_codes (created_at);
alter table vcon_vectors drop column code;
drop index if exists vcon_vectors_created_idx;
