-- One weighted tsvector per vCon for keyword ranking: a common word matches several units of the
-- same vCon, and ranking every matching unit grew with the unit count (ARCHITECTURE.md "Search").
-- search_units stays the source of snippets and matches. Keep the expression in step with
-- VCON_TSV in src/db/search-repo.ts.
create table vcon_search (
  vcon_uuid  uuid primary key references vcons (uuid) on delete cascade,
  created_at timestamptz not null,
  tsv        tsvector not null
);

-- Units are joined with stop words in between: stop words take positions, so a phrase never
-- matches across the end of one unit and the start of the next.
insert into vcon_search (vcon_uuid, created_at, tsv)
select su.vcon_uuid, v.created_at,
       setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ' . the the the . ' order by su.idx) filter (where su.source = 'subject'), ''), 200000)), 'A') ||
       setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ' . the the the . ' order by su.idx) filter (where su.source = 'party'), ''), 200000)), 'B') ||
       setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ' . the the the . ' order by su.idx) filter (where su.source = 'analysis'), ''), 200000)), 'C') ||
       setweight(to_tsvector('english', left(coalesce(string_agg(su.body, ' . the the the . ' order by su.source, su.idx) filter (where su.source in ('dialog', 'attachment')), ''), 200000)), 'D')
from search_units su join vcons v on v.uuid = su.vcon_uuid
group by su.vcon_uuid, v.created_at;

create index vcon_search_tsv_idx on vcon_search using gin (tsv);
create index vcon_search_created_idx on vcon_search (created_at);
