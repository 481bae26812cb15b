// Who each group's server connects as. By default the launcher makes every group its own
// least-privileged role (src/db/roles.ts) with the admin URL it was given, and only the launcher
// ever uses that URL. When the URL's user may not create roles, groups share its identity and the
// launcher says so.
//
// The admin connection only creates and realigns roles and gives each its schema; it never reads
// or runs anything in a group's schema. Each group's migrations run over the group role's own
// login, so whatever that role planted in its schema runs with the role's rights and no more.
import { createSql } from '../src/db/client.js';
import { migrate } from '../src/db/migrate.js';
import { isDatabaseUnavailable } from '../src/domain/errors.js';
import { LockWaitError } from '../src/db/advisory-lock.js';
import {
  adminPowers,
  currentDatabase,
  DEFAULT_ANALYZE_LIMITS,
  groupRoleNames,
  openAdmin,
  otherGroupSchemas,
  provisionGroupRoles,
  roleExists,
  RoleConflictError,
  schemaNameConflict,
  databaseOfUrl,
  userOfUrl,
  withCredentials,
  type AdminPowers,
} from '../src/db/roles.js';
import { ensureExtensions } from '../src/db/migrate.js';
import { newPassword, type CredentialStore, type GroupCredentials } from './credentials.js';
import type { Databases } from './database.js';
import type { LauncherEnvironment } from './environment.js';
import { UserError } from './errors.js';
import type { GroupSpec } from './groups.js';
import { createNoteLog, note } from './output.js';

/** The launcher variable that lets groups share a superuser connection on a shared database. */
export const ALLOW_SHARED_SUPERUSER = 'VCON_LAUNCH_ALLOW_SHARED_SUPERUSER';
/** The launcher variable that turns per-group roles off (`off`). */
export const ROLES_VARIABLE = 'VCON_LAUNCH_ROLES';

export interface GroupIdentity {
  /** Variables the child gets over its env: the group's credentials, never the admin's. */
  env: Record<string, string>;
  /** The PostgreSQL user the group's server connects as. */
  role: string;
  /** role: its own least-privileged role; shared: the URL's user, as every other group on it. */
  isolation: 'role' | 'shared';
  /** Migrations applied while preparing (as the group's role); undefined when the launcher did not migrate. */
  applied?: string[];
}

/** Why a group cannot have its own role, or undefined when it can. */
function whyShared(spec: GroupSpec, powers: AdminPowers, launcher: Pick<LauncherEnvironment, 'roles'>): string | undefined {
  if (!launcher.roles) return `${ROLES_VARIABLE}=off`;
  if (spec.config.db.schema === 'public') return 'its schema is public, which cannot belong to one group';
  if (!powers.createRole) return `${powers.user} may not create roles`;
  return undefined;
}

/** The group's role names on the database its URL names (before any connection). */
export function groupRoleNamesOf(spec: GroupSpec, url: string) {
  return groupRoleNames(databaseOfUrl(url), spec.config.db.schema);
}

/** Migrates a group's schema over the given URL (the group's own role's login). */
export async function migrateAs(url: string, spec: GroupSpec, purpose: string): Promise<string[]> {
  const sql = createSql({ url, schema: spec.config.db.schema, max: 1, applicationName: `vcon-launch-${purpose}-${spec.name}`.slice(0, 60) });
  try {
    return (await migrate(sql, spec.config.db.schema, { log: createNoteLog(false) })).applied;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The URL with `password` when it names none (what postgres.js does with PGPASSWORD); as it is otherwise. */
export function withPassword(url: string, password: string | undefined): string {
  if (!password) return url;
  try {
    const u = new URL(url);
    if (u.password) return url;
    u.password = encodeURIComponent(password);
    return u.toString();
  } catch {
    return url;
  }
}

/** Refuses a schema named like a role on the server (see schemaNameConflict). */
export async function refuseRoleNamedSchema(admin: Parameters<typeof roleExists>[0], spec: GroupSpec, powers: AdminPowers): Promise<void> {
  const schema = spec.config.db.schema;
  const why =
    schemaNameConflict(schema, powers.user) ?? ((await roleExists(admin, schema)) ? 'a role of that name exists on this server' : undefined);
  if (why) {
    throw new UserError(
      `group ${spec.name}: schema ${schema} cannot hold a group: ${why}, and a schema named like a role is "$user" on that role's default search_path; set SUPABASE_DB_SCHEMA to another name`,
    );
  }
}

/**
 * Gives each group its roles (creating or realigning them over the admin connection, passwords
 * from the store) and migrates its schema as that role, or decides it shares the URL's identity.
 * Refuses a superuser shared with other groups unless the operator opted in.
 */
export async function prepareIdentities(
  specs: GroupSpec[],
  databases: Databases,
  opts: {
    store: CredentialStore;
    launcher: Pick<LauncherEnvironment, 'roles' | 'allowSharedSuperuser'> & Partial<Pick<LauncherEnvironment, 'pgPassword' | 'lockWaitMs'>>;
    detach?: boolean;
    rotate?: boolean;
    quiet?: boolean;
    /** The analyze role's connection limit, from the connection budget (analyzeLimitsOf, or start's plan). */
    analyzeConnectionsOf: (spec: GroupSpec) => number;
  },
): Promise<Map<string, GroupIdentity>> {
  const out = new Map<string, GroupIdentity>();
  const ready = (spec: GroupSpec, identity: GroupIdentity) => out.set(spec.name, identity);
  // A few groups at a time: migrations of different schemas run side by side (fifty groups one
  // after another took ~8 s, four at a time ~6 s on a loaded machine); role changes still queue on
  // provisioning's advisory lock. Start spawns children only after every role: children loading
  // their modules meanwhile starved the provisioning (fifty groups: 27 s against 18 s).
  await forEachBounded(specs, PREPARE_CONCURRENCY, async (spec) => {
    const schema = spec.config.db.schema;
    const adminUrl = databases.urlOf(spec);
    if (userOfUrl(adminUrl) === `vcon_${schema}`) {
      throw new UserError(
        `group ${spec.name} connects as vcon_${schema}, the role name an older vcon-launch gave it; the launcher now names it ${groupRoleNamesOf(spec, adminUrl).role}: ` +
          `run vcon-launch provision --group ${spec.name} --admin-url postgres://ADMIN@HOST/DB (a role that may create roles) to give the group its new role`,
      );
    }
    // `vcon-launch provision` already put the group's own role in its env file.
    if (userOfUrl(adminUrl) === groupRoleNamesOf(spec, adminUrl).role) {
      ready(spec, { env: { DATABASE_URL: adminUrl }, role: userOfUrl(adminUrl), isolation: 'role' });
      return;
    }
    const admin = openAdmin(adminUrl);
    try {
      const powers = await adminPowers(admin);
      await refuseRoleNamedSchema(admin, spec, powers);
      const why = whyShared(spec, powers, opts.launcher);
      if (why) {
        if (powers.superuser && !opts.launcher.allowSharedSuperuser) {
          // Groups started together count too: neither has a schema yet when both are checked.
          const together = specs.filter((s) => s.databaseKey === spec.databaseKey && s.config.db.schema !== schema).map((s) => s.config.db.schema);
          const others = [...new Set([...(await otherGroupSchemas(admin, schema)), ...together])].sort();
          if (others.length) {
            throw new UserError(
              `group ${spec.name} would connect as superuser ${powers.user} to a database other groups use (schemas ${others.join(', ')}): ` +
                `any query of one group could then read every group. Let the launcher give each group its own role (unset ${ROLES_VARIABLE}), ` +
                `or accept the risk with ${ALLOW_SHARED_SUPERUSER}=yes`,
            );
          }
        }
        if (!opts.quiet) {
          note(
            `group ${spec.name} connects as ${powers.user} (${why}): groups on this database share one identity, and isolation rests on the application only`,
          );
        }
        // The launcher's PGPASSWORD reaches the group inside its URL (a secret), not as a variable of its own.
        ready(spec, { env: { DATABASE_URL: withPassword(adminUrl, opts.launcher.pgPassword) }, role: powers.user, isolation: 'shared' });
        return;
      }
      const names = groupRoleNames(await currentDatabase(admin), schema);
      let creds = opts.store.get(spec.name);
      if (!creds || creds.schema !== schema || creds.role !== names.role || creds.analyze_role !== names.analyzeRole || opts.rotate) {
        creds = {
          schema,
          role: names.role,
          password: newPassword(),
          analyze_role: names.analyzeRole,
          analyze_password: newPassword(),
        } satisfies GroupCredentials;
      }
      // The shared extensions are the admin's (the group roles may not create them).
      await ensureExtensions(admin, createNoteLog(false));
      // Stored before PostgreSQL learns it: a crash in between leaves a password we still know.
      opts.store.save(spec.name, creds);
      const outcome = await provisionGroupRoles(admin, {
        lockWaitMs: opts.launcher.lockWaitMs,
        schema,
        role: creds.role,
        password: creds.password,
        analyze: {
          role: creds.analyze_role,
          password: creds.analyze_password,
          limits: { ...DEFAULT_ANALYZE_LIMITS, connections: opts.analyzeConnectionsOf(spec) },
        },
        // The embedded database is the launcher's alone: no other application's roles to break.
        hardenPublic: databases.isEmbedded(spec),
      });
      if (!outcome.tempFileLimit && !opts.quiet)
        note(`group ${spec.name}: ${powers.user} is not a superuser, so analyze runs without temp_file_limit`);
      const roleUrl = withCredentials(adminUrl, creds.role, creds.password);
      // As the role itself, never the admin: the schema and all in it are the group's to shape.
      const applied = await migrateAs(roleUrl, spec, 'migrate');
      const env: Record<string, string> = { ANALYZE_DATABASE_USER: creds.analyze_role, ANALYZE_DATABASE_PASSWORD: creds.analyze_password };
      // A detached child joins the embedded cluster itself (its port is known only then).
      if (databases.isEmbedded(spec) && opts.detach) Object.assign(env, { DATABASE_USER: creds.role, DATABASE_PASSWORD: creds.password });
      else env.DATABASE_URL = roleUrl;
      ready(spec, { env, role: creds.role, isolation: 'role', applied });
    } catch (err) {
      const e = err as Error & { code?: string };
      if (isDatabaseUnavailable(e)) throw new UserError(`group ${spec.name}: cannot reach its database ${spec.databaseLabel}: ${e.message}`);
      if (e.code === '42501') throw new UserError(`group ${spec.name}: the database URL's user may not create roles or change owners (${e.message})`);
      if (e instanceof RoleConflictError || e instanceof LockWaitError) throw new UserError(`group ${spec.name}: ${e.message}`);
      throw err;
    } finally {
      await admin.end({ timeout: 5 });
    }
  });
  return out;
}

/** Groups prepared at once: each holds two connections (admin, migration) out of the reserve. */
export const PREPARE_CONCURRENCY = 4;

/**
 * Runs fn over items, at most `limit` at a time. After a failure nothing new starts; the ones
 * under way finish, then the error of the earliest failed item is thrown.
 */
export async function forEachBounded<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  // The failure reported is the one of the earliest item, so the message names the first group in
  // the order given whichever worker failed first (items already running are let finish).
  const failures: { index: number; err: unknown }[] = [];
  const worker = async () => {
    while (failures.length === 0 && next < items.length) {
      const index = next++;
      try {
        await fn(items[index]);
      } catch (err) {
        failures.push({ index, err });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failures.length > 0) throw failures.reduce((a, b) => (b.index < a.index ? b : a)).err;
}
