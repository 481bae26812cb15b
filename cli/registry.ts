// instances/: one JSON file per running instance (a group, or each replica of a group), written by
// `start`, read by status/stop/import.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { isAlive } from '../src/process.js';

export interface RegistryEntry {
  group: string;
  /** Which of the group's replicas this is, 1-based (1 when the group runs one process). */
  replica: number;
  /** How many replicas the group was started with. */
  replicas: number;
  pid: number;
  url: string;
  port: number;
  schema: string;
  label: string | null;
  env_file: string;
  started_at: string;
  /** user@host:port/db or "embedded"; never the password. */
  database: string;
  /** The PostgreSQL user the group's server connects as (its own role by default). */
  role: string;
  /** The process supervising this child: the foreground launcher, or the detached supervisor of the instances directory. */
  supervisor_pid: number | null;
  /** Who supervises it: the launcher in a terminal, or the background supervisor `start --detach` leaves. */
  mode?: 'foreground' | 'detached';
  /**
   * running; restarting (crashed, its supervisor brings it back); crashed (its supervisor gave up
   * after its backoff: stays listed until `stop` or `start`). Absent in entries of older launchers: running.
   */
  state?: InstanceState;
  /** Restarts since `start` (each crash the supervisor restarted, or tried to). */
  restarts?: number;
  /** How the previous process ended, when one crashed. */
  last_exit?: LastExit | null;
  /** Where a detached child's output goes. */
  log_file: string | null;
  /** The REST base path, so status and import can reach /health without the env file. */
  api_base_path: string;
  /** host:port/db (or embedded:<dir>): its database. */
  database_key?: string;
  /** host:port of its PostgreSQL server (the embedded cluster's too): which connection budget it counts against. */
  server_key?: string;
  /** The pool size it was handed (connections it may hold); absent in entries from older launchers. */
  db_pool?: number;
  /** Connected through PgBouncer: not counted against the server's max_connections. */
  db_pooled?: boolean;
  /** Connections of the group's analyze role (on replica 1's entry only; the role is the group's). */
  db_analyze?: number;
}

export type InstanceState = 'running' | 'restarting' | 'crashed';

export interface LastExit {
  code: number | null;
  signal: string | null;
  at: string;
}

export interface Registry {
  dir: string;
  write(entry: RegistryEntry): void;
  /** Removes one instance's entry, by its key (instanceKey). */
  remove(key: string): void;
  /** A live entry of a group (its first replica), or undefined (stale entries are removed on the way). */
  get(group: string): RegistryEntry | undefined;
  /**
   * Entries sorted by group and replica: live (running, or restarting under a live supervisor),
   * down (crashed: its supervisor gave up; kept until stopped or started again) and stale (a dead
   * pid nobody supervises: removed on the way).
   */
  list(): { live: RegistryEntry[]; down: RegistryEntry[]; stale: RegistryEntry[] };
  /** The port an instance (by its key) last served on, kept in <key>.port after its entry is removed. */
  lastPort(key: string): number | undefined;
}

/**
 * The name of one instance: the group, or `group@N` for replica N of several (`@` is not allowed
 * in group names, so keys never collide). Also its registry file's name and its log prefix.
 */
export const instanceKey = (e: { group: string; replica?: number; replicas?: number }): string =>
  (e.replicas ?? 1) > 1 ? `${e.group}@${e.replica ?? 1}` : e.group;

/** A live pid that now belongs to some other program (pid reuse) counts as stale, where /proc tells. */
function isOurChild(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('main.js');
  } catch {
    return true; // no /proc: trust the signal check
  }
}

/** A live launcher process (foreground or the detached supervisor), where /proc tells. */
export function isSupervisor(pid: number | null | undefined): boolean {
  if (!pid || !isAlive(pid)) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('index.js') || cmdline.includes('vcon-launch');
  } catch {
    return true;
  }
}

/** A registry rooted at `dir` (created on first write). */
export function createRegistry(dir: string): Registry {
  const fileOf = (key: string) => path.join(dir, `${key}.json`);
  const portFileOf = (key: string) => path.join(dir, `${key}.port`);
  const readAll = (): RegistryEntry[] => {
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
    const out: RegistryEntry[] = [];
    for (const f of files) {
      try {
        const e = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as RegistryEntry;
        if (typeof e.pid === 'number' && typeof e.group === 'string') out.push({ ...e, replica: e.replica ?? 1, replicas: e.replicas ?? 1 });
      } catch {
        /* half-written or foreign file: not an entry */
      }
    }
    return out.sort((a, b) => a.group.localeCompare(b.group) || a.replica - b.replica);
  };
  const registry: Registry = {
    dir,
    write(entry) {
      // Modes of their own, not the umask's: `stop` signals the pid an entry names, so no other
      // user (a group's included) may write one, even under a launcher started with umask 000.
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      // Write then rename, so a concurrent reader never sees half a file.
      const file = fileOf(instanceKey(entry));
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(entry, null, 2) + '\n', { mode: 0o644 });
      renameSync(tmp, file);
      writeFileSync(portFileOf(instanceKey(entry)), `${entry.port}\n`, { mode: 0o644 });
    },
    lastPort(key) {
      try {
        const port = Number(readFileSync(portFileOf(key), 'utf8').trim());
        return Number.isInteger(port) && port > 0 && port < 65_536 ? port : undefined;
      } catch {
        return undefined;
      }
    },
    remove(key) {
      rmSync(fileOf(key), { force: true });
    },
    get(group) {
      return registry.list().live.find((e) => e.group === group);
    },
    list() {
      const live: RegistryEntry[] = [];
      const down: RegistryEntry[] = [];
      const stale: RegistryEntry[] = [];
      for (const e of readAll()) {
        if (e.state === 'crashed') down.push(e);
        // Between a crash and its restart the pid is dead but the supervisor still answers for it.
        else if (isOurChild(e.pid) || isSupervisor(e.supervisor_pid)) live.push(e);
        else {
          stale.push(e);
          registry.remove(instanceKey(e));
        }
      }
      return { live, down, stale };
    },
  };
  return registry;
}
