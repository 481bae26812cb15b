// The foreground supervisor: prefixes children's log lines, restarts crashed children with
// backoff, keeps the registry current, and stops everything on request.
import { spawnChild, spawnStandby, type Child, type ExitInfo, type Standby } from './child.js';
import type { GroupSpec } from './groups.js';
import type { RunAs } from './os-users.js';
import { note } from './output.js';
import { spawnKeepingPort } from './ports.js';
import { instanceKey, type Registry, type RegistryEntry } from './registry.js';

/** Restart delays: the first is immediate, so a one-off crash costs only a server start (~1 s). */
const BACKOFF_MS = [0, 500, 1_000, 2_000, 5_000, 10_000, 30_000];
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
}

export interface Supervisor {
  /** Resolves when every child has stopped (after stopAll, or when each was stopped from outside). */
  done: Promise<void>;
  stopAll(): Promise<void>;
}

/** The instance name of a slot: its group, or group@N for a replica (log prefixes, registry). */
export const slotKey = (slot: Pick<Slot, 'spec' | 'replica' | 'replicas'>) =>
  instanceKey({ group: slot.spec.name, replica: slot.replica, replicas: slot.replicas });

/** Builds the registry entry of a running child. */
export function entryOf(
  slot: Pick<Slot, 'spec' | 'replica' | 'replicas' | 'role' | 'env' | 'analyze' | 'serverKey'>,
  child: Child,
  opts: { supervisorPid: number | null; logFile: string | null },
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
    started_at: new Date().toISOString(),
    database: spec.databaseLabel,
    role: slot.role,
    supervisor_pid: opts.supervisorPid,
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
 * `vcon-launch stop`) stays down; any other exit is a crash and is restarted with backoff.
 */
export function createSupervisor(
  slots: Slot[],
  deps: { registry: Registry; prefix: (group: string) => (line: string) => void; baseEnv: Record<string, string> },
): Supervisor {
  let shuttingDown = false;
  // One warm process for the next crash, whichever group it hits: a restart then skips the
  // module loading that dominates a cold start (and that grows several-fold on a loaded machine).
  let standby: Standby | undefined = spawnStandby(deps.baseEnv);
  const takeStandby = () => {
    const s = standby;
    standby = undefined;
    return s;
  };
  const refillStandby = () => {
    if (!shuttingDown && !standby) standby = spawnStandby(deps.baseEnv);
  };
  const timers = new Set<NodeJS.Timeout>();
  // Restarts under way when a stop arrives: stopAll waits for them and stops what they started.
  const inflight = new Set<Promise<void>>();
  const pending = new Set<Slot>(slots);
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const finish = (slot: Slot) => {
    pending.delete(slot);
    if (pending.size > 0) return;
    // Nothing left to supervise (every group was stopped, here or with `vcon-launch stop`): the
    // warm standby would otherwise keep this process, and the terminal, waiting for nothing.
    shuttingDown = true;
    const sb = takeStandby();
    if (sb) void sb.dispose().finally(resolveDone);
    else resolveDone();
  };

  const watch = (slot: Slot, child: Child, attempt: number) => {
    const startedAt = Date.now();
    void child.exited.then((exit: ExitInfo) => {
      if (slot.child === child) slot.child = undefined;
      deps.registry.remove(slotKey(slot));
      if (shuttingDown) return;
      if (exit.code === 0 && !exit.signal) {
        note(`group ${slotKey(slot)} stopped (pid ${child.pid})`);
        finish(slot);
        return;
      }
      const next = Date.now() - startedAt > STABLE_AFTER_MS ? 0 : attempt;
      const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      const delay = BACKOFF_MS[Math.min(next, BACKOFF_MS.length - 1)];
      note(`group ${slotKey(slot)} crashed: pid ${child.pid} ${how}; restarting in ${delay} ms (restart ${next + 1})`);
      schedule(slot, next + 1, delay);
    });
  };

  const schedule = (slot: Slot, attempt: number, delay: number) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (shuttingDown) return;
      const p = restart(slot, attempt).finally(() => inflight.delete(p));
      inflight.add(p);
    }, delay);
    timers.add(t);
  };

  const restart = async (slot: Slot, attempt: number) => {
    try {
      const sb = takeStandby();
      const opts = { env: slot.env, onLine: deps.prefix(slotKey(slot)), runAs: slot.runAs };
      // Back on the port it had, so the URL clients were given stays true.
      const child = await spawnKeepingPort(slot.spec, opts, deps.registry.lastPort(slotKey(slot)), (o) =>
        sb ? sb.activate(slot.spec, o) : spawnChild(slot.spec, o),
      );
      refillStandby();
      if (shuttingDown) {
        await child.stop();
        return;
      }
      slot.child = child;
      deps.registry.write(entryOf(slot, child, { supervisorPid: process.pid, logFile: null }));
      note(`group ${slotKey(slot)} restarted: pid ${child.pid} at ${child.url}`);
      watch(slot, child, attempt);
    } catch (err) {
      const delayNext = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
      note(`group ${slotKey(slot)} failed to restart: ${(err as Error).message}; retrying in ${delayNext} ms`);
      refillStandby();
      if (!shuttingDown) schedule(slot, attempt + 1, delayNext);
    }
  };

  for (const slot of slots) if (slot.child) watch(slot, slot.child, 0);

  return {
    done,
    async stopAll() {
      shuttingDown = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await Promise.all([...inflight]);
      await takeStandby()?.dispose();
      await Promise.all(
        slots.map(async (slot) => {
          const child = slot.child;
          if (child) {
            await child.stop();
            deps.registry.remove(slotKey(slot));
          }
          finish(slot);
        }),
      );
      resolveDone();
    },
  };
}
