// instances/: one JSON file per running group, written by `start`, read by status/stop/import.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface RegistryEntry {
  group: string;
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
  /** The foreground launcher supervising this child, or null when detached. */
  supervisor_pid: number | null;
  /** Where a detached child's output goes. */
  log_file: string | null;
  /** The REST base path, so status and import can reach /health without the env file. */
  api_base_path: string;
}

export interface Registry {
  dir: string;
  write(entry: RegistryEntry): void;
  remove(group: string): void;
  /** The live entry of a group, or undefined (a stale entry is removed on the way). */
  get(group: string): RegistryEntry | undefined;
  /** Live entries sorted by group; stale ones (dead pid) are removed and returned apart. */
  list(): { live: RegistryEntry[]; stale: RegistryEntry[] };
}

/** Whether a pid is a running process (EPERM means it exists but is not ours). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A live pid that now belongs to some other program (pid reuse) counts as stale, where /proc tells. */
function isOurChild(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('main.js');
  } catch {
    return true; // no /proc (or a zombie): trust the signal check
  }
}

/** A registry rooted at `dir` (created on first write). */
export function createRegistry(dir: string): Registry {
  const fileOf = (group: string) => path.join(dir, `${group}.json`);
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
        if (typeof e.pid === 'number' && typeof e.group === 'string') out.push(e);
      } catch {
        /* half-written or foreign file: not an entry */
      }
    }
    return out.sort((a, b) => a.group.localeCompare(b.group));
  };
  const registry: Registry = {
    dir,
    write(entry) {
      mkdirSync(dir, { recursive: true });
      // Write then rename, so a concurrent reader never sees half a file.
      const tmp = `${fileOf(entry.group)}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(entry, null, 2) + '\n');
      renameSync(tmp, fileOf(entry.group));
    },
    remove(group) {
      rmSync(fileOf(group), { force: true });
    },
    get(group) {
      return registry.list().live.find((e) => e.group === group);
    },
    list() {
      const live: RegistryEntry[] = [];
      const stale: RegistryEntry[] = [];
      for (const e of readAll()) {
        if (isOurChild(e.pid)) live.push(e);
        else {
          stale.push(e);
          registry.remove(e.group);
        }
      }
      return { live, stale };
    },
  };
  return registry;
}
