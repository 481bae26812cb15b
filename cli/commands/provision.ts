import path from 'node:path';
import type { Command } from 'commander';
import type { Sql } from '../../src/db/client.js';
import { LockWaitError } from '../../src/db/advisory-lock.js';
import { ensureExtensions } from '../../src/db/migrate.js';
import { analyzeLimitsOf } from '../budget.js';
import { createRegistry } from '../registry.js';
import {
  adminPowers,
  DEFAULT_ANALYZE_LIMITS,
  currentDatabase,
  groupRoleNames,
  openAdmin,
  provisionGroupRoles,
  publicSchemaGrants,
  RoleConflictError,
  userOfUrl,
  withCredentials,
} from '../../src/db/roles.js';
import { newPassword } from '../credentials.js';
import { readEnvFile, setEnvVariable } from '../env-files.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroups, resolveDir, selectGroupNames, SHARED_FILE, type GroupSpec } from '../groups.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { createNoteLog, formatTable, note } from '../output.js';
import { groupRoleNamesOf, migrateAs, refuseRoleNamedSchema } from '../roles.js';

/** Options of `vcon-launch provision`. */
export interface ProvisionOptions extends GroupFlags {
  /** Print the DATABASE_URL instead of writing it into the group's env file. */
  print?: boolean;
  /** A role that may create roles (otherwise the group's, shared.env's or the launcher's DATABASE_URL). */
  adminUrl?: string;
  /** New passwords even when the group already connects as its role. */
  rotate?: boolean;
  /** The registry: running groups keep the analyze connections their start was handed. */
  instancesDir?: string;
  /** Also revoke CREATE and USAGE on schema public from PUBLIC, database-wide (every role). */
  hardenPublic?: boolean;
}

/** What `provision` did for one group. */
export interface ProvisionResult {
  group: string;
  schema: string;
  role: string;
  /** created: new role; updated: the role existed and was brought back in line. */
  action: 'created' | 'updated';
  /** The group's DATABASE_URL for its own role (contains the password). */
  databaseUrl: string;
  /** The env file it was written to, or null with --print. */
  writtenTo: string | null;
  /** What PUBLIC held on schema public before (revoked with --harden-public, else left as it was). */
  publicGrants: ('CREATE' | 'USAGE')[];
  database: string;
}

/** Writes the group's own DATABASE_URL (and its analyze role) into its env file, mode 0600. */
export function writeGroupCredentials(file: string, url: string, analyze: { user: string; password: string }): void {
  const comment = 'The group role created by `vcon-launch provision`: it owns only this group schema.';
  setEnvVariable(file, 'DATABASE_URL', url, { comment, secret: true });
  setEnvVariable(file, 'ANALYZE_DATABASE_USER', analyze.user, {
    comment: 'The role POST /database/analyze connects as: SELECT on this schema only.',
    secret: true,
  });
  setEnvVariable(file, 'ANALYZE_DATABASE_PASSWORD', analyze.password, { secret: true });
}

/** The first URL that connects as someone other than the group role: it must create and alter roles. */
export function pickAdminUrl(spec: GroupSpec, role: string, opts: ProvisionOptions, launcher: LauncherEnvironment, envDir: string): string {
  const shared = readEnvFile(path.join(envDir, SHARED_FILE));
  const candidates = [opts.adminUrl, spec.databaseUrl, shared.DATABASE_URL?.trim(), launcher.databaseUrl].filter((u): u is string => Boolean(u));
  const admin = candidates.find((u) => userOfUrl(u) !== role);
  if (admin) return admin;
  if (!candidates.length) {
    throw new UserError(
      `group ${spec.name}: provision needs a PostgreSQL server with a fixed address (the embedded database's port changes at each start); set DATABASE_URL in ${spec.envFile} or env/shared.env`,
    );
  }
  throw new UserError(
    `group ${spec.name} already connects as its role ${role}; to provision again, pass --admin-url postgres://ADMIN@HOST/DB (a role that may create roles)`,
  );
}

/**
 * Gives the group its roles and its schema (and everything in it) over the admin connection, then
 * migrates the schema as the group's role: the admin runs nothing the schema holds.
 */
async function provisionOne(
  admin: Sql,
  adminUrl: string,
  spec: GroupSpec,
  passwords: { role: string; analyze: string },
  analyzeConnections: number,
  hardenPublic: boolean,
  lockWaitMs: number,
) {
  const schema = spec.config.db.schema;
  await refuseRoleNamedSchema(admin, spec, await adminPowers(admin));
  const database = await currentDatabase(admin);
  const names = groupRoleNames(database, schema);
  const publicGrants = await publicSchemaGrants(admin);
  await ensureExtensions(admin, createNoteLog(false));
  const { action } = await provisionGroupRoles(admin, {
    schema,
    role: names.role,
    password: passwords.role,
    analyze: { role: names.analyzeRole, password: passwords.analyze, limits: { ...DEFAULT_ANALYZE_LIMITS, connections: analyzeConnections } },
    hardenPublic,
    lockWaitMs,
  });
  const url = withCredentials(adminUrl, names.role, passwords.role);
  await migrateAs(url, spec, 'provision');
  return { action, role: names.role, url, analyze: { user: names.analyzeRole, password: passwords.analyze }, publicGrants, database };
}

/** Provisions every selected group; writes (or only returns) each group's DATABASE_URL. */
export async function provisionGroups(opts: ProvisionOptions, launcher: LauncherEnvironment): Promise<ProvisionResult[]> {
  const envDir = resolveDir(opts.envDir);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const results: ProvisionResult[] = [];
  const analyzeConnectionsOf = await analyzeLimitsOf(specs, { running: createRegistry(resolveDir(opts.instancesDir ?? 'instances')).list().live });
  for (const spec of specs) {
    const schema = spec.config.db.schema;
    if (schema === 'public') throw new UserError(`group ${spec.name} uses schema public, which cannot belong to one group; set SUPABASE_DB_SCHEMA`);
    const { role } = groupRoleNamesOf(spec, spec.databaseUrl ?? launcher.databaseUrl ?? '');
    const adminUrl = pickAdminUrl(spec, role, opts, launcher, envDir);
    // Keep the current passwords when the group already connects as its role: re-running changes nothing.
    const passwords = { role: newPassword(), analyze: newPassword() };
    if (!opts.rotate && spec.databaseUrl && userOfUrl(spec.databaseUrl) === role) {
      passwords.role = decodeURIComponent(new URL(spec.databaseUrl).password) || passwords.role;
      passwords.analyze = spec.env.ANALYZE_DATABASE_PASSWORD || passwords.analyze;
    }
    const admin = openAdmin(adminUrl);
    try {
      const {
        action,
        role: made,
        url,
        analyze,
        publicGrants,
        database,
      } = await provisionOne(admin, adminUrl, spec, passwords, analyzeConnectionsOf(spec), Boolean(opts.hardenPublic), launcher.lockWaitMs);
      if (!opts.print) writeGroupCredentials(spec.envFile, url, analyze);
      results.push({
        group: spec.name,
        schema,
        role: made,
        action,
        databaseUrl: url,
        writtenTo: opts.print ? null : spec.envFile,
        publicGrants,
        database,
      });
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e instanceof RoleConflictError || e instanceof LockWaitError) throw new UserError(`group ${spec.name}: ${e.message}`);
      if (e.code === '42501')
        throw new UserError(
          `group ${spec.name}: the admin connection may not create roles or change owners (${e.message}); use --admin-url with a superuser or CREATEROLE role`,
        );
      throw err;
    } finally {
      await admin.end({ timeout: 5 });
    }
  }
  return results;
}

/** Wires `vcon-launch provision`. */
export function registerProvision(program: Command): void {
  const cmd = program
    .command('provision')
    .description("create a PostgreSQL role per group that owns only its schema, and store its DATABASE_URL in the group's env file")
    .option('--print', "print the DATABASE_URL instead of writing it into the group's env file")
    .option('--admin-url <url>', 'connect as this role to create the group roles (default: the group DATABASE_URL)')
    .option('--harden-public', 'also revoke CREATE and USAGE on schema public from PUBLIC in the database (changes every role, not only the group)');
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: ProvisionOptions) => {
    const results = await provisionGroups(opts, readLauncherEnvironment());
    process.stdout.write(
      formatTable(
        ['GROUP', 'SCHEMA', 'ROLE', 'ROLE WAS', 'DATABASE_URL'],
        results.map((r) => [r.group, r.schema, r.role, r.action, r.writtenTo ? `written to ${r.writtenTo}` : r.databaseUrl]),
      ) + '\n',
    );
    note("changed only the groups' own roles and schemas; restart running groups to connect as their roles");
    for (const [database, grants] of new Map(results.map((r) => [r.database, r.publicGrants]))) {
      if (!grants.length) continue;
      const held = grants.join(' and ');
      if (opts.hardenPublic) note(`revoked ${held} on schema public from PUBLIC in database ${database} (every role of it)`);
      else
        note(
          `PUBLIC holds ${held} on schema public in database ${database}: every role, the group roles included, ` +
            `${grants.includes('CREATE') ? 'may create objects there and ' : ''}may use what others grant to PUBLIC there. Left as it is: ` +
            `it is every application's. To take it away (it changes every role of the database): rerun with --harden-public, ` +
            `or run: revoke create, usage on schema public from public;`,
        );
    }
  });
}
