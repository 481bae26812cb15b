// Per-group PostgreSQL roles, created by the launcher over an admin connection: the group's role
// owns its schema and nothing else; its analyze role may only SELECT the group's tables. With
// them PostgreSQL itself keeps groups apart, whatever SQL reaches it.
import { createHash } from 'node:crypto';
import postgres from 'postgres';
import type { Sql } from './client.js';

/** The two roles of one group. */
export interface GroupRoleNames {
  /** Owns the group schema; what the group's server connects as. */
  role: string;
  /** SELECT on the group's tables only; what POST /database/analyze connects as. */
  analyzeRole: string;
}

const MAX_IDENT = 63;

/** vcon_<schema> and vcon_<schema>_analyze, shortened with a hash when over PostgreSQL's 63 characters. */
export function groupRoleNames(schema: string): GroupRoleNames {
  const fit = (name: string) =>
    name.length <= MAX_IDENT ? name : `${name.slice(0, MAX_IDENT - 9)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
  return { role: fit(`vcon_${schema}`), analyzeRole: fit(`vcon_${schema}_analyze`) };
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

/** A plain connection for the launcher's provisioning (no schema pinning). */
export function openAdmin(url: string): Sql {
  return postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10, connection: { application_name: 'vcon-launch-admin' } }) as unknown as Sql;
}

export async function adminPowers(admin: Sql): Promise<AdminPowers> {
  const [r] = await admin<{ user: string; superuser: boolean; createrole: boolean }[]>`
    select current_user as user, rolsuper as superuser, rolcreaterole as createrole from pg_roles where rolname = current_user`;
  return { user: r.user, superuser: r.superuser, createRole: r.superuser || r.createrole };
}

/** Whether a role exists (cluster-wide). */
export async function roleExists(admin: Sql, role: string): Promise<boolean> {
  const [r] = await admin`select 1 from pg_roles where rolname = ${role}`;
  return Boolean(r);
}

export interface ProvisionInput {
  schema: string;
  role: string;
  password: string;
  /** The analyze role; omitted, none is made. */
  analyze?: { role: string; password: string; limits?: AnalyzeLimits };
}

export interface ProvisionOutcome {
  /** created: the group role is new; updated: it existed and was brought back in line. */
  action: 'created' | 'updated';
  /** Whether temp_file_limit could be set on the analyze role (it needs a superuser). */
  tempFileLimit: boolean;
}

/**
 * Creates or realigns a group's roles. The schema must exist (migrate it first as the admin);
 * ownership of it and of everything in it moves to the group role. Idempotent; passwords are set
 * to the given ones.
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
    await tx`select pg_advisory_xact_lock(hashtext('vcon-launch:provision'))`;
    if (!(await roleExists(tx as unknown as Sql, role))) action = 'created';
    // Utility statements take no bind parameters: the values travel as settings and are quoted by
    // format() (%I identifiers, %L literals) inside the server.
    await tx`select set_config('vcon.role', ${role}, true), set_config('vcon.password', ${password}, true), set_config('vcon.schema', ${schema}, true),
                    set_config('vcon.analyze_role', ${input.analyze?.role ?? ''}, true), set_config('vcon.analyze_password', ${input.analyze?.password ?? ''}, true),
                    set_config('vcon.analyze_connections', ${String(limits.connections)}, true)`;
    await tx`
      do $$
      declare
        r text := current_setting('vcon.role');
        s text := current_setting('vcon.schema');
        a text := current_setting('vcon.analyze_role');
        o record;
      begin
        if not exists (select 1 from pg_roles where rolname = r) then
          execute format('create role %I login password %L', r, current_setting('vcon.password'));
        else
          execute format('alter role %I login password %L', r, current_setting('vcon.password'));
        end if;
        execute format('alter role %I nosuperuser nocreatedb nocreaterole noinherit nobypassrls noreplication', r);
        -- A CREATEROLE admin (not superuser) may only give objects to roles it belongs to.
        if not (select rolsuper from pg_roles where rolname = current_user) then
          execute format('grant %I to current_user', r);
        end if;
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

        if a <> '' then
          if not exists (select 1 from pg_roles where rolname = a) then
            execute format('create role %I login password %L', a, current_setting('vcon.analyze_password'));
          else
            execute format('alter role %I login password %L', a, current_setting('vcon.analyze_password'));
          end if;
          execute format('alter role %I nosuperuser nocreatedb nocreaterole noinherit nobypassrls noreplication connection limit %s',
            a, current_setting('vcon.analyze_connections')::int);
          if not (select rolsuper from pg_roles where rolname = current_user) then
            execute format('grant %I to current_user', a);
          end if;
          execute format('grant connect on database %I to %I', current_database(), a);
          execute format('revoke create, temporary on database %I from %I', current_database(), a);
          execute format('revoke all on schema public from %I', a);
          -- Read-only on the group's own tables, and nothing else the grant system controls.
          execute format('revoke all on all tables in schema %I from %I', s, a);
          execute format('revoke all on all sequences in schema %I from %I', s, a);
          execute format('revoke all on all functions in schema %I from %I', s, a);
          execute format('grant usage on schema %I to %I', s, a);
          execute format('grant select on all tables in schema %I to %I', s, a);
          execute format('alter role %I set search_path to %I, extensions', a, s);
          execute format('alter role %I set default_transaction_read_only to on', a);
        end if;
      end $$`;
    if (input.analyze) {
      const a = input.analyze.role;
      // Role-level settings apply at login, before the statement could change them; ALTER ROLE
      // SET takes no parameters, so the values are integers we format ourselves.
      const q = `"${a.replace(/"/g, '""')}"`;
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

/** Changes a role's password (rotation). */
export async function setRolePassword(admin: Sql, role: string, password: string): Promise<void> {
  await admin.begin(async (tx) => {
    await tx`select set_config('vcon.role', ${role}, true), set_config('vcon.password', ${password}, true)`;
    await tx`do $$ begin execute format('alter role %I password %L', current_setting('vcon.role'), current_setting('vcon.password')); end $$`;
  });
}

/** Drops a group's roles and everything they own in this database (teardown of tests and groups). */
export async function dropGroupRoles(admin: Sql, schema: string): Promise<void> {
  const { role, analyzeRole } = groupRoleNames(schema);
  await admin.begin(async (tx) => {
    // DROP OWNED rewrites the same ACL rows provisioning does: one at a time (see provisionGroupRoles).
    await tx`select pg_advisory_xact_lock(hashtext('vcon-launch:provision'))`;
    for (const r of [analyzeRole, role]) {
      if (!(await roleExists(tx as unknown as Sql, r))) continue;
      const q = `"${r.replace(/"/g, '""')}"`;
      await tx.unsafe(`drop owned by ${q} cascade`);
      await tx.unsafe(`drop role ${q}`);
    }
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
    select schemaname as s from pg_tables where tablename = 'schema_migrations' and schemaname <> ${schema} order by 1`;
  return rows.map((r) => r.s);
}
