// The launcher's advisory locks (provisioning, extensions, one per schema's migrations) have
// well-known keys: any role that can connect can take them too, so every wait on them is bounded
// and a wait that runs out names the session holding the lock.
import type { TransactionSql } from './client.js';

/** How long provisioning and extension creation wait for their lock (ms). */
export const ADVISORY_LOCK_WAIT_MS = 10_000;

/** A bounded wait for one of the launcher's advisory locks ran out. */
export class LockWaitError extends Error {
  override name = 'LockWaitError';
}

/** lock_not_available: the statement's lock_timeout expired. */
const LOCK_NOT_AVAILABLE = '55P03';

interface Holder {
  pid: number;
  usename: string | null;
  application_name: string | null;
}

/**
 * Takes the transaction-scoped advisory lock `hashtext(key)`, waiting at most `waitMs`; throws a
 * LockWaitError naming the holder (pid, user, application_name) when the wait runs out. The
 * transaction's lock_timeout is left as it was.
 */
export async function lockForTransaction(tx: TransactionSql, key: string, waitMs: number = ADVISORY_LOCK_WAIT_MS): Promise<void> {
  const [{ previous }] = await tx<{ previous: string }[]>`select pg_catalog.current_setting('lock_timeout') as previous`;
  try {
    await tx.savepoint(async (sp) => {
      await sp`select pg_catalog.set_config('lock_timeout', ${String(Math.max(1, Math.trunc(waitMs)))}, true)`;
      await sp`select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(${key}))`;
    });
  } catch (err) {
    if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
    // A bigint advisory key is split into classid (high 32 bits) and objid (low 32 bits).
    const holders = await tx<Holder[]>`
      select l.pid, a.usename, a.application_name
      from pg_catalog.pg_locks l left join pg_catalog.pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.granted and l.objsubid = 1
        and ((l.classid::int8 << 32) | l.objid::int8) = pg_catalog.hashtext(${key})::int8`;
    const who = holders.length
      ? holders.map((h) => `pid ${h.pid} (user ${h.usename ?? '?'}, application_name "${h.application_name ?? ''}")`).join(', ')
      : 'a session that has released it since';
    throw new LockWaitError(
      `waited ${waitMs} ms for the advisory lock "${key}", held by ${who}; ` +
        'if that session is not another vcon-launch run, end it (select pg_terminate_backend(PID)) and try again',
    );
  }
  await tx`select pg_catalog.set_config('lock_timeout', ${previous}, true)`;
}
