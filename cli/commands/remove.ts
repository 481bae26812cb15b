import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { openAdmin, removeGroupObjects } from '../../src/db/roles.js';
import { createCredentialStore } from '../credentials.js';
import { openDatabases } from '../database.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroup, resolveDir, type GroupSpec } from '../groups.js';
import { groupRoleNamesOf } from '../roles.js';
import { addGroupFlags, addInstancesDirFlag } from '../options.js';
import { commandHint, note } from '../output.js';
import { createRegistry } from '../registry.js';
import { pickAdminUrl } from './provision.js';

/** Options of `vcon-launch remove`. */
export interface RemoveOptions {
  group: string[];
  envDir: string;
  instancesDir: string;
  yes?: boolean;
  /** Drop only the launcher's state (registry files, stored passwords); the schema, roles and env file stay. */
  keepData?: boolean;
  adminUrl?: string;
}

/** The launcher's files of a group: its instances' entries, ports and logs (replicas' too), and its stored passwords. */
function launcherFilesOf(group: string, instancesDir: string): string[] {
  let names: string[] = [];
  try {
    names = readdirSync(instancesDir);
  } catch {
    /* no registry yet */
  }
  // group.json/.port/.log and its rotated logs (.log.N), and group@N.* for each replica (`@` is not allowed in group names).
  const mine = names.filter((f) => {
    const base = /^(.*)\.(?:json|port|log|log\.\d+)$/.exec(f)?.[1];
    return base !== undefined && (base === group || base.startsWith(`${group}@`));
  });
  const creds = path.join(createCredentialStore(instancesDir).dir, `${group}.json`);
  return [...mine.map((f) => path.join(instancesDir, f)), creds];
}

/** Asks on the terminal; without one, --yes is required. */
async function confirm(question: string, group: string): Promise<boolean> {
  if (!process.stdin.isTTY) throw new UserError(`removing group ${group} needs confirmation: run it on a terminal, or pass --yes`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(`${question}\ntype the group name to confirm: `)).trim() === group;
  } finally {
    rl.close();
  }
}

/**
 * Removes groups for good: per group, its schema and roles in ONE transaction over the admin
 * connection, then its files (env file, registry entries of every replica, logs, stored
 * passwords). Refused for a running group; a refusal by the database changes nothing.
 */
export async function removeGroups(opts: RemoveOptions, launcher: LauncherEnvironment): Promise<void> {
  const envDir = resolveDir(opts.envDir);
  const instancesDir = resolveDir(opts.instancesDir);
  const registry = createRegistry(instancesDir);
  if (!opts.group?.length) throw new UserError('name the group to remove with --group NAME');
  const { live } = registry.list();
  const specs: GroupSpec[] = opts.group.map((name) => loadGroup(name, envDir, launcher));
  for (const spec of specs) {
    const running = live.find((e) => e.group === spec.name);
    if (running) {
      throw new UserError(
        `group ${spec.name} is running (pid ${running.pid}); stop it first: ${commandHint(`stop --group ${spec.name}`, opts.instancesDir)}`,
      );
    }
  }
  for (const spec of specs) {
    const files = [...(opts.keepData ? [] : [spec.envFile]), ...launcherFilesOf(spec.name, instancesDir)];
    const what = opts.keepData
      ? `forget group ${spec.name} (its stored passwords and registry files); its schema, roles and env file stay`
      : `remove group ${spec.name}: drop schema ${spec.config.db.schema} with every vCon in it and the group's roles on ${spec.databaseLabel}, and delete ${spec.envFile} and the launcher's files`;
    if (!opts.yes && !(await confirm(`about to ${what}`, spec.name))) throw new UserError(`not confirmed; group ${spec.name} is unchanged`);
    if (!opts.keepData) await dropInDatabase(spec, opts, launcher, envDir);
    for (const f of files) rmSync(f, { force: true });
    process.stdout.write(`${spec.name}: ${opts.keepData ? 'forgotten (data kept)' : 'removed'}\n`);
  }
}

/** Schema and roles, in one transaction, as an admin (never the group's own role). */
async function dropInDatabase(spec: GroupSpec, opts: RemoveOptions, launcher: LauncherEnvironment, envDir: string): Promise<void> {
  const schema = spec.config.db.schema;
  const databases = spec.databaseUrl ? undefined : await openDatabases([spec], { verbose: false });
  try {
    const adminUrl = databases
      ? databases.urlOf(spec)
      : pickAdminUrl(spec, groupRoleNamesOf(spec, spec.databaseUrl ?? launcher.databaseUrl ?? '').role, opts, launcher, envDir);
    const admin = openAdmin(adminUrl);
    try {
      const dropped = await removeGroupObjects(admin, schema, { lockWaitMs: launcher.lockWaitMs });
      note(
        `group ${spec.name}: ${dropped.schema ? `dropped schema ${schema}` : `schema ${schema} did not exist`}` +
          `${dropped.roles.length ? `, roles ${dropped.roles.join(', ')}` : ', no roles of the launcher for it'}`,
      );
    } catch (err) {
      const e = err as Error & { code?: string; detail?: string };
      throw new UserError(
        `group ${spec.name}: the removal failed (${e.message}${e.detail ? `: ${e.detail}` : ''}); nothing was changed, in the database or on disk` +
          (e.code === '42501' ? '; use --admin-url with a superuser or a role that may drop the group roles' : ''),
      );
    } finally {
      await admin.end({ timeout: 5 });
    }
  } finally {
    await databases?.release();
  }
}

/** Wires `vcon-launch remove`. */
export function registerRemove(program: Command): void {
  const cmd = program
    .command('remove')
    .description("remove a stopped group for good: its schema and roles (one transaction), env file and the launcher's files")
    .option('--yes', 'do not ask for confirmation')
    .option('--keep-data', "drop only the launcher's state (registry files, stored passwords); keep the schema, roles and env file")
    .option('--admin-url <url>', 'connect as this role to drop the schema and roles (default: the first URL that is not the group role)');
  // No --all: a group is removed by its name only.
  addGroupFlags(cmd, { all: false });
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: RemoveOptions) => {
    await removeGroups(opts, readLauncherEnvironment());
  });
}
