// The foreground supervisor: prefixes children's log lines, restarts crashed children with
// backoff, keeps the registry current, and stops everything on request.
import { RELOADABLE_VARIABLES } from '../src/config.js';
import { spawnChild, spawnStandby, type Child, type ExitInfo, type SpawnOptions, type Standby } from './child.js';
import type { GroupSpec } from './groups.js';
import type { LogRotation } from './log-files.js';
import type { RunAs } from './os-users.js';
import { note } from './output.js';
import { spawnKeepingPort } from './ports.js';
import { instanceKey, type InstanceState, type LastExit, type Registry, type RegistryEntry } from './registry.js';

/** Restart delays: the first is immediate, so a one-off crash costs only a server start (~1 s). */
const BACKOFF_MS = [0, 500, 1_000, 2_000, 5_000, 10_000, 30_000];
/**
 * Consecutive restarts (none of which stayed up STABLE_AFTER_MS) after which the supervisor gives
 * up on an instance: it is then `crashed` and stays listed. One per backoff step by default.
 */
export const DEFAULT_MAX_RESTARTS = BACKOFF_MS.length;
/** A child that stayed up this long is healthy again: its next crash starts the backoff over. */
const STABLE_AFTER_MS = 30_000;

export interface Slot {
  spec: GroupSpec;
  /** This slot's replica of the group (1-based) and the group's replica count. */
  replica: number;
  replicas: number;
  env: Record<string, string>;
  /** The PostgreSQL user the group connects as. */
  role: string;
  /** Connections of the group's analyze role in the budget (recorded on replica 1). */
  analyze?: number;
  /** host:port of the server whose connection budget it counts against (the embedded cluster's resolved). */
  serverKey?: string;
  /** The group's own OS user, when groups run as their own users. */
  runAs?: RunAs;
  child?: Child;
  /** Detached instances write their output here (appended), the restarted process too. */
  logFile?: string;
  /** What `status` reports: kept by the supervisor in the registry entry. */
  state?: InstanceState;
  restarts?: number;
  lastExit?: LastExit | null;
}

export interface Supervisor {
  /** Resolves when nothing is left to supervise (after stopAll, or when each was stopped or gave up). */
  done: Promise<void>;
  /** Supervises one more started slot (the detached supervisor receives groups over time). */
  add(slot: Slot): void;
  /** Instance keys supervised now (running, restarting or crashed-and-kept). */
  keys(): string[];
  /** Stops these instances for good (no restart), cancelling pending restarts; forgets crashed ones. */
  stop(keys: string[], graceMs?: number): Promise<{ key: string; pid: number | null; outcome: 'stopped' | 'killed' | 'not running' }[]>;
  stopAll(): Promise<void>;
  /**
   * Re-reads the named groups' env files (`load` gives the group's spec from its file now) and hands
   * each running instance the keys that changed, without a restart; a crash restart takes them too.
   * Other changed variables are only reported: they need a restart.
   */
  reload(groups: string[], load: (current: GroupSpec) => GroupSpec): Promise<ReloadResult[]>;
}

/** What `reload` did to one instance. */
export interface ReloadResult {
  /** The instance (group, or group@N). */
  key: string;
  pid: number | null;
  /** Key variables the instance took (names only). */
  reloaded: string[];
  /** Other variables that differ from what the instance started with: they apply at its next start. */
  restart: string[];
  /** Why the instance did not take the keys (its file is invalid, it did not answer, ...). */
  error?: string;
  /** Warnings about the group's file as it is now (no key left, ...). */
  warnings?: string[];
}

/** When a group's log file is rotated: VCON_LOG_MAX_SIZE and VCON_LOG_KEEP of its env file. */
export const logRotationOf = (spec: GroupSpec): LogRotation => ({ maxBytes: spec.config.logs.maxBytes, keep: spec.config.logs.keep });

/** The instance name of a slot: its group, or group@N for a replica (log prefixes, registry). */
export const slotKey = (slot: Pick<Slot, 'spec' | 'replica' | 'replicas'>) =>
  instanceKey({ group: slot.spec.name, replica: slot.replica, replicas: slot.replicas });

/** Builds the registry entry of a running child. */
export function entryOf(
  slot: Pick<Slot, 'spec' | 'replica' | 'replicas' | 'role' | 'env' | 'analyze' | 'serverKey' | 'state' | 'restarts' | 'lastExit'>,
  child: Pick<Child, 'pid' | 'url' | 'port' | 'schema' | 'label'>,
  opts: { supervisorPid: number | null; logFile: string | null; mode: 'foreground' | 'detached'; startedAt?: string },
): RegistryEntry {
  const spec = slot.spec;
  const pool = Number(slot.env.DB_POOL_MAX ?? spec.config.db.pool.size);
  return {
    group: spec.name,
    replica: slot.replica,
    replicas: slot.replicas,
    pid: child.pid,
    url: child.url,
    port: child.port,
    schema: child.schema,
    label: child.label,
    env_file: spec.envFile,
    started_at: opts.startedAt ?? new Date().toISOString(),
    database: spec.databaseLabel,
    role: slot.role,
    supervisor_pid: opts.supervisorPid,
    mode: opts.mode,
    state: slot.state ?? 'running',
    restarts: slot.restarts ?? 0,
    last_exit: slot.lastExit ?? null,
    log_file: opts.logFile,
    api_base_path: spec.config.rest.basePath,
    database_key: spec.databaseKey,
    server_key: slot.serverKey ?? spec.serverKey,
    db_pool: Number.isInteger(pool) ? pool : spec.config.db.pool.size,
    db_pooled: spec.config.db.pooler === 'pgbouncer',
    ...(slot.analyze !== undefined && slot.replica === 1 ? { db_analyze: slot.analyze } : {}),
  };
}

/** A writer that prefixes each line with the group, padded so the columns line up. */
export function createLinePrefixer(names: string[]) {
  const width = Math.max(...names.map((n) => n.length));
  return (group: string) => (line: string) => process.stderr.write(`${group.padEnd(width)} | ${line}\n`);
}

/**
 * Supervises already-started children: a child that exits on its own with code 0 (stopped with
 * `vcon-launch stop`) stays down; any other exit is a crash, recorded in the registry entry and
 * restarted with backoff, until `maxRestarts` restarts in a row fail or crash again: then the
 * instance is `crashed`. The foreground launcher and the detached supervisor both run this.
 */
export function createSupervisor(
  slots: Slot[],
  deps: {
    registry: Registry;
    prefix: (group: string) => (line: string) => void;
    baseEnv: Record<string, string>;
    mode: 'foreground' | 'detached';
    maxRestarts?: number;
    /** Called when nothing is left to supervise, instead of finishing (`done` then waits for stopAll). */
    onIdle?: () => void;
  },
): Supervisor {
  const detached = deps.mode === 'detached';
  const maxRestarts = deps.maxRestarts ?? DEFAULT_MAX_RESTARTS;
  let shuttingDown = false;
  // One warm process for the next crash, whichever group it hits: a restart then skips the
  // module loading that dominates a cold start (and that grows several-fold on a loaded machine).
  // Not for detached groups: a standby's output is piped to its parent, and a detached group's
  // process must keep logging to its file and keep running if its supervisor goes away.
  let standby: Standby | undefined = detached ? undefined : spawnStandby(deps.baseEnv);
  const takeStandby = () => {
    const s = standby;
    standby = undefined;
    return s;
  };
  const refillStandby = () => {
    if (!shuttingDown && !standby && !detached) standby = spawnStandby(deps.baseEnv);
  };
  const timers = new Map<Slot, NodeJS.Timeout>();
  // Restarts under way when a stop arrives: stopAll waits for them and stops what they started.
  const inflight = new Set<Promise<void>>();
  const pending = new Set<Slot>();
  // Instances asked to stop: their exit is not a crash, and no restart is scheduled for them.
  const stopping = new Set<Slot>();
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const finish = (slot: Slot) => {
    pending.delete(slot);
    if (pending.size > 0 || shuttingDown) return;
    // The detached supervisor may receive more groups: it decides itself whether to leave.
    if (deps.onIdle) return deps.onIdle();
    // Nothing left to supervise (every group was stopped, here or with `vcon-launch stop`): the
    // warm standby would otherwise keep this process, and the terminal, waiting for nothing.
    shuttingDown = true;
    const sb = takeStandby();
    if (sb) void sb.dispose().finally(resolveDone);
    else resolveDone();
  };
  const startedAt = new Map<Slot, string>();
  const record = (slot: Slot, child: Pick<Child, 'pid' | 'url' | 'port' | 'schema' | 'label'>) =>
    deps.registry.write(
      entryOf(slot, child, {
        supervisorPid: process.pid,
        logFile: slot.logFile ?? null,
        mode: deps.mode,
        startedAt: startedAt.get(slot),
      }),
    );

  const watch = (slot: Slot, child: Child, attempt: number) => {
    const upSince = Date.now();
    startedAt.set(slot, new Date(upSince).toISOString());
    void child.exited.then((exit: ExitInfo) => {
      if (slot.child === child) slot.child = undefined;
      if (shuttingDown || stopping.has(slot)) return;
      if (exit.code === 0 && !exit.signal) {
        deps.registry.remove(slotKey(slot));
        note(`group ${slotKey(slot)} stopped (pid ${child.pid})`);
        finish(slot);
        return;
      }
      const next = Date.now() - upSince > STABLE_AFTER_MS ? 0 : attempt;
      const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      slot.lastExit = { code: exit.code ?? null, signal: exit.signal ?? null, at: new Date().toISOString() };
      if (next >= maxRestarts) return giveUp(slot, child, `pid ${child.pid} ${how}`);
      const delay = BACKOFF_MS[Math.min(next, BACKOFF_MS.length - 1)];
      slot.state = 'restarting';
      slot.restarts = (slot.restarts ?? 0) + 1;
      record(slot, child);
      note(`group ${slotKey(slot)} crashed: pid ${child.pid} ${how}; restarting in ${delay} ms (restart ${next + 1})`);
      schedule(slot, next + 1, delay, child);
    });
  };

  /** Backoff exhausted: the instance stays listed as crashed, with its last exit, until stopped or started again. */
  const giveUp = (slot: Slot, last: Pick<Child, 'pid' | 'url' | 'port' | 'schema' | 'label'>, why: string) => {
    slot.state = 'crashed';
    record(slot, last);
    note(`group ${slotKey(slot)} crashed: ${why}; gave up after ${slot.restarts ?? 0} restart(s)`);
    finish(slot);
  };

  const schedule = (slot: Slot, attempt: number, delay: number, last: Pick<Child, 'pid' | 'url' | 'port' | 'schema' | 'label'>) => {
    const t = setTimeout(() => {
      timers.delete(slot);
      if (shuttingDown || stopping.has(slot)) return;
      const p = restart(slot, attempt, last).finally(() => inflight.delete(p));
      inflight.add(p);
    }, delay);
    timers.set(slot, t);
  };

  const restart = async (slot: Slot, attempt: number, last: Pick<Child, 'pid' | 'url' | 'port' | 'schema' | 'label'>) => {
    try {
      const sb = takeStandby();
      const opts: SpawnOptions = detached
        ? { env: slot.env, detached: true, logFile: slot.logFile, logRotation: logRotationOf(slot.spec), runAs: slot.runAs }
        : { env: slot.env, onLine: deps.prefix(slotKey(slot)), runAs: slot.runAs };
      // Back on the port it had, so the URL clients were given stays true.
      const child = await spawnKeepingPort(slot.spec, opts, deps.registry.lastPort(slotKey(slot)), (o) =>
        sb ? sb.activate(slot.spec, o) : spawnChild(slot.spec, o),
      );
      refillStandby();
      if (shuttingDown || stopping.has(slot)) {
        await child.stop();
        return;
      }
      if (detached) child.release();
      slot.child = child;
      slot.state = 'running';
      watch(slot, child, attempt);
      record(slot, child);
      note(`group ${slotKey(slot)} restarted: pid ${child.pid} at ${child.url}`);
    } catch (err) {
      refillStandby();
      if (shuttingDown || stopping.has(slot)) return;
      const message = (err as Error).message;
      slot.lastExit = { code: null, signal: null, at: new Date().toISOString() };
      if (attempt >= maxRestarts) return giveUp(slot, last, `the restart failed: ${message}`);
      const delayNext = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
      slot.restarts = (slot.restarts ?? 0) + 1;
      record(slot, last);
      note(`group ${slotKey(slot)} failed to restart: ${message}; retrying in ${delayNext} ms`);
      schedule(slot, attempt + 1, delayNext, last);
    }
  };

  const add = (slot: Slot) => {
    pending.add(slot);
    slot.state = 'running';
    slot.restarts ??= 0;
    slot.lastExit ??= null;
    if (slot.child) {
      watch(slot, slot.child, 0);
      record(slot, slot.child);
    }
  };
  for (const slot of slots) add(slot);

  const stopSlot = async (slot: Slot, graceMs?: number) => {
    stopping.add(slot);
    const t = timers.get(slot);
    if (t) clearTimeout(t);
    timers.delete(slot);
    await Promise.all([...inflight]);
    const child = slot.child;
    let outcome: 'stopped' | 'killed' | 'not running' = 'not running';
    if (child) {
      const exit = await child.stop(graceMs);
      outcome = exit.signal === 'SIGKILL' ? 'killed' : 'stopped';
    }
    deps.registry.remove(slotKey(slot));
    return { key: slotKey(slot), pid: child?.pid ?? null, outcome };
  };

  const reloadable = new Set<string>(RELOADABLE_VARIABLES);
  const reload = async (group: string, load: (current: GroupSpec) => GroupSpec): Promise<ReloadResult[]> => {
    const slots = [...pending].filter((s) => s.spec.name === group).sort((a, b) => a.replica - b.replica);
    if (!slots.length) return [];
    const base = (s: Slot) => ({ key: slotKey(s), pid: s.child?.pid ?? null, reloaded: [] as string[], restart: [] as string[] });
    let fresh: GroupSpec;
    try {
      fresh = load(slots[0].spec);
    } catch (err) {
      return slots.map((s) => ({ ...base(s), error: (err as Error).message }));
    }
    // What the file says now against what the instances started with (their keys: as last reloaded).
    const started = slots[0].spec.env;
    const names = [...new Set([...Object.keys(started), ...Object.keys(fresh.env)])].sort();
    const restart = names.filter((k) => !reloadable.has(k) && started[k] !== fresh.env[k]);
    return Promise.all(
      slots.map(async (s): Promise<ReloadResult> => {
        const changed = RELOADABLE_VARIABLES.filter((k) => s.env[k] !== fresh.env[k]);
        const out: ReloadResult = { ...base(s), restart, ...(fresh.warnings.length ? { warnings: fresh.warnings } : {}) };
        if (!changed.length) return out;
        try {
          // A process between a crash and its restart has none to ask: the restart reads slot.env.
          if (s.child) await s.child.reload(fresh.env);
        } catch (err) {
          return { ...out, error: `did not take the keys: ${(err as Error).message}` };
        }
        for (const k of changed) {
          if (fresh.env[k] === undefined) delete s.env[k];
          else s.env[k] = fresh.env[k];
        }
        return { ...out, reloaded: changed };
      }),
    );
  };

  return {
    done,
    add,
    async reload(groups, load) {
      return (await Promise.all(groups.map((g) => reload(g, load)))).flat();
    },
    keys: () => [...pending].map(slotKey),
    async stop(keys, graceMs) {
      const chosen = [...pending].filter((s) => keys.includes(slotKey(s)));
      const results = await Promise.all(chosen.map((s) => stopSlot(s, graceMs)));
      for (const s of chosen) {
        stopping.delete(s);
        finish(s);
      }
      return results;
    },
    async stopAll() {
      shuttingDown = true;
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      await Promise.all([...inflight]);
      await takeStandby()?.dispose();
      await Promise.all(
        [...pending].map(async (slot) => {
          const child = slot.child;
          if (child) await child.stop();
          deps.registry.remove(slotKey(slot));
          pending.delete(slot);
        }),
      );
      resolveDone();
    },
  };
}
