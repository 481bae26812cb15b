import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Command } from 'commander';
import postgres from 'postgres';
import { parse as parseDotenv } from 'dotenv';
import { createSql, type Sql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroups, resolveDir, selectGroupNames, SHARED_FILE, type GroupSpec } from '../groups.js';
import { addGroupFlags, type GroupFlags } from '../options.js';
import { createNoteLog, formatTable, note } from '../output.js';

/** Options of `vcon-launch provision`. */
export interface ProvisionOptions extends GroupFlags {
  /** Print the DATABASE_URL instead of writing it into the group's env file. */
  print?: boolean;
  /** A role that may create roles (otherwise the group's, shared.env's or the launcher's DATABASE_URL). */
  adminUrl?: string;
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
}

/** The role of a group: vcon_<schema>. */
export const roleNameOf = (schema: string) => `vcon_${schema}`;

const userOf = (url: string) => {
  try {
    return decodeURIComponent(new URL(url).username) || 'postgres';
  } catch {
    return '';
  }
};

/** Replaces (or appends) DATABASE_URL in an env file, keeping every other line and comment. */
export function writeDatabaseUrl(file: string, url: string): void {
  const lines = readFileSync(file, 'utf8').split('\n');
  const out: string[] = [];
  let done = false;
  for (const line of lines) {
    if (/^\s*(export\s+)?DATABASE_URL\s*=/.test(line)) {
      if (!done) out.push(`DATABASE_URL=${url}`);
      done = true;
    } else out.push(line);
  }
  if (!done) {
    if (out.length && out[out.length - 1] === '') out.pop();
    out.push('# The group role created by `vcon-launch provision`: it owns only this group schema.', `DATABASE_URL=${url}`, '');
  }
  writeFileSync(file, out.join('\n'));
  // The file now holds a password.
  chmodSync(file, 0o600);
}

/** The first URL that connects as someone other than the group role: it must create and alter roles. */
function pickAdminUrl(spec: GroupSpec, role: string, opts: ProvisionOptions, launcher: LauncherEnvironment, envDir: string): string {
  const sharedFile = path.join(envDir, SHARED_FILE);
  const shared = existsSync(sharedFile) ? parseDotenv(readFileSync(sharedFile, 'utf8')) : {};
  const candidates = [opts.adminUrl, spec.databaseUrl, shared.DATABASE_URL?.trim(), launcher.databaseUrl].filter((u): u is string => Boolean(u));
  const admin = candidates.find((u) => userOf(u) !== role);
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
 * Creates the group's role (LOGIN, random password) owning the group schema and everything in it,
 * with its search_path set on the role (pooler-proof) and no way into public or other groups.
 */
async function provisionOne(admin: Sql, adminUrl: string, spec: GroupSpec, password: string): Promise<{ action: 'created' | 'updated'; url: string }> {
  const schema = spec.config.db.schema;
  const role = roleNameOf(schema);
  // Migrate first as the admin, so the objects exist; ownership moves to the role below.
  const pinned = createSql({ url: adminUrl, schema, max: 1, applicationName: `vcon-launch-provision-${spec.name}`.slice(0, 60) });
  try {
    await migrate(pinned, schema, { log: createNoteLog(false) });
  } finally {
    await pinned.end({ timeout: 5 });
  }
  let action: 'created' | 'updated' = 'updated';
  await admin.begin(async (tx) => {
    // One provisioning at a time per database: every run changes the same catalog rows (the
    // database's and schema public's ACLs), and concurrent GRANT/REVOKE on them fail with
    // "tuple concurrently updated".
    await tx`select pg_advisory_xact_lock(hashtext('vcon-launch:provision'))`;
    const [exists] = await tx`select 1 from pg_roles where rolname = ${role}`;
    if (!exists) action = 'created';
    // Utility statements take no bind parameters: the values travel as settings and are quoted by
    // format() (%I identifiers, %L literals) inside the server.
    await tx`select set_config('vcon.role', ${role}, true), set_config('vcon.password', ${password}, true), set_config('vcon.schema', ${schema}, true)`;
    await tx`
      do $$
      declare
        r text := current_setting('vcon.role');
        s text := current_setting('vcon.schema');
        o record;
      begin
        if not exists (select 1 from pg_roles where rolname = r) then
          execute format('create role %I login password %L', r, current_setting('vcon.password'));
        else
          execute format('alter role %I login password %L', r, current_setting('vcon.password'));
        end if;
        execute format('alter role %I nosuperuser nocreatedb nocreaterole noinherit nobypassrls', r);
        execute format('alter schema %I owner to %I', s, r);
        for o in
          select c.relname, c.relkind from pg_class c
          where c.relnamespace = s::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S', 'c')
            and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i'))
        loop
          execute format('alter %s %I.%I owner to %I',
            case o.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table'
              when 'S' then 'sequence' when 'c' then 'type' else 'table' end, s, o.relname, r);
        end loop;
        for o in select p.oid::regprocedure as sig from pg_proc p where p.pronamespace = s::regnamespace loop
          execute format('alter routine %s owner to %I', o.sig, r);
        end loop;
        for o in select t.typname from pg_type t where t.typnamespace = s::regnamespace and t.typtype in ('e', 'd', 'r', 'm') loop
          execute format('alter type %I.%I owner to %I', s, o.typname, r);
        end loop;
        -- CONNECT only: the server's migration runner creates nothing that already exists, so a
        -- group role needs no CREATE on the database (and so can't make new schemas).
        execute format('grant connect on database %I to %I', current_database(), r);
        execute format('revoke create on database %I from %I', current_database(), r);
        -- public: no objects of ours live there, and a group must not share a namespace with others.
        execute format('revoke all on schema public from %I', r);
        revoke create, usage on schema public from public;
        execute format('alter role %I set search_path to %I, extensions', r, s);
      end $$`;
  });
  const u = new URL(adminUrl);
  u.username = role;
  u.password = password;
  return { action, url: u.toString() };
}

/** Provisions every selected group; writes (or only returns) each group's DATABASE_URL. */
export async function provisionGroups(opts: ProvisionOptions, launcher: LauncherEnvironment): Promise<ProvisionResult[]> {
  const envDir = resolveDir(opts.envDir);
  const specs = loadGroups(selectGroupNames(opts, envDir), envDir, launcher);
  const results: ProvisionResult[] = [];
  for (const spec of specs) {
    const schema = spec.config.db.schema;
    const role = roleNameOf(schema);
    if (schema === 'public') throw new UserError(`group ${spec.name} uses schema public, which cannot belong to one group; set SUPABASE_DB_SCHEMA`);
    if (role.length > 63) throw new UserError(`group ${spec.name}: role name ${role} is longer than PostgreSQL's 63 characters; use a shorter schema name`);
    const adminUrl = pickAdminUrl(spec, role, opts, launcher, envDir);
    // Keep the current password when the group already connects as its role: re-running changes nothing.
    let password = randomBytes(24).toString('hex');
    if (spec.databaseUrl && userOf(spec.databaseUrl) === role) {
      const current = decodeURIComponent(new URL(spec.databaseUrl).password);
      if (current) password = current;
    }
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 }) as unknown as Sql;
    try {
      const { action, url } = await provisionOne(admin, adminUrl, spec, password);
      if (!opts.print) writeDatabaseUrl(spec.envFile, url);
      results.push({ group: spec.name, schema, role, action, databaseUrl: url, writtenTo: opts.print ? null : spec.envFile });
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.code === '42501') throw new UserError(`group ${spec.name}: the admin connection may not create roles or change owners (${e.message}); use --admin-url with a superuser or CREATEROLE role`);
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
    .option('--admin-url <url>', 'connect as this role to create the group roles (default: the group DATABASE_URL)');
  addGroupFlags(cmd);
  cmd.action(async (opts: ProvisionOptions) => {
    const results = await provisionGroups(opts, readLauncherEnvironment());
    process.stdout.write(
      formatTable(
        ['GROUP', 'SCHEMA', 'ROLE', 'ROLE WAS', 'DATABASE_URL'],
        results.map((r) => [r.group, r.schema, r.role, r.action, r.writtenTo ? `written to ${r.writtenTo}` : r.databaseUrl]),
      ) + '\n',
    );
    note('revoked CREATE and USAGE on schema public from PUBLIC in this database; restart running groups to connect as their roles');
  });
}
