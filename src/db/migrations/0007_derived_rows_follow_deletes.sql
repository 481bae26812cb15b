-- Derived rows go with their vCon however it is deleted (issue 17, after 0006 dropped their foreign
-- keys): the API's delete, and an operator's delete or truncate in SQL (a retention job). Statement
-- triggers with a transition table cost nothing on insert or update, where the foreign keys cost a
-- check per derived row of every write; a deleting statement pays one delete per derived table.
-- Each statement of the function takes a fresh snapshot (READ COMMITTED): rows that a write of the
-- vCon committed while the delete waited for its row lock are seen and removed too. `= any(array)`
-- rather than a join with the transition table: the function's plan is made once, and an index scan
-- of the given uuids suits one vCon and a retention batch alike.
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

-- Rows a delete left behind between 0006 and this migration (a hand delete in SQL): they would
-- count in tag search, discovery and analytics, and collide with a vCon created again under the
-- same uuid. And statistics for the dialog table 0005 rebuilt.
delete from vcon_parties d where not exists (select 1 from vcons v where v.uuid = d.vcon_uuid);
delete from vcon_dialogs d where not exists (select 1 from vcons v where v.uuid = d.vcon_uuid);
delete from vcon_analyses d where not exists (select 1 from vcons v where v.uuid = d.vcon_uuid);
delete from vcon_attachments d where not exists (select 1 from vcons v where v.uuid = d.vcon_uuid);
delete from vcon_tags d where not exists (select 1 from vcons v where v.uuid = d.vcon_uuid);
analyze vcon_dialogs;
