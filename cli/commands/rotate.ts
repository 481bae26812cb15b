import type { Command } from 'commander';
import { userOfUrl } from '../../src/db/roles.js';
import { createCredentialStore } from '../credentials.js';
import { openDatabases } from '../database.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroups, resolveDir, selectGroupNames } from '../groups.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { formatTable, note } from '../output.js';
import { createRegistry } from '../registry.js';
import { analyzeLimitsOf } from '../budget.js';
import { groupRoleNamesOf, prepareIdentities } from '../roles.js';
import { provisionGroups } from './provision.js';

/** Options of `vcon-launch rotate`. */
export interface RotateOptions extends GroupFlags {
  instancesDir: string;
  adminUrl?: string;
}

/**
 * New passwords for the selected groups' roles. Stopped groups only: a running server would lose
 * its next connection. Roles the launcher made get new stored credentials; roles `provision` wrote
 * into an env file get a new DATABASE_URL there.
 */
export async function rotateGroups(opts: RotateOptions, launcher: LauncherEnvironment): Promise<{ group: string; role: string; stored: string }[]> {
  const envDir = resolveDir(opts.envDir);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const registry = createRegistry(resolveDir(opts.instancesDir));
  const running = specs.filter((s) => registry.get(s.name));
  if (running.length) {
    throw new UserError(
      `stop ${running.map((s) => s.name).join(', ')} first (vcon-launch stop --group NAME): a running group would lose its database connections`,
    );
  }
  const inFile = specs.filter((s) => s.databaseUrl && userOfUrl(s.databaseUrl) === groupRoleNamesOf(s, s.databaseUrl).role);
  const out: { group: string; role: string; stored: string }[] = [];
  if (inFile.length) {
    const done = await provisionGroups({ ...opts, group: inFile.map((s) => s.name), all: false, rotate: true }, launcher);
    out.push(...done.map((r) => ({ group: r.group, role: r.role, stored: r.writtenTo ?? '' })));
  }
  const rest = specs.filter((s) => !inFile.includes(s));
  if (rest.length) {
    const databases = await openDatabases(rest, { verbose: false });
    try {
      const store = createCredentialStore(registry.dir);
      const identities = await prepareIdentities(rest, databases, {
        store,
        launcher: { ...launcher, allowSharedSuperuser: true },
        rotate: true,
        analyzeConnectionsOf: await analyzeLimitsOf(rest, { urlOf: (s) => databases.urlOf(s), running: registry.list().live }),
      });
      for (const s of rest) {
        const id = identities.get(s.name)!;
        if (id.isolation !== 'role') throw new UserError(`group ${s.name} has no role of its own to rotate (it connects as ${id.role})`);
        out.push({ group: s.name, role: id.role, stored: store.dir });
      }
    } finally {
      await databases.release();
    }
  }
  return out;
}

/** Wires `vcon-launch rotate`. */
export function registerRotate(program: Command): void {
  const cmd = program
    .command('rotate')
    .description("give stopped groups' PostgreSQL roles new passwords")
    .option('--admin-url <url>', 'for groups provisioned into their env file: a role that may alter roles');
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: RotateOptions) => {
    const rows = await rotateGroups(opts, readLauncherEnvironment());
    process.stdout.write(
      formatTable(
        ['GROUP', 'ROLE', 'STORED IN'],
        rows.map((r) => [r.group, r.role, r.stored]),
      ) + '\n',
    );
    note('new passwords set; the next start uses them');
  });
}
