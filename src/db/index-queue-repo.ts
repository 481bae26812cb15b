// The index queue: vCons written but not yet (re)indexed for search (0001_schema.sql, docs/architecture.md
// "Search"). A write queues its vCons in its own transaction (vcon-repo.ts); indexers of every
// instance claim rows with FOR UPDATE SKIP LOCKED inside their indexing transaction, so a crash
// releases the claim and the row is indexed after the restart.
import type { Db } from './client.js';
import { stage } from '../stages.js';

/** What to claim: the oldest rows, or only those acknowledged up to a mark, or only some vCons. */
export interface ClaimFilter {
  upto?: string;
  uuids?: string[];
}

export function createIndexQueueRepo(db: Db) {
  return {
    /** Queues some vCons (again, with a new place in the queue); used outside the write path (backfills). */
    async enqueue(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await db`
        insert into index_queue (vcon_uuid)
        select v.uuid from vcons v where v.uuid = any(${uuids}::uuid[])
        on conflict (vcon_uuid) do update
          set seq = nextval('index_queue_seq'), enqueued_at = clock_timestamp(), attempts = 0, last_error = null, retry_at = null`;
    },

    /**
     * Claims up to `n` queued vCons in queue order until the transaction ends: the queue row for
     * update and the vCon row for key share, both SKIP LOCKED, so concurrent indexers take
     * different rows and a delete of a claimed vCon waits for the indexer instead of deadlocking.
     */
    async claim(n: number, f: ClaimFilter = {}): Promise<string[]> {
      const rows = await stage(
        'sql: claim queue',
        () => db<{ uuid: string }[]>`
        select q.vcon_uuid::text as uuid
        from index_queue q join vcons v on v.uuid = q.vcon_uuid
        where (q.retry_at is null or q.retry_at <= clock_timestamp())
          ${f.upto ? db`and q.seq <= ${f.upto}::bigint and q.last_error is null` : db``}
          ${f.uuids ? db`and q.vcon_uuid = any(${f.uuids}::uuid[])` : db``}
        order by q.seq
        limit ${n}
        for update of q skip locked
        for key share of v skip locked`,
      );
      return rows.map((r) => r.uuid);
    },

    /** Removes claimed rows (indexed). Only rows this transaction holds: nobody re-queued them meanwhile. */
    async remove(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await stage('sql: remove from queue', () => db`delete from index_queue where vcon_uuid = any(${uuids}::uuid[])`);
    },

    /** Records a failed embedding of claimed rows: retried after a back-off; searches stop waiting for them. */
    async fail(uuids: string[], error: string): Promise<void> {
      if (uuids.length === 0) return;
      await db`
        update index_queue
        set attempts = attempts + 1, last_error = ${error.slice(0, 500)},
            retry_at = clock_timestamp() + make_interval(secs => least(300, 2 ^ least(attempts, 8)))
        where vcon_uuid = any(${uuids}::uuid[])`;
    },

    /** The newest queue row a search must wait for (null: nothing pending, the common case). */
    async mark(): Promise<string | null> {
      const [r] = await db<{ upto: string | null }[]>`select max(seq)::text as upto from index_queue where last_error is null`;
      return r.upto;
    },

    /** How many vCons queued up to a mark are not indexed yet, failed ones aside (keyword search finds those). */
    async countUpTo(upto: string): Promise<number> {
      const [r] = await db<{ n: number }[]>`select count(*)::int as n from index_queue where seq <= ${upto}::bigint and last_error is null`;
      return r.n;
    },

    /** Whether rows up to a mark (or of some vCons) are still queued, failed ones aside. */
    async pending(f: ClaimFilter): Promise<boolean> {
      const [r] = await db<{ any: boolean }[]>`
        select exists (
          select 1 from index_queue q where q.last_error is null
            ${f.upto ? db`and q.seq <= ${f.upto}::bigint` : db``}
            ${f.uuids ? db`and q.vcon_uuid = any(${f.uuids}::uuid[])` : db``}
        ) as any`;
      return r.any;
    },

    /** Whether any row is queued, failed ones included (the index thread's start and retirement). */
    async hasRows(): Promise<boolean> {
      const [r] = await db<{ any: boolean }[]>`select exists (select 1 from index_queue) as any`;
      return r.any;
    },

    /** Queue length, the age of its oldest row (the indexing lag) and rows whose embedding failed. */
    async stats(): Promise<{ pending: number; oldest_s: number | null; failing: number }> {
      const [r] = await db<{ pending: number; oldest_s: number | null; failing: number }[]>`
        select count(*)::int as pending,
               extract(epoch from clock_timestamp() - min(enqueued_at))::float8 as oldest_s,
               count(*) filter (where last_error is not null)::int as failing
        from index_queue`;
      return r;
    },
  };
}

export type IndexQueueRepo = ReturnType<typeof createIndexQueueRepo>;
