import type { Command } from 'commander';
import { stopPid } from '../child.js';
import { UserError } from '../errors.js';
import { resolveDir } from '../groups.js';
import { addInstancesDirFlag } from '../options.js';
import { note } from '../output.js';
import { askSupervisor, type StopAnswer } from '../daemon.js';
import { createRegistry, instanceKey, isSupervisor } from '../registry.js';

/** Options of `vcon-launch stop`. */
export interface StopOptions {
  group?: string[];
  all?: boolean;
  instancesDir: string;
  /** How long a child gets to finish in-flight requests before SIGKILL. */
  timeoutMs?: number;
}

/** What happened to each instance (a group, or each replica of it). */
export interface StopResult {
  /** The instance: the group, or group@N for a replica. */
  group: string;
  pid: number | null;
  /** cleared: a crashed instance (no process) whose entry was removed. */
  outcome: 'stopped' | 'killed' | 'not running' | 'cleared';
}

/**
 * Stops running groups gracefully (SIGTERM; SIGKILL after the timeout) and removes their
 * registry entries. A group under a foreground supervisor stays down: a clean exit is not a crash.
 */
export async function stopGroups(opts: StopOptions): Promise<StopResult[]> {
  const registry = createRegistry(resolveDir(opts.instancesDir));
  const { live, down } = registry.list();
  const named = opts.group ?? [];
  if (opts.all && named.length) throw new UserError('use either --group NAME or --all, not both');
  if (!opts.all && !named.length) throw new UserError('name the groups with --group NAME (repeatable) or use --all');
  const targets = opts.all ? [...new Set([...live, ...down].map((e) => e.group))] : [...new Set(named)];
  const graceMs = opts.timeoutMs ?? 15_000;
  const results = await Promise.all(
    targets.map(async (group): Promise<StopResult[]> => {
      // Every replica of the group.
      const entries = live.filter((e) => e.group === group);
      const crashed = down.filter((e) => e.group === group);
      // A crashed instance has no process: stopping it clears the entry that kept it listed.
      for (const e of crashed) registry.remove(instanceKey(e));
      const cleared = crashed.map((e): StopResult => ({ group: instanceKey(e), pid: null, outcome: 'cleared' }));
      if (!entries.length) return cleared.length ? cleared : [{ group, pid: null, outcome: 'not running' }];
      // Instances of the detached supervisor are stopped through it, so it does not restart them.
      const supervised = entries.filter((e) => e.mode === 'detached' && isSupervisor(e.supervisor_pid));
      const answer = supervised.length
        ? await askSupervisor<StopAnswer>(registry.dir, {
            type: 'stop',
            keys: supervised.map(instanceKey),
            graceMs,
          })
        : undefined;
      const done = new Map((answer?.results ?? []).map((r) => [r.key, r]));
      const others = await Promise.all(
        entries
          .filter((e) => !done.has(instanceKey(e)))
          .map(async (entry): Promise<StopResult> => {
            const outcome = await stopPid(entry.pid, graceMs);
            registry.remove(instanceKey(entry));
            return { group: instanceKey(entry), pid: entry.pid, outcome: outcome === 'killed' ? 'killed' : 'stopped' };
          }),
      );
      const viaSupervisor = [...done.values()].map((r): StopResult => ({
        group: r.key,
        pid: r.pid,
        outcome: r.outcome === 'not running' ? 'stopped' : r.outcome,
      }));
      return [...viaSupervisor, ...others, ...cleared];
    }),
  );
  return results.flat();
}

/** Wires `vcon-launch stop`. */
export function registerStop(program: Command): void {
  const cmd = program
    .command('stop')
    .description('stop running groups gracefully (SIGTERM, then SIGKILL after a timeout)')
    .option('--group <name>', 'a group; repeat for several', (v: string, p: string[] = []) => [...p, v])
    .option('--all', 'every running group')
    .option('--timeout <seconds>', 'grace period before SIGKILL', '15');
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: StopOptions & { timeout: string }) => {
    const seconds = Number(opts.timeout);
    if (!Number.isFinite(seconds) || seconds < 0) throw new UserError(`--timeout must be a number of seconds, got "${opts.timeout}"`);
    const results = await stopGroups({ ...opts, timeoutMs: seconds * 1000 });
    if (!results.length) process.stdout.write('no groups are running\n');
    for (const r of results) {
      if (r.outcome === 'not running') process.stdout.write(`${r.group}: not running\n`);
      else if (r.outcome === 'cleared') process.stdout.write(`${r.group}: crashed; removed from the list\n`);
      else process.stdout.write(`${r.group}: ${r.outcome === 'killed' ? 'killed after the timeout' : 'stopped'} (pid ${r.pid})\n`);
    }
    if (results.some((r) => r.outcome === 'killed')) note('some groups did not stop within the timeout and were killed');
  });
}
