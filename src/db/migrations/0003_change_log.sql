-- The group's change log (docs/architecture.md "Change feed"): one row per committed write of a
-- vCon, written by the write's own statement (src/db/vcon-repo.ts), so a change is in the log
-- exactly when it is committed. Readers page through it by cursor (GET /changes).
-- cache 1 (the default, stated because it matters): the sequence's last value is then the newest
-- cursor handed out by any session, which the reader's horizon reads (src/db/change-repo.ts).
create sequence change_log_cursor_seq cache 1;

create table change_log (
  -- The writing transaction gets its id before its cursor (pg_current_xact_id assigns one if it has
  -- none yet; nextval alone does not): a reader's horizon, which pairs the sequence's last value
  -- with a later snapshot, then always counts the transaction that holds a cursor it passes.
  cursor bigint primary key default (case when pg_current_xact_id() is not null then nextval('change_log_cursor_seq') end),
  uuid   uuid not null,
  -- created, updated (replace, PATCH), appended (dialog, analysis, attachment), tags_changed, deleted.
  kind   text not null check (kind in ('created', 'updated', 'appended', 'tags_changed', 'deleted')),
  -- The id of the API key that made the change (a digest prefix, never the key); null without auth.
  key_id text,
  time   timestamptz not null default now()
);
alter sequence change_log_cursor_seq owned by change_log.cursor;

-- The highest cursor pruned so far: a reader's cursor below it may have missed pruned entries
-- (410 cursor_expired). One row.
create table change_log_floor (
  one            boolean primary key default true check (one),
  pruned_through bigint not null default 0
);
insert into change_log_floor default values;
