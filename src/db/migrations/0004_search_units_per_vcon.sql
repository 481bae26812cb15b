-- Search units become one row per vCon (issue 17, ARCHITECTURE.md "Search"): an indexing round
-- wrote ~2,000 unit rows for 100 vCons, each with its primary-key entry and foreign-key check
-- (~22 ms of the round's ~115); a page's matches read the units of ≤ 100 vCons by key, so the
-- units of a vCon are stored together, as a JSON array of {source, idx, body} in (source, idx)
-- order. Not compressed: written once a round, read by key, a small part of the document's size.

create table search_units_v2 (
  vcon_uuid uuid primary key references vcons (uuid) on delete cascade,
  units     json not null
);
alter table search_units_v2 alter column units set storage external;

insert into search_units_v2 (vcon_uuid, units)
select vcon_uuid, json_agg(json_build_object('source', source, 'idx', idx, 'body', body) order by source, idx)
from search_units
group by vcon_uuid;

drop table search_units;
alter table search_units_v2 rename to search_units;
alter index search_units_v2_pkey rename to search_units_pkey;
alter table search_units rename constraint search_units_v2_vcon_uuid_fkey to search_units_vcon_uuid_fkey;
