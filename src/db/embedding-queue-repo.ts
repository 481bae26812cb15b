// The embedding queue of a remote provider: vCons whose texts changed wait here until the
// background worker embeds them (ARCHITECTURE.md "Search": FOR UPDATE SKIP LOCKED).
import type { Db } from './client.js';

export function createEmbeddingQueueRepo(db: Db) {
  return {
    /** Queues some vCons (again): a re-queued vCon restarts with a fresh stamp. */
    async enqueue(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await db`
        insert into embedding_queue (vcon_uuid)
        select u from unnest(${uuids}::uuid[]) as u
        on conflict (vcon_uuid) do update set enqueued_at = clock_timestamp(), claimed_until = null, attempts = 0, last_error = null`;
    },

    /**
     * Claims up to `n` queued vCons for `leaseSeconds` (SKIP LOCKED: concurrent workers take
     * different rows). Returns each claim with the enqueued_at it saw (its stamp).
     */
    async claim(n: number, leaseSeconds = 300): Promise<{ uuid: string; stamp: string }[]> {
      // The stamp is enqueued_at in whole microseconds: a JS Date would lose precision.
      return db<{ uuid: string; stamp: string }[]>`
        update embedding_queue q set claimed_until = clock_timestamp() + make_interval(secs => ${leaseSeconds}), attempts = q.attempts + 1
        from (
          select vcon_uuid from embedding_queue
          where claimed_until is null or claimed_until < clock_timestamp()
          order by enqueued_at
          limit ${n}
          for update skip locked
        ) c
        where q.vcon_uuid = c.vcon_uuid
        returning q.vcon_uuid::text as uuid, (extract(epoch from q.enqueued_at) * 1000000)::bigint::text as stamp`;
    },

    /** Removes a claim only if the vCon wasn't re-queued meanwhile; true when it was removed. */
    async complete(uuid: string, stamp: string): Promise<boolean> {
      const rows = await db`
        delete from embedding_queue
        where vcon_uuid = ${uuid}::uuid and (extract(epoch from enqueued_at) * 1000000)::bigint = ${stamp}::bigint
        returning 1`;
      return rows.length > 0;
    },

    /** Removes some vCons from the queue whatever their stamp (they were embedded another way). */
    async remove(uuids: string[]): Promise<void> {
      if (uuids.length === 0) return;
      await db`delete from embedding_queue where vcon_uuid = any(${uuids}::uuid[])`;
    },

    async fail(uuid: string, error: string): Promise<void> {
      await db`update embedding_queue set last_error = ${error.slice(0, 500)} where vcon_uuid = ${uuid}::uuid`;
    },

    /** Queue length and the age of its oldest entry (the embedding lag). */
    async stats(): Promise<{ pending: number; oldest_s: number | null }> {
      const [r] = await db<{ pending: number; oldest_s: number | null }[]>`
        select count(*)::int as pending, extract(epoch from clock_timestamp() - min(enqueued_at))::float8 as oldest_s from embedding_queue`;
      return r;
    },
  };
}

export type EmbeddingQueueRepo = ReturnType<typeof createEmbeddingQueueRepo>;
