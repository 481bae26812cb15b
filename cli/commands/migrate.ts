import type { Command } from 'commander';
import { createSql } from '../../src/db/client.js';
import { loadMigrations, migrationStatus, type MigrationStatus } from '../../src/db/migrate.js';
import { adminPowers, openAdmin, userOfUrl, withCredentials } from '../../src/db/roles.js';
import { openDatabases } from '../database.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { loadGroups, resolveDir, selectGroupNames, type GroupSpec } from '../groups.js';
import { createCredentialStore, type CredentialStore } from '../credentials.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { forEachBounded, groupRoleNamesOf, migrateAs, PREPARE_CONCURRENCY, prepareIdentities } from '../roles.js';
import { analyzeLimitsOf } from '../budget.js';
import { createRegistry } from '../registry.js';
import { formatTable } from '../output.js';

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
 * Applies pending migrations to each group's schema as the group's own role (making or realigning
 * the role first, as `start` would), or, with `status`, only reads them as that role, without
 * starting servers. The admin connection never reads a group's schema. Concurrent runners serialise
 * on an advisory lock; a migration that changes a table the running build writes (0005) needs the
 * group's instances stopped or upgraded with it (docs/development.md "Migrations").
 */
export async function migrateGroups(
  specs: GroupSpec[],
  opts: { status?: boolean; instancesDir?: string; launcher?: Pick<LauncherEnvironment, 'roles'> } = {},
): Promise<MigrateResult[]> {
  const databases = await openDatabases(specs, { verbose: false });
  const store = createCredentialStore(resolveDir(opts.instancesDir ?? 'instances'));
  const launcher = { roles: opts.launcher?.roles ?? true, allowSharedSuperuser: true };
  const results = new Map<string, MigrateResult>();
  try {
    // Each group's analyze limit as `start` would give it (a running group keeps its own); --status provisions nothing.
    const analyzeConnectionsOf = opts.status
      ? () => 0
      : await analyzeLimitsOf(specs, {
          urlOf: (s) => databases.urlOf(s),
          running: createRegistry(resolveDir(opts.instancesDir ?? 'instances')).list().live,
        });
    await forEachBounded(specs, PREPARE_CONCURRENCY, async (spec) => {
      const schema = spec.config.db.schema;
      const base = { group: spec.name, schema, database: spec.databaseLabel };
      try {
        if (opts.status) {
          const url = await groupUrlOf(spec, databases.urlOf(spec), store, launcher);
          const status = typeof url === 'string' ? await statusAs(url, spec) : url;
          results.set(spec.name, { ...base, applied: [], status });
          return;
        }
        // Nothing serves here, so no superuser check; the role is made, then migrates its schema.
        const identity = (await prepareIdentities([spec], databases, { store, launcher, quiet: true, analyzeConnectionsOf })).get(spec.name)!;
        const url = identity.env.DATABASE_URL ?? databases.urlOf(spec);
        const applied = identity.applied ?? (await migrateAs(url, spec, 'migrate'));
        results.set(spec.name, { ...base, applied, status: await statusAs(url, spec), role: identity.role });
      } catch (err) {
        results.set(spec.name, { ...base, applied: [], error: (err as Error).message });
      }
    });
    return specs.map((s) => results.get(s.name)!);
  } finally {
    await databases.release();
  }
}

/** Reads the migration status over the given URL (the group's identity). */
async function statusAs(url: string, spec: GroupSpec): Promise<MigrationStatus> {
  const schema = spec.config.db.schema;
  const sql = createSql({ url, schema, max: 1, applicationName: `vcon-launch-migrate-${spec.name}`.slice(0, 60) });
  try {
    return await migrationStatus(sql, schema);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The URL `migrate --status` reads a group's schema with: its own role's (from the env file or the
 * credential store), or the URL itself when groups share its identity; never the admin's for a
 * group that has a role of its own. A group with no role yet has every migration pending when its
 * schema does not exist (the admin reads only the catalog), and is refused when it does.
 */
async function groupUrlOf(
  spec: GroupSpec,
  url: string,
  store: CredentialStore,
  launcher: Pick<LauncherEnvironment, 'roles'>,
): Promise<string | MigrationStatus> {
  const schema = spec.config.db.schema;
  const names = groupRoleNamesOf(spec, url);
  if (userOfUrl(url) === names.role || !launcher.roles || schema === 'public') return url;
  const creds = store.get(spec.name);
  if (creds && creds.role === names.role && creds.schema === schema) return withCredentials(url, creds.role, creds.password);
  const admin = openAdmin(url);
  try {
    if (!(await adminPowers(admin)).createRole) return url;
    const [ns] = await admin`select 1 from pg_catalog.pg_namespace where nspname = ${schema}`;
    if (!ns) return { schema, applied: [], pending: loadMigrations().map((m) => ({ version: m.version, name: m.name })) };
  } finally {
    await admin.end({ timeout: 5 });
  }
  throw new Error(
    `schema ${schema} has no role of this launcher yet; vcon-launch migrate --group ${spec.name} gives it one, then reads it as that role`,
  );
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
