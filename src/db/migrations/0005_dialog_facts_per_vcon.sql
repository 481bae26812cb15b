-- Dialog facts become one row per vCon (issue 17, ARCHITECTURE.md "Storage model"): a write of 100
-- bench vCons wrote ~1,700 dialog rows, each with its primary-key entry and foreign-key check (about a
-- third of PostgreSQL's time per batch), and the only reader (analytics) aggregates them over a date
-- range of vCons, never looks one up. The facts of a vCon's dialogs are stored together as arrays in
-- dialog order (element i is dialog i) and analytics unnests them. start_at was read by no query
-- and is not kept; the documents still hold every dialog's start.

create table vcon_dialogs_v2 (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  types      text[] not null,
  durations  double precision[] not null,
  mediatypes text[] not null,
  encodings  text[] not null,
  body_bytes integer[] not null
);

insert into vcon_dialogs_v2 (vcon_uuid, types, durations, mediatypes, encodings, body_bytes)
select vcon_uuid, array_agg(type order by idx), array_agg(duration order by idx), array_agg(mediatype order by idx),
       array_agg(encoding order by idx), array_agg(body_bytes order by idx)
from vcon_dialogs
group by vcon_uuid;

drop table vcon_dialogs;
alter table vcon_dialogs_v2 rename to vcon_dialogs;
alter index vcon_dialogs_v2_pkey rename to vcon_dialogs_pkey;
alter table vcon_dialogs rename constraint vcon_dialogs_v2_vcon_uuid_fkey to vcon_dialogs_vcon_uuid_fkey;
