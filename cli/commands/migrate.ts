import type { Command } from 'commander';
import { createSql } from '../../src/db/client.js';
import { migrate, migrationStatus, type MigrationStatus } from '../../src/db/migrate.js';
import { openDatabases } from '../database.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { loadGroups, resolveDir, selectGroupNames, type GroupSpec } from '../groups.js';
import { createCredentialStore } from '../credentials.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { prepareIdentities } from '../roles.js';
import { analyzeLimitsOf } from '../budget.js';
import { createRegistry } from '../registry.js';
import { createNoteLog, formatTable } from '../output.js';

/** The outcome of `migrate` for one group. */
export interface MigrateResult {
  group: string;
  schema: string;
  database: string;
  /** Migrations applied by this run (empty with --status). */
  applied: string[];
  /** Applied and pending migrations (after this run). */
  status?: MigrationStatus;
  error?: string;
  /** The role the group's server connects as (after provisioning), when migrated. */
  role?: string;
}

/**
 * Applies pending migrations to each group's schema (or, with `status`, only reads them), without
 * starting servers. Concurrent runners serialise on an advisory lock; a migration that changes a table
 * the running build writes (0005) needs the group's instances stopped or upgraded with it (README).
 */
export async function migrateGroups(
  specs: GroupSpec[],
  opts: { status?: boolean; instancesDir?: string; launcher?: Pick<LauncherEnvironment, 'roles'> } = {},
): Promise<MigrateResult[]> {
  const databases = await openDatabases(specs, { verbose: false });
  try {
    const results = await Promise.all(
      specs.map(async (spec): Promise<MigrateResult> => {
        const schema = spec.config.db.schema;
        const sql = createSql({ url: databases.urlOf(spec), schema, max: 1, applicationName: `vcon-launch-migrate-${spec.name}`.slice(0, 60) });
        const base = { group: spec.name, schema, database: spec.databaseLabel };
        try {
          const applied = opts.status ? [] : (await migrate(sql, schema, { log: createNoteLog(false) })).applied;
          return { ...base, applied, status: await migrationStatus(sql, schema) };
        } catch (err) {
          return { ...base, applied: [], error: (err as Error).message };
        } finally {
          await sql.end({ timeout: 5 });
        }
      }),
    );
    if (opts.status) return results;
    // Then each group's role, as `start` would make it (nothing serves here, so no superuser check).
    const migrated = specs.filter((s) => !results.find((r) => r.group === s.name)?.error);
    const instancesDir = resolveDir(opts.instancesDir ?? 'instances');
    const identities = await prepareIdentities(migrated, databases, {
      store: createCredentialStore(instancesDir),
      launcher: { roles: opts.launcher?.roles ?? true, allowSharedSuperuser: true },
      analyzeConnectionsOf: await analyzeLimitsOf(migrated, { urlOf: (s) => databases.urlOf(s), running: createRegistry(instancesDir).list().live }),
    });
    return results.map((r) => ({ ...r, role: identities.get(r.group)?.role }));
  } finally {
    await databases.release();
  }
}

/** Formats migrate results as a table. */
export function formatMigrate(results: MigrateResult[], opts: { status?: boolean }): string {
  const header = opts.status
    ? ['GROUP', 'SCHEMA', 'DATABASE', 'APPLIED', 'PENDING']
    : ['GROUP', 'SCHEMA', 'DATABASE', 'APPLIED NOW', 'PENDING', 'ROLE'];
  return formatTable(
    header,
    results.map((r) => {
      if (r.error) return [r.group, r.schema, r.database, `error: ${r.error}`, '?', ...(opts.status ? [] : ['?'])];
      const pending = r.status?.pending.map((p) => p.name).join(', ') || 'none';
      const applied = opts.status ? r.status?.applied.map((a) => a.name).join(', ') || 'none' : r.applied.join(', ') || 'none (up to date)';
      return [r.group, r.schema, r.database, applied, pending, ...(opts.status ? [] : [r.role ?? '?'])];
    }),
  );
}

/** Selects, loads and migrates groups; resolves with the exit code. */
export async function runMigrate(opts: GroupFlags & { status?: boolean; instancesDir: string }, launcher: LauncherEnvironment): Promise<number> {
  const envDir = resolveDir(opts.envDir);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const results = await migrateGroups(specs, { ...opts, launcher });
  process.stdout.write(formatMigrate(results, opts) + '\n');
  return results.some((r) => r.error) ? 1 : 0;
}

/** Wires `vcon-launch migrate`. */
export function registerMigrate(program: Command): void {
  const cmd = program
    .command('migrate')
    .description("apply pending migrations to each group schema and (re)make each group's role, without starting servers")
    .option('--status', 'only list applied and pending migrations per group');
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: GroupFlags & { status?: boolean; instancesDir: string }) => {
    process.exitCode = await runMigrate(opts, readLauncherEnvironment());
  });
}
