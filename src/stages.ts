// Per-stage timing of the write path: the bench runs a create and a batch with a
// recorder and reports wall and CPU time per stage (validate, derive, each SQL statement, commit).
// Without a recorder a stage is one AsyncLocalStorage lookup: production pays nothing else.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface StageTotal {
  calls: number;
  wall_ms: number;
  /** CPU time of this process during the stage (client side of a SQL statement: build, send, parse). */
  cpu_ms: number;
}

export type StageTotals = Map<string, StageTotal>;

const recorder = new AsyncLocalStorage<StageTotals>();

/** Runs fn with every stage under it added to `totals`. */
export function recordStages<T>(totals: StageTotals, fn: () => Promise<T>): Promise<T> {
  return recorder.run(totals, fn);
}

function add(totals: StageTotals, name: string, t0: number, c0: NodeJS.CpuUsage): void {
  const cpu = process.cpuUsage(c0);
  const t = totals.get(name) ?? { calls: 0, wall_ms: 0, cpu_ms: 0 };
  t.calls++;
  t.wall_ms += performance.now() - t0;
  t.cpu_ms += (cpu.user + cpu.system) / 1000;
  totals.set(name, t);
}

/** Times an asynchronous stage (a SQL statement, an embed call) when a recorder is active. */
export async function stage<T>(name: string, fn: () => PromiseLike<T>): Promise<T> {
  const totals = recorder.getStore();
  if (!totals) return fn();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  try {
    return await fn();
  } finally {
    add(totals, name, t0, c0);
  }
}

/** Times a synchronous stage (validation, derivation) when a recorder is active. */
export function stageSync<T>(name: string, fn: () => T): T {
  const totals = recorder.getStore();
  if (!totals) return fn();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  try {
    return fn();
  } finally {
    add(totals, name, t0, c0);
  }
}

/** A mark for a stage that ends elsewhere (the COMMIT of a transaction ends when begin resolves). */
export function stageMark(): { end(name: string): void } {
  const totals = recorder.getStore();
  if (!totals) return { end: () => undefined };
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  return { end: (name) => add(totals, name, t0, c0) };
}

/** Runs fn outside any recorder (background work started from a recorded write is not its stage). */
export function untracked<T>(fn: () => T): T {
  return recorder.exit(fn);
}
