import type { Db } from './client.js';
import type { ChangeEntry, ChangeKind } from '../domain/changes.js';

/** One reading of where the log stands (see sample). */
export interface LogSample {
  /** The newest cursor any session has taken (the sequence's last value; 0 before the first). */
  lastCursor: bigint;
  /** The oldest transaction id still running (this statement's snapshot), and a transaction id assigned now (this statement's own). */
  xmin: bigint;
  xmax: bigint;
}

/** Reads of the change log (0003_change_log.sql) and its pruning. Writes happen in vcon-repo. */
export function createChangeRepo(db: Db) {
  return {
    /**
     * The sequence's last value is read live (sequences are not transactional). `xmax` is a
     * transaction id assigned to this statement: a snapshot's own xmax is only the newest completed
     * id plus one, and a transaction that got a later id is running without being below it, so it
     * cannot bound what runs (a stream across replicas skipped entries that way). The horizon
     * (services/change-service.ts) pairs a last value with the id of a LATER statement, so every
     * cursor up to it was taken by a transaction with a smaller id. Costs one transaction id per
     * sample while anything follows the log.
     */
    async sample(): Promise<LogSample> {
      const [r] = await db<{ last: string | null; xmin: string; xmax: string }[]>`
        select pg_sequence_last_value('change_log_cursor_seq')::text as last,
               pg_snapshot_xmin(pg_current_snapshot())::text as xmin, pg_current_xact_id()::text as xmax`;
      return { lastCursor: BigInt(r.last ?? '0'), xmin: BigInt(r.xmin), xmax: BigInt(r.xmax) };
    },

    /**
     * Entries after `after` up to and including `through`, oldest first. The order is the column's,
     * qualified: a bare `cursor` in ORDER BY names the output column `cursor::text`, which sorts as
     * text (10 before 7), and the limit then cuts a page that skips entries.
     */
    async page(after: bigint, through: bigint, limit: number, kinds?: ChangeKind[]): Promise<ChangeEntry[]> {
      if (through <= after) return [];
      return db<ChangeEntry[]>`
        select cursor::text, uuid::text, kind, to_char(time at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as time, key_id
        from change_log
        where cursor > ${after.toString()}::bigint and cursor <= ${through.toString()}::bigint
        ${kinds ? db`and kind = any(${kinds}::text[])` : db``}
        order by change_log.cursor
        limit ${limit}`;
    },

    /** The highest cursor pruned and the oldest cursor held (null when the log is empty). */
    async bounds(): Promise<{ prunedThrough: bigint; oldest: string | null }> {
      const [r] = await db<{ pruned: string; oldest: string | null }[]>`
        select pruned_through::text as pruned, (select min(cursor)::text from change_log) as oldest from change_log_floor`;
      return { prunedThrough: BigInt(r.pruned), oldest: r.oldest };
    },

    /**
     * Deletes entries older than `before`, from the oldest on, at most `max` per call (a short
     * statement however far behind pruning is); returns how many went. Raises the floor first, in
     * the same statement, so a reader never sees an entry missing without the floor saying so.
     */
    async prune(before: Date, max: number): Promise<number> {
      const [r] = await db<{ n: number }[]>`
        with old as (
          select max(cursor) as through from (select cursor, time from change_log order by cursor limit ${max}) s
          where time < ${before}),
        f as (update change_log_floor set pruned_through = greatest(pruned_through, (select through from old))
              where (select through from old) is not null),
        d as (delete from change_log where cursor <= (select through from old) returning 1)
        select count(*)::int as n from d`;
      return r.n;
    },
  };
}

export type ChangeRepo = ReturnType<typeof createChangeRepo>;
