// Admission to the database pool: at most `limit` requests use the pool at once; the
// rest wait in a FIFO queue for at most `maxWaitMs`, then fail with database_busy (503 +
// Retry-After). postgres.js would otherwise queue without bound, and an overloaded group would
// answer after tens of seconds, or its clients would give up and reset the connection.
import { DatabaseBusyError } from '../domain/errors.js';

export interface AdmissionOptions {
  /** Requests using the database at once: the pool size. */
  limit: number;
  /** How long a request may wait for its turn. */
  maxWaitMs: number;
  /** Waiters beyond this are refused at once (memory bound under a flood). */
  maxQueue?: number;
  /** While this returns an error, every request is refused with it (the instance must not serve). */
  refusal?: () => Error | undefined;
}

export interface AdmissionStats {
  /** The pool size requests are admitted against. */
  size: number;
  /** Requests holding a turn now. */
  in_use: number;
  /** Requests waiting for a turn now. */
  waiting: number;
  /** Requests refused with database_busy since start. */
  refused: number;
}

interface Waiter {
  grant: () => void;
  timer: NodeJS.Timeout;
}

export function createAdmission(opts: AdmissionOptions) {
  const maxQueue = opts.maxQueue ?? Math.max(100, opts.limit * 50);
  let active = 0;
  let refused = 0;
  const queue: Waiter[] = [];

  // Says which bound refused the request: the wait for a turn, or the queue already full.
  const busy = (why: 'waited' | 'queue full') => {
    refused++;
    return new DatabaseBusyError(
      why === 'waited'
        ? `The database is busy: all ${opts.limit} connection(s) of this group stayed in use for ${opts.maxWaitMs} ms; retry shortly`
        : `The database is busy: all ${opts.limit} connection(s) of this group are in use and ${queue.length} request(s) already wait for one; retry shortly`,
      'Raise DB_POOL_MAX (within the connection budget of `vcon-launch check`), DB_QUEUE_TIMEOUT_MS, or put PgBouncer in front',
    );
  };

  const release = () => {
    const next = queue.shift();
    if (next) {
      clearTimeout(next.timer);
      next.grant();
    } else active--;
  };

  /** Resolves with a release function once admitted; rejects with DatabaseBusyError after the bound. */
  const acquire = (): Promise<() => void> => {
    const once = () => {
      let done = false;
      return () => {
        if (done) return;
        done = true;
        release();
      };
    };
    const refused = opts.refusal?.();
    if (refused) return Promise.reject(refused);
    if (active < opts.limit) {
      active++;
      return Promise.resolve(once());
    }
    if (queue.length >= maxQueue || opts.maxWaitMs === 0) return Promise.reject(busy(opts.maxWaitMs === 0 ? 'waited' : 'queue full'));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        // The turn passes straight from the releasing request to this one: `active` stays the same.
        grant: () => resolve(once()),
        timer: setTimeout(() => {
          const i = queue.indexOf(waiter);
          if (i >= 0) queue.splice(i, 1);
          reject(busy('waited'));
        }, opts.maxWaitMs),
      };
      queue.push(waiter);
    });
  };

  return {
    acquire,
    /** Runs fn with a turn, releasing it however fn ends. */
    async run<T>(fn: () => Promise<T>): Promise<T> {
      const done = await acquire();
      try {
        return await fn();
      } finally {
        done();
      }
    },
    /** True when a new request would have to wait. */
    saturated: () => active >= opts.limit,
    stats: (): AdmissionStats => ({ size: opts.limit, in_use: active, waiting: queue.length, refused }),
  };
}

export type Admission = ReturnType<typeof createAdmission>;
