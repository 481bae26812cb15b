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

/** Formats migrate results as a table (applying), or one line per group (`--status`). */
export function formatMigrate(results: MigrateResult[], opts: { status?: boolean }): string {
  if (opts.status) return formatMigrateStatus(results);
  return formatTable(
    ['GROUP', 'SCHEMA', 'DATABASE', 'APPLIED NOW', 'PENDING', 'ROLE'],
    results.map((r) => {
      if (r.error) return [r.group, r.schema, r.database, `error: ${r.error}`, '?', '?'];
      const pending = r.status?.pending.map((p) => p.name).join(', ') || 'none';
      return [r.group, r.schema, r.database, r.applied.join(', ') || 'none (up to date)', pending, r.role ?? '?'];
    }),
  );
}

/** Columns `migrate --status` keeps to: a terminal's width, with room to spare. */
export const STATUS_WIDTH = 100;

/** Words of `text` in lines of at most `width` characters (a longer word stands alone). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return line ? [...lines, line] : lines;
}

/** "n pending: a, b, and 3 more": as many names as fit in `width`. */
function pendingText(names: string[], width: number): string {
  const head = `${names.length} pending: `;
  for (let shown = names.length; shown > 0; shown--) {
    const rest = names.length - shown;
    const text = `${head}${names.slice(0, shown).join(', ')}${rest ? `, and ${rest} more (see --json)` : ''}`;
    if (text.length <= width) return text;
  }
  return `${head}${names.length} migrations (see --json)`;
}

/**
 * `migrate --status` for people: one short line per group (up to date, what is pending, or the
 * error, wrapped), never wider than STATUS_WIDTH. `--json` has every migration with its time.
 */
export function formatMigrateStatus(results: MigrateResult[]): string {
  // Names longer than 24 characters get a line of their own rather than widening the column.
  const nameWidth = Math.max(1, ...results.map((r) => r.group.length).filter((n) => n <= 24));
  const room = STATUS_WIDTH - nameWidth - 2;
  const lines: string[] = [];
  for (const r of results) {
    const name = r.group.padEnd(nameWidth);
    let text: string[];
    if (r.error) text = wrap(`error: ${r.error}`, room);
    else if (!r.status?.pending.length) text = [`up to date (${r.status?.applied.length ?? 0} migrations)`];
    else
      text = [
        pendingText(
          r.status.pending.map((p) => p.name),
          room,
        ),
      ];
    if (r.group.length > nameWidth) lines.push(r.group);
    lines.push(`${r.group.length > nameWidth ? ' '.repeat(nameWidth) : name}  ${text[0]}`);
    for (const more of text.slice(1)) lines.push(`${' '.repeat(nameWidth)}  ${more}`);
  }
  return lines.join('\n');
}

/** Selects, loads and migrates groups; resolves with the exit code. */
export async function runMigrate(
  opts: GroupFlags & { status?: boolean; json?: boolean; instancesDir: string },
  launcher: LauncherEnvironment,
): Promise<number> {
  const envDir = resolveDir(opts.envDir);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const results = await migrateGroups(specs, { ...opts, launcher });
  process.stdout.write((opts.json ? JSON.stringify(results, null, 2) : formatMigrate(results, opts)) + '\n');
  return results.some((r) => r.error) ? 1 : 0;
}

/** Wires `vcon-launch migrate`. */
export function registerMigrate(program: Command): void {
  const cmd = program
    .command('migrate')
    .description("apply pending migrations to each group schema and (re)make each group's role, without starting servers")
    .option('--status', 'only say per group whether it is up to date or what is pending')
    .option('--json', 'print every group with its applied migrations (and when) and its pending ones, as JSON');
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: GroupFlags & { status?: boolean; json?: boolean; instancesDir: string }) => {
    process.exitCode = await runMigrate(opts, readLauncherEnvironment());
  });
}
