-- The derived tables a write rewrites (parties, dialogs, analyses, attachments, tags) lose their
-- foreign keys (issue 17, ARCHITECTURE.md "Storage model"): every derived row of a write paid a
-- referential check (a lookup of its vCon FOR KEY SHARE), ~1,100 checks for a batch of 100 bench
-- vCons, about a fifth of PostgreSQL's time per batch, although the write inserts or locks that vCon
-- in the same statement or transaction. Their only writer and deleter is src/db/vcon-repo.ts: a
-- delete locks the vCon row, then deletes its derived rows and the vCon in one statement of the same
-- transaction (the lock makes concurrent writes of that vCon wait, and the statement after it sees
-- every row they committed), so no row outlives its vCon. The search tables, written by the indexer
-- under FOR KEY SHARE, keep theirs (and their cascade).

alter table vcon_parties drop constraint vcon_parties_vcon_uuid_fkey;
alter table vcon_dialogs drop constraint vcon_dialogs_vcon_uuid_fkey;
alter table vcon_analyses drop constraint vcon_analyses_vcon_uuid_fkey;
alter table vcon_attachments drop constraint vcon_attachments_vcon_uuid_fkey;
alter table vcon_tags drop constraint vcon_tags_vcon_uuid_fkey;
