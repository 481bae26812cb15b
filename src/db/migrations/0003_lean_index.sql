-- Leaner indexing rounds (issue 17, ARCHITECTURE.md "Search"): an indexing round wrote every unit's
-- text through to_tsvector twice (the unit's generated column, then vcon_search's aggregate) and
-- stored a ~1.4 KB vector per unit, both read only for the few units of a result page.

-- keywordMatches computes the unit tsvector of a page's units when it reads them (the same
-- expression, so matches and snippets are unchanged). Dropping a column rewrites nothing.
alter table search_units drop column tsv;

-- Local (inline) providers embed a page's units at query time (semanticMatches); only a remote
-- provider's unit vectors are still stored. Unit vectors of the local providers are dropped: the
-- group's vCon vectors tell whether any other provider's exist (narrow table, one row a vCon), and
-- if none do the table is emptied without a row-by-row delete (~2M rows at 100k vCons).
do $$
begin
  if exists (select 1 from vcon_codes where provider not in ('glove', 'hashing')) then
    delete from search_vectors where provider in ('glove', 'hashing');
  else
    truncate search_vectors;
  end if;
end
$$;
