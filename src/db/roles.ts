// Per-group PostgreSQL roles, created by the launcher over an admin connection: the group's role
// owns its schema and nothing else; its analyze role may only SELECT the group's tables. With
// them PostgreSQL itself keeps groups apart, whatever SQL reaches it.
//
// The admin connection never executes, reads or resolves anything a group's role owns or can
// create: its search_path is pg_catalog (then pg_temp) only and every name it uses is qualified;
// it reads only the system catalogs; its statements in a group's schema are catalog changes
// (create/alter owner/grant/revoke, default privileges) that run no code of the schema. The
// group's migrations run as the group's own role over its own login (cli/roles.ts).
import { createHash } from 'node:crypto';
import postgres from 'postgres';
import { lockForTransaction } from './advisory-lock.js';
import type { Sql } from './client.js';

/** The two roles of one group. */
export interface GroupRoleNames {
  /** Owns the group schema; what the group's server connects as. */
  role: string;
  /** SELECT on the group's tables only; what POST /database/analyze connects as. */
  analyzeRole: string;
}

const MAX_IDENT = 63;
/** Room for the schema in a role name: vcon_<schema>_<8 hex>_ro fits 63 characters. */
const SCHEMA_ROOM = MAX_IDENT - 'vcon_'.length - '_'.length - 8 - '_ro'.length;

/**
 * vcon_<schema>_<h> and vcon_<schema>_<h>_ro, h = 8 hex of sha256(database NUL schema), the schema
 * shortened to fit 63 characters (the hash covers the whole). Roles are per server: the hash keeps
 * one schema name on two databases apart, and a server role (ends in hex) never equals an analyze
 * role (ends in _ro), whatever the schemas are called.
 */
export function groupRoleNames(database: string, schema: string): GroupRoleNames {
  const h = createHash('sha256').update(`${database}\u0000${schema}`).digest('hex').slice(0, 8);
  const base = `vcon_${schema.slice(0, SCHEMA_ROOM)}_${h}`;
  return { role: base, analyzeRole: `${base}_ro` };
}

/** Names the launcher gives roles (a schema named like one is refused). */
export const LAUNCHER_ROLE_NAME = /^vcon_[a-z0-9_]*_[0-9a-f]{8}(_ro)?$/;

/** The marker COMMENT ON ROLE puts on each launcher role; provisioning alters only roles that carry the group's own. */
export function roleMarker(database: string, schema: string, kind: 'server' | 'analyze'): string {
  return `vcon-launch group role ${JSON.stringify({ database, schema, kind })}`;
}

/** The database a postgres URL names (postgres.js's default, the user's name, when it names none). */
export function databaseOfUrl(url: string): string {
  try {
    const u = new URL(url);
    return decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) || 'postgres';
  } catch {
    return '';
  }
}

/**
 * Why a schema name may not hold a group, or undefined: a name that is a role (`postgres`, the
 * admin user, a launcher role) is "$user" in the default search_path of whoever logs in as that
 * role, so objects its owner plants there would shadow built-ins for that role.
 */
export function schemaNameConflict(schema: string, adminUser?: string): string | undefined {
  if (schema === 'postgres' || schema === adminUser)
    return `it is the name of the database's ${schema === adminUser ? 'admin user' : 'default superuser'} role`;
  if (LAUNCHER_ROLE_NAME.test(schema)) return 'it looks like a role name vcon-launch gives its roles (vcon_<schema>_<8 hex>)';
  return undefined;
}

/** What the admin connection's user may do. */
export interface AdminPowers {
  user: string;
  superuser: boolean;
  /** May create roles (superuser or CREATEROLE). */
  createRole: boolean;
}

/** Limits of every analyze connection, set on the analyze role so the statement cannot lift them. */
export interface AnalyzeLimits {
  statementTimeoutMs: number;
  /** Largest temporary files one statement may write. */
  tempFileLimitKb: number;
  workMemKb: number;
  /** Concurrent analyze connections of one group. */
  connections: number;
}

export const DEFAULT_ANALYZE_LIMITS: AnalyzeLimits = { statementTimeoutMs: 10_000, tempFileLimitKb: 64 * 1024, workMemKb: 4 * 1024, connections: 4 };

/** The admin connection's search_path: built-ins only, the session's own temporary schema explicitly last. */
export const ADMIN_SEARCH_PATH = 'pg_catalog, pg_temp';

/**
 * The launcher's provisioning connection. Its search_path is pinned at login to pg_catalog and
 * pg_temp, so no schema a group controls (not even one named like the admin, which is "$user" in
 * the default path) can shadow a function, operator or table the admin's statements name.
 */
export function openAdmin(url: string): Sql {
  return postgres(url, {
    max: 1,
    onnotice: () => {},
    connect_timeout: 10,
    connection: { application_name: 'vcon-launch-admin', search_path: ADMIN_SEARCH_PATH },
  }) as unknown as Sql;
}

export async function adminPowers(admin: Sql): Promise<AdminPowers> {
  const [r] = await admin<{ user: string; superuser: boolean; createrole: boolean }[]>`
    select current_user as user, rolsuper as superuser, rolcreaterole as createrole from pg_catalog.pg_roles where rolname = current_user`;
  return { user: r.user, superuser: r.superuser, createRole: r.superuser || r.createrole };
}

/** The database the admin connection is on. */
export async function currentDatabase(admin: Sql): Promise<string> {
  const [r] = await admin<{ db: string }[]>`select pg_catalog.current_database() as db`;
  return r.db;
}

/** Whether a role exists (cluster-wide). */
export async function roleExists(admin: Sql, role: string): Promise<boolean> {
  const [r] = await admin`select 1 from pg_catalog.pg_roles where rolname = ${role}`;
  return Boolean(r);
}

/** A role that exists under a launcher name but is not this group's (its marker differs): never altered. */
export class RoleConflictError extends Error {
  override name = 'RoleConflictError';
}

/** The comment (marker) of each of the named roles that exist (of every role, without names). */
export async function roleMarkers(admin: Sql, roles?: string[]): Promise<Map<string, string | null>> {
  const rows = await admin<{ rolname: string; marker: string | null }[]>`
    select r.rolname, pg_catalog.shobj_description(r.oid, 'pg_authid') as marker
    from pg_catalog.pg_roles r ${roles ? admin`where r.rolname = any(${roles})` : admin``}`;
  return new Map(rows.map((r) => [r.rolname, r.marker]));
}

/**
 * Why the group's roles may not be provisioned here, or undefined: a role that exists under one
 * of its names without this group's marker belongs to someone else (another group, an operator).
 * `markers`: the comment of each existing role by name.
 */
export function describeRoleConflict(
  markers: Map<string, string | null>,
  database: string,
  schema: string,
  names: { role: string; analyzeRole?: string },
): string | undefined {
  const wanted = [[names.role, 'server'] as const, ...(names.analyzeRole ? [[names.analyzeRole, 'analyze'] as const] : [])];
  for (const [role, kind] of wanted) {
    if (!markers.has(role)) continue;
    const marker = markers.get(role);
    if (marker === roleMarker(database, schema, kind)) continue;
    return (
      `role ${role} already exists on this server and is not the ${kind} role vcon-launch made for schema ${schema} on database ${database} ` +
      `(its comment: ${marker ? JSON.stringify(marker) : 'none'}); the launcher never alters a role it did not make for this group: ` +
      'drop or rename that role, or give the group another schema'
    );
  }
  return undefined;
}

/**
 * The advisory lock every change of a database's shared catalog rows by the launcher takes
 * (provisioning, removal): one at a time per database.
 */
export const PROVISION_LOCK = 'vcon-launch:provision';

export interface ProvisionInput {
  schema: string;
  role: string;
  password: string;
  /** The analyze role; omitted, none is made. */
  analyze?: { role: string; password: string; limits?: AnalyzeLimits };
  /**
   * Also revoke CREATE and USAGE on schema public from PUBLIC: a database-wide change that reaches
   * every role, other applications' included, so only on request (or on the launcher's own
   * embedded database). Without it nothing outside the group's own roles and schema changes.
   */
  hardenPublic?: boolean;
  /** How long to wait for the provisioning lock (VCON_LAUNCH_LOCK_WAIT_MS); the lock's default otherwise. */
  lockWaitMs?: number;
}

export interface ProvisionOutcome {
  /** created: the group role is new; updated: it existed and was brought back in line. */
  action: 'created' | 'updated';
  /** Whether temp_file_limit could be set on the analyze role (it needs a superuser). */
  tempFileLimit: boolean;
}

/**
 * Creates or realigns a group's roles and gives the role its schema: creates the schema (owned by
 * the role) when it is missing; an existing one (migrated by an older launcher as the admin) and
 * everything in it that someone else owns is given to the role, judged by kind and owner from the
 * catalog alone. Refuses (RoleConflictError) when a role of that name exists without this group's
 * marker. Idempotent; passwords are set to the given ones. Runs nothing the schema holds: migrate
 * it afterwards as the role.
 */
export async function provisionGroupRoles(admin: Sql, input: ProvisionInput): Promise<ProvisionOutcome> {
  const { schema, role, password } = input;
  const limits = input.analyze?.limits ?? DEFAULT_ANALYZE_LIMITS;
  let action: ProvisionOutcome['action'] = 'updated';
  let tempFileLimit = false;
  await admin.begin(async (tx) => {
    // One provisioning at a time per database: every run changes the same catalog rows (the
    // database's and schema public's ACLs), and concurrent GRANT/REVOKE on them fail with
    // "tuple concurrently updated".
    await lockForTransaction(tx, PROVISION_LOCK, input.lockWaitMs);
    const database = await currentDatabase(tx as unknown as Sql);
    const names = { role, analyzeRole: input.analyze?.role };
    const markers = await roleMarkers(tx as unknown as Sql, [role, ...(names.analyzeRole ? [names.analyzeRole] : [])]);
    const conflict = describeRoleConflict(markers, database, schema, names);
    if (conflict) throw new RoleConflictError(conflict);
    if (!(await roleExists(tx as unknown as Sql, role))) action = 'created';
    // Utility statements take no bind parameters: the values travel as settings and are quoted by
    // format() (%I identifiers, %L literals) inside the server.
    await tx`select pg_catalog.set_config('vcon.role', ${role}, true), pg_catalog.set_config('vcon.password', ${password}, true),
                    pg_catalog.set_config('vcon.schema', ${schema}, true),
                    pg_catalog.set_config('vcon.marker', ${roleMarker(database, schema, 'server')}, true),
                    pg_catalog.set_config('vcon.analyze_role', ${input.analyze?.role ?? ''}, true),
                    pg_catalog.set_config('vcon.analyze_password', ${input.analyze?.password ?? ''}, true),
                    pg_catalog.set_config('vcon.analyze_marker', ${roleMarker(database, schema, 'analyze')}, true),
                    pg_catalog.set_config('vcon.analyze_connections', ${String(limits.connections)}, true),
                    pg_catalog.set_config('vcon.harden_public', ${input.hardenPublic ? 'on' : 'off'}, true)`;
    // Every statement below is a catalog change: none reads a table, calls a function or builds an
    // index of the group's schema, and names resolve in pg_catalog only (openAdmin's search_path).
    await tx`
      do $$
      declare
        r text := pg_catalog.current_setting('vcon.role');
        s text := pg_catalog.current_setting('vcon.schema');
        a text := pg_catalog.current_setting('vcon.analyze_role');
        super boolean := (select rolsuper from pg_catalog.pg_roles where rolname = current_user);
        roid oid;
        nsp oid;
        o record;
      begin
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
          execute pg_catalog.format('create role %I login password %L', r, pg_catalog.current_setting('vcon.password'));
        else
          execute pg_catalog.format('alter role %I login password %L', r, pg_catalog.current_setting('vcon.password'));
        end if;
        execute pg_catalog.format('comment on role %I is %L', r, pg_catalog.current_setting('vcon.marker'));
        execute pg_catalog.format('alter role %I nosuperuser nocreatedb nocreaterole noinherit nobypassrls noreplication', r);
        -- A CREATEROLE admin (not superuser) may only give objects to roles it belongs to.
        if not super then
          execute pg_catalog.format('grant %I to current_user', r);
        end if;
        select oid into roid from pg_catalog.pg_roles where rolname = r;
        select oid into nsp from pg_catalog.pg_namespace where nspname = s;
        if nsp is null then
          execute pg_catalog.format('create schema %I authorization %I', s, r);
        else
          -- A schema migrated by an older launcher as the admin: what someone else owns moves to the
          -- role. ALTER ... OWNER runs none of the object's code; what the role owns is left alone.
          if (select nspowner from pg_catalog.pg_namespace where oid = nsp) <> roid then
            execute pg_catalog.format('alter schema %I owner to %I', s, r);
          end if;
          for o in
            select c.relname, c.relkind from pg_catalog.pg_class c
            where c.relnamespace = nsp and c.relowner <> roid and c.relkind in ('r', 'p', 'v', 'm', 'f', 'S', 'c')
              and not exists (select 1 from pg_catalog.pg_depend d
                              where d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.objid = c.oid and d.deptype in ('a', 'i'))
          loop
            execute pg_catalog.format('alter %s %I.%I owner to %I',
              case o.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table'
                when 'S' then 'sequence' when 'c' then 'type' else 'table' end, s, o.relname, r);
          end loop;
          -- regprocedure prints the name schema-qualified (the schema is not on this search_path).
          for o in select p.oid::pg_catalog.regprocedure as sig from pg_catalog.pg_proc p where p.pronamespace = nsp and p.proowner <> roid loop
            execute pg_catalog.format('alter routine %s owner to %I', o.sig, r);
          end loop;
          for o in select t.typname from pg_catalog.pg_type t
                   where t.typnamespace = nsp and t.typowner <> roid and t.typtype in ('e', 'd', 'r', 'm') loop
            execute pg_catalog.format('alter type %I.%I owner to %I', s, o.typname, r);
          end loop;
        end if;
        -- CONNECT only: the server's migration runner creates nothing that already exists, so a
        -- group role needs no CREATE on the database (and so can't make new schemas).
        execute pg_catalog.format('grant connect on database %I to %I', pg_catalog.current_database(), r);
        execute pg_catalog.format('revoke create on database %I from %I', pg_catalog.current_database(), r);
        -- public: no objects of ours live there, and a group must not share a namespace with others.
        execute pg_catalog.format('revoke all on schema public from %I', r);
        if pg_catalog.current_setting('vcon.harden_public') = 'on' then
          revoke create, usage on schema public from public;
        end if;
        execute pg_catalog.format('alter role %I set search_path to %I, extensions', r, s);

        if a <> '' then
          if not exists (select 1 from pg_catalog.pg_roles where rolname = a) then
            execute pg_catalog.format('create role %I login password %L', a, pg_catalog.current_setting('vcon.analyze_password'));
          else
            execute pg_catalog.format('alter role %I login password %L', a, pg_catalog.current_setting('vcon.analyze_password'));
          end if;
          execute pg_catalog.format('comment on role %I is %L', a, pg_catalog.current_setting('vcon.analyze_marker'));
          execute pg_catalog.format('alter role %I nosuperuser nocreatedb nocreaterole noinherit nobypassrls noreplication connection limit %s',
            a, pg_catalog.current_setting('vcon.analyze_connections')::int);
          if not super then
            execute pg_catalog.format('grant %I to current_user', a);
          end if;
          execute pg_catalog.format('grant connect on database %I to %I', pg_catalog.current_database(), a);
          execute pg_catalog.format('revoke create, temporary on database %I from %I', pg_catalog.current_database(), a);
          execute pg_catalog.format('revoke all on schema public from %I', a);
          -- Read-only on the group's own tables, and nothing else the grant system controls; tables
          -- the role's migrations create later get SELECT through its default privileges.
          execute pg_catalog.format('revoke all on all tables in schema %I from %I', s, a);
          execute pg_catalog.format('revoke all on all sequences in schema %I from %I', s, a);
          execute pg_catalog.format('revoke all on all functions in schema %I from %I', s, a);
          execute pg_catalog.format('grant usage on schema %I to %I', s, a);
          execute pg_catalog.format('grant select on all tables in schema %I to %I', s, a);
          -- Except the webhook tables: they hold the URLs as written, secrets included (0006).
          if pg_catalog.to_regclass(pg_catalog.format('%I.webhook_endpoint', s)) is not null then
            execute pg_catalog.format('revoke all on table %I.webhook_endpoint, %I.webhook_delivery from %I', s, s, a);
          end if;
          execute pg_catalog.format('alter default privileges for role %I in schema %I grant select on tables to %I', r, s, a);
          execute pg_catalog.format('alter role %I set search_path to %I, extensions', a, s);
          execute pg_catalog.format('alter role %I set default_transaction_read_only to on', a);
        end if;
      end $$`;
    if (input.analyze) {
      const a = input.analyze.role;
      // Role-level settings apply at login, before the statement could change them; ALTER ROLE
      // SET takes no parameters, so the values are integers we format ourselves.
      const q = quoteIdent(a);
      await tx.unsafe(`alter role ${q} set statement_timeout to ${Math.trunc(limits.statementTimeoutMs)}`);
      await tx.unsafe(`alter role ${q} set lock_timeout to ${Math.min(Math.trunc(limits.statementTimeoutMs), 1000)}`);
      await tx.unsafe(`alter role ${q} set idle_in_transaction_session_timeout to ${Math.trunc(limits.statementTimeoutMs * 2)}`);
      await tx.unsafe(`alter role ${q} set work_mem to '${Math.trunc(limits.workMemKb)}kB'`);
      // temp_file_limit is a superuser setting: a CREATEROLE admin cannot put it on a role.
      await tx.unsafe('savepoint temp_file_limit');
      try {
        await tx.unsafe(`alter role ${q} set temp_file_limit to '${Math.trunc(limits.tempFileLimitKb)}kB'`);
        tempFileLimit = true;
      } catch (err) {
        if ((err as { code?: string }).code !== '42501') throw err;
        await tx.unsafe('rollback to savepoint temp_file_limit');
      }
    }
  });
  return { action, tempFileLimit };
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Changes a role's password (rotation). */
export async function setRolePassword(admin: Sql, role: string, password: string): Promise<void> {
  await admin.begin(async (tx) => {
    await tx`select pg_catalog.set_config('vcon.role', ${role}, true), pg_catalog.set_config('vcon.password', ${password}, true)`;
    await tx`do $$ begin execute pg_catalog.format('alter role %I password %L', pg_catalog.current_setting('vcon.role'), pg_catalog.current_setting('vcon.password')); end $$`;
  });
}

/**
 * Drops a group's roles (those carrying its marker) and everything they own in this database
 * (teardown of tests and groups).
 */
export async function dropGroupRoles(admin: Sql, schema: string): Promise<void> {
  await removeGroupObjects(admin, schema, { schema: false });
}

/**
 * Drops a group for good in ONE transaction: its schema with everything in it (unless
 * `schema: false`), then its roles (those carrying this group's marker) with their grants. Any
 * refusal (a role still holding rights elsewhere, an admin that may not drop them) rolls all of it
 * back: nothing changed. Returns what was dropped.
 */
export async function removeGroupObjects(
  admin: Sql,
  schema: string,
  opts: { schema?: boolean; lockWaitMs?: number } = {},
): Promise<{ schema: boolean; roles: string[] }> {
  return admin.begin(async (tx) => {
    // DROP OWNED rewrites the same shared ACL rows as provisioning: serialise on its lock, or a
    // concurrent provision (or drop) fails with 'tuple concurrently updated'.
    await lockForTransaction(tx, PROVISION_LOCK, opts.lockWaitMs);
    const database = await currentDatabase(tx as unknown as Sql);
    let droppedSchema = false;
    if (opts.schema !== false) {
      const [found] = await tx<{ n: number }[]>`select count(*)::int as n from pg_catalog.pg_namespace where nspname = ${schema}`;
      if (found.n) {
        await tx.unsafe(`drop schema ${quoteIdent(schema)} cascade`);
        droppedSchema = true;
      }
    }
    const { role, analyzeRole } = groupRoleNames(database, schema);
    const markers = await roleMarkers(tx as unknown as Sql, [role, analyzeRole]);
    const roles: string[] = [];
    for (const [r, kind] of [
      [analyzeRole, 'analyze'],
      [role, 'server'],
    ] as const) {
      if (markers.get(r) !== roleMarker(database, schema, kind)) continue;
      await tx.unsafe(`drop owned by ${quoteIdent(r)} cascade`);
      await tx.unsafe(`drop role ${quoteIdent(r)}`);
      roles.push(r);
    }
    return { schema: droppedSchema, roles };
  });
}

/** A URL with its user and password replaced (the group's credentials on the admin's server). */
export function withCredentials(url: string, user: string | undefined, password: string | undefined): string {
  if (!user) return url;
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = password ? encodeURIComponent(password) : '';
  return u.toString();
}

/** The user a postgres URL connects as (postgres.js's default when it names none). */
export function userOfUrl(url: string): string {
  try {
    return decodeURIComponent(new URL(url).username) || 'postgres';
  } catch {
    return '';
  }
}

/** Other schemas of this database that hold a group (a migrated vcon-launch schema). */
export async function otherGroupSchemas(admin: Sql, schema: string): Promise<string[]> {
  const rows = await admin<{ s: string }[]>`
    select schemaname as s from pg_catalog.pg_tables where tablename = 'schema_migrations' and schemaname <> ${schema} order by 1`;
  return rows.map((r) => r.s);
}

/**
 * What PUBLIC (every role, group roles included) holds on schema public of the connected
 * database: CREATE lets any role put objects there, USAGE lets it use what others grant to PUBLIC.
 */
export async function publicSchemaGrants(admin: Sql): Promise<('CREATE' | 'USAGE')[]> {
  const rows = await admin<{ privilege_type: 'CREATE' | 'USAGE' }[]>`
    select a.privilege_type from pg_catalog.pg_namespace n,
      pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
    where n.nspname = 'public' and a.grantee = 0 order by a.privilege_type`;
  return rows.map((r) => r.privilege_type);
}

/** Databases on which PUBLIC (every role, so every group's) holds CONNECT or TEMPORARY, with the privileges held. */
export async function publicDatabaseGrants(admin: Sql): Promise<{ database: string; privileges: string[] }[]> {
  const rows = await admin<{ database: string; privileges: string[] }[]>`
    select d.datname as database,
           pg_catalog.array_agg(distinct a.privilege_type order by a.privilege_type) as privileges
    from pg_catalog.pg_database d
    cross join lateral pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
    where a.grantee = 0 and a.privilege_type in ('CONNECT', 'TEMPORARY') and d.datallowconn
    group by d.datname order by d.datname`;
  return rows;
}

/**
 * What is wrong with who this pool is, or undefined: its names must resolve in the configured
 * schema (behind PgBouncer the role's search_path pins it), and its user must own that schema (or
 * be a superuser). Otherwise the role was changed under the running instance (another group's role,
 * a search_path pointing elsewhere) and serving would read or write someone else's data.
 */
export async function schemaIdentityProblem(sql: Sql, schema: string): Promise<string | undefined> {
  const [r] = await sql<{ user: string; current_schema: string | null; owns: boolean }[]>`
    select current_user as user, pg_catalog.current_schema() as current_schema,
           coalesce((select n.nspowner = u.oid or u.rolsuper from pg_catalog.pg_namespace n, pg_catalog.pg_roles u
                     where n.nspname = ${schema} and u.rolname = current_user), false) as owns`;
  if (r.current_schema !== schema) {
    return `this instance's connections resolve names in schema ${r.current_schema ?? '(none)'}, not in its own schema ${schema}: role ${r.user}'s search_path no longer pins it`;
  }
  if (!r.owns) return `role ${r.user} does not own this instance's schema ${schema}`;
  return undefined;
}
