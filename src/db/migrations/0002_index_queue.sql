-- Search indexing leaves the write's transaction (issue 17, ARCHITECTURE.md "Search"). A write
-- stores the document, its derived rows and one row here, in one transaction; the indexer of any
-- instance takes rows with FOR UPDATE SKIP LOCKED and writes search_units, vcon_search and the
-- vectors in batches. The remote provider's embedding queue becomes this queue (one queue, not two).

alter table embedding_queue rename to index_queue;
alter index embedding_queue_pkey rename to index_queue_pkey;
drop index embedding_queue_enqueued_idx;
-- Claims are row locks held by the indexing transaction (a crash releases them), not leases.
alter table index_queue drop column claimed_until;
-- After a failed embedding the row waits until retry_at; searches don't wait for it (last_error).
alter table index_queue add column retry_at timestamptz;
-- Queue order, and the mark a search waits up to: rows acknowledged before it began.
create sequence index_queue_seq as bigint;
alter table index_queue add column seq bigint not null default nextval('index_queue_seq');
alter sequence index_queue_seq owned by index_queue.seq;
create index index_queue_seq_idx on index_queue (seq);

-- Every vCon that was never indexed (none, for a group that indexed inline) is queued.
insert into index_queue (vcon_uuid)
select v.uuid from vcons v
where not exists (select 1 from vcon_search s where s.vcon_uuid = v.uuid)
  and not exists (select 1 from index_queue q where q.vcon_uuid = v.uuid)
order by v.created_at;

-- The unit tsvectors are read only for the units of given vCons (keywordMatches: by primary key);
-- the GIN index over them was written on every write and read by no query.
drop index search_units_tsv_idx;
