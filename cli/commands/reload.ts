import type { Command } from 'commander';
import { RELOADABLE_VARIABLES } from '../../src/config.js';
import { askAt, launcherSocketOf, socketPathOf, type ReloadAnswer } from '../daemon.js';
import { UserError } from '../errors.js';
import { resolveDir } from '../groups.js';
import { addInstancesDirFlag } from '../options.js';
import { commandHint, formatTable, note } from '../output.js';
import { createRegistry, instanceKey, isSupervisor, type RegistryEntry } from '../registry.js';
import type { ReloadResult } from '../supervisor.js';

/** Options of `vcon-launch reload`. */
export interface ReloadOptions {
  group?: string[];
  all?: boolean;
  instancesDir: string;
}

/** One row of the answer: an instance, or a named group that is not running. */
export type ReloadRow = ReloadResult & { notRunning?: boolean };

/**
 * Has the supervisor of each named running group re-read the group's env file and hand every
 * instance of it the keys that changed (API_KEYS, API_KEYS_READONLY, METRICS_KEY), with no
 * restart. Other changed variables are reported as needing one.
 */
export async function reloadGroups(opts: ReloadOptions): Promise<ReloadRow[]> {
  const registry = createRegistry(resolveDir(opts.instancesDir));
  const { live } = registry.list();
  const named = opts.group ?? [];
  if (opts.all && named.length) throw new UserError('use either --group NAME or --all, not both');
  if (!opts.all && !named.length) throw new UserError('name the groups with --group NAME (repeatable) or use --all');
  const groups = opts.all ? [...new Set(live.map((e) => e.group))] : [...new Set(named)];
  const rows: ReloadRow[] = [];
  // Each supervisor (the detached groups' one, or a foreground launcher) is asked once for its groups.
  const bySocket = new Map<string, { groups: Set<string>; entries: RegistryEntry[] }>();
  for (const group of groups) {
    const entries = live.filter((e) => e.group === group);
    if (!entries.length) rows.push({ key: group, pid: null, reloaded: [], restart: [], notRunning: true });
    for (const e of entries) {
      if (!isSupervisor(e.supervisor_pid)) {
        rows.push({ key: instanceKey(e), pid: e.pid, reloaded: [], restart: [], error: 'no supervisor runs it any more: restart it to apply' });
        continue;
      }
      const sock = e.mode === 'detached' ? socketPathOf(registry.dir) : launcherSocketOf(registry.dir, e.supervisor_pid!);
      const at = bySocket.get(sock) ?? { groups: new Set(), entries: [] };
      at.groups.add(group);
      at.entries.push(e);
      bySocket.set(sock, at);
    }
  }
  await Promise.all(
    [...bySocket].map(async ([sock, { groups: names, entries }]) => {
      const answer = await askAt<ReloadAnswer | { ok: false; errors: string[] }>(sock, { type: 'reload', groups: [...names] }).catch(
        (err: Error) => ({ ok: false as const, errors: [err.message] }),
      );
      if (answer?.ok) {
        rows.push(...answer.reloads);
        // An instance its supervisor did not list (it stopped meanwhile) is left out.
        return;
      }
      const why = answer
        ? answer.errors.join('; ')
        : 'its supervisor does not answer reloads (started by an older vcon-launch?): restart it to apply';
      for (const e of entries) rows.push({ key: instanceKey(e), pid: e.pid, reloaded: [], restart: [], error: why });
    }),
  );
  return rows.sort((a, b) => a.key.localeCompare(b.key, 'en', { numeric: true }));
}

/** The table `reload` prints. */
export function formatReloadTable(rows: ReloadRow[]): string {
  return formatTable(
    ['GROUP', 'PID', 'RELOADED', 'NEEDS RESTART'],
    rows.map((r) => [
      r.key,
      r.pid,
      r.notRunning
        ? 'not running (its next start reads the file)'
        : r.error
          ? `failed: ${r.error.replace(/\s*\n\s*/g, ' ')}`
          : r.reloaded.join(', ') || 'no key changed',
      r.restart.join(', ') || '-',
    ]),
  );
}

/** Wires `vcon-launch reload`. */
export function registerReload(program: Command): void {
  const cmd = program
    .command('reload')
    .description(`apply changed keys (${RELOADABLE_VARIABLES.join(', ')}) of running groups' env files without a restart`)
    .option('--group <name>', 'a running group; repeat for several', (v: string, p: string[] = []) => [...p, v])
    .option('--all', 'every running group');
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: ReloadOptions) => {
    const rows = await reloadGroups(opts);
    if (!rows.length) {
      process.stdout.write('no groups are running\n');
      return;
    }
    process.stdout.write(formatReloadTable(rows) + '\n');
    const warned = new Set<string>();
    for (const r of rows) {
      const group = r.key.replace(/@\d+$/, '');
      if (warned.has(group)) continue;
      warned.add(group);
      for (const w of r.warnings ?? []) note(`group ${group}: warning: ${w}`);
      if (r.restart.length)
        note(
          `group ${group}: ${r.restart.join(', ')} changed in its env file; that applies at its next start (${commandHint(`stop --group ${group}`, opts.instancesDir)}, then start)`,
        );
    }
    process.exitCode = rows.some((r) => r.error) ? 1 : 0;
  });
}
