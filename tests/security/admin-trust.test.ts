// The launcher's admin connection never runs what a group controls, and role names are
// unambiguous per server. Through the real launcher: a group role that turns its migration table
// into a view over its own function, an admin whose name is a schema holding a planted format(),
// schema names that are role names, schemas x and x_analyze side by side, one schema name on two
// databases of one server, a group role holding the launcher's advisory lock, and PUBLIC's
// database-wide grants.
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, test } from 'vitest';
import { databaseOfUrl, dropGroupRoles, groupRoleNames, openAdmin, withCredentials } from '../../src/db/roles.js';
import { adminSql, asProvisioner, databaseUrl, testSchemaName } from '../helpers/db.js';
import { api, cliEnv, createWorkspace, roleNamesOf, waitFor, type Workspace } from '../launcher/helpers.js';

const tag = () => randomBytes(4).toString('hex');
const workspaces: Workspace[] = [];
const workspace = (...args: Parameters<typeof createWorkspace>) => {
  const ws = createWorkspace(...args);
  workspaces.push(ws);
  return ws;
};

afterAll(async () => {
  for (const ws of workspaces) {
    await ws.run(['stop', '--all']);
    await ws.cleanup();
  }
}, 300_000);

/** Each group's status, once every one of them answers healthy (a loaded machine may answer late). */
const healthyStatus = (ws: Workspace, groups: string[]) =>
  waitFor(
    async () => {
      const st = JSON.parse((await ws.run(['status', '--json'])).stdout) as { group: string; role: string; status: string }[];
      return groups.every((g) => st.find((e) => e.group === g)?.status === 'healthy') ? st : undefined;
    },
    60_000,
    500,
    `groups ${groups.join(', ')} healthy`,
  );

/** A workspace with these groups, the first of them started (detached). */
async function startedWorkspace(groups: string[]): Promise<Workspace> {
  const ws = workspace(groups);
  const s = await ws.run(['start', '--group', groups[0], '--detach']);
  expect(s.exitCode, s.stderr).toBe(0);
  return ws;
}

/** The credentials the launcher stored for a group (instances/credentials/<group>.json). */
const credentialsOf = (ws: Workspace, group: string) =>
  JSON.parse(readFileSync(path.join(ws.instancesDir, 'credentials', `${group}.json`), 'utf8')) as { role: string; password: string };

/** A connection as the group's own role (what a leaked password gives). */
const connectAsGroup = (ws: Workspace, group: string, applicationName = 'admin-trust-test') => {
  const c = credentialsOf(ws, group);
  return postgres(withCredentials(databaseUrl(), c.role, c.password), {
    max: 1,
    onnotice: () => {},
    connection: { application_name: applicationName },
  });
};

/** Who ran the planted code: every distinct (current_user, is_superuser) it recorded. */
async function recorded(table: string): Promise<{ who: string; su: string }[]> {
  const admin = adminSql();
  try {
    return await admin.unsafe<{ who: string; su: string }[]>(`select distinct who, su from ${table} order by 1, 2`);
  } finally {
    await admin.end();
  }
}

describe("the admin connection never runs a group's code", () => {
  test("a schema_migrations view over the group's own function runs only as the group role, through migrate and start", async () => {
    const ws = await startedWorkspace(['tv']);
    const schema = ws.schemas.tv;
    expect((await ws.run(['stop', '--group', 'tv'])).exitCode).toBe(0);
    const sql = connectAsGroup(ws, 'tv');
    try {
      // Everything here the group's role may do in its own schema.
      await sql.unsafe(`
        create table "${schema}".trap_log (who text, su text);
        alter table "${schema}".schema_migrations rename to schema_migrations_real;
        create function "${schema}".trap() returns setof "${schema}".schema_migrations_real language plpgsql as $$
        begin
          insert into "${schema}".trap_log values (current_user, current_setting('is_superuser'));
          return query select * from "${schema}".schema_migrations_real;
        end $$;
        create view "${schema}".schema_migrations as select * from "${schema}".trap();`);
    } finally {
      await sql.end();
    }
    const m = await ws.run(['migrate', '--group', 'tv']);
    expect(m.exitCode, m.stdout + m.stderr).toBe(0);
    const status = await ws.run(['migrate', '--group', 'tv', '--status']);
    expect(status.exitCode, status.stdout + status.stderr).toBe(0);
    const s = await ws.run(['start', '--group', 'tv', '--detach']);
    expect(s.exitCode, s.stderr).toBe(0);
    // The view was read (so the function ran), and only ever as the group's own role.
    expect(await recorded(`"${schema}".trap_log`)).toEqual([{ who: roleNamesOf(schema).role, su: 'off' }]);
  }, 180_000);

  test('a schema named like the admin user, holding a planted format(text, text, text), is never resolved by the admin', async () => {
    const adminName = `vcon_t_adm_${tag()}`;
    const owner = `vcon_t_own_${tag()}`;
    const setup = adminSql();
    try {
      // A superuser of its own (unique per run) whose "$user" schema another role owns.
      await setup.unsafe(`create role "${adminName}" login superuser`);
      await setup.unsafe(`create role "${owner}" nologin`);
      await setup.unsafe(`create schema "${adminName}" authorization "${owner}"`);
      await setup.unsafe(`create table "${adminName}".trap_log (who text, su text)`);
      await setup.unsafe(`grant insert on "${adminName}".trap_log to public`);
      await setup.unsafe(`grant usage on schema "${adminName}" to public`);
      await setup.unsafe(`
        create function "${adminName}".format(text, text, text) returns text language plpgsql as $$
        begin
          insert into "${adminName}".trap_log values (current_user, current_setting('is_superuser'));
          return pg_catalog.format($1, $2, $3);
        end $$`);
      await setup.unsafe(`alter function "${adminName}".format(text, text, text) owner to "${owner}"`);
    } finally {
      await setup.end();
    }
    try {
      const ws = workspace(['tf']);
      const u = new URL(databaseUrl());
      u.username = adminName;
      ws.writeEnv('shared', { DATABASE_URL: u.toString(), API_KEYS: 'k', LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing' });
      const s = await ws.run(['start', '--group', 'tf', '--detach']);
      expect(s.exitCode, s.stderr).toBe(0);
      expect((await ws.run(['stop', '--group', 'tf'])).exitCode).toBe(0);
      const m = await ws.run(['migrate', '--group', 'tf']);
      expect(m.exitCode, m.stdout + m.stderr).toBe(0);
      expect(await recorded(`"${adminName}".trap_log`)).toEqual([]);
    } finally {
      await asProvisioner([
        `drop schema "${adminName}" cascade`,
        `drop role "${owner}"`,
        `drop owned by "${adminName}" cascade`,
        `drop role "${adminName}"`,
      ]);
    }
  }, 180_000);

  test('check and start refuse a schema named like a role: postgres, or any role on the server', async () => {
    const roleName = `t_role_${tag()}_x`;
    const setup = adminSql();
    await setup.unsafe(`create role "${roleName}" nologin`);
    await setup.end();
    try {
      const ws = workspace([]);
      ws.writeEnv('rp', { SUPABASE_DB_SCHEMA: 'postgres' });
      ws.writeEnv('rr', { SUPABASE_DB_SCHEMA: roleName });
      const c = await ws.run(['check']);
      expect(c.exitCode).toBe(1);
      expect(c.stdout).toMatch(
        /FAIL\s+\S*rp\.env\n\s+- SUPABASE_DB_SCHEMA: schema postgres cannot hold a group: it is the name of the database's admin user role/,
      );
      expect(c.stdout).toMatch(
        new RegExp(`FAIL\\s+\\S*rr\\.env[^\\n]*\\n\\s+- SUPABASE_DB_SCHEMA: schema ${roleName} is the name of a role on this server`),
      );
      const s = await ws.run(['start', '--group', 'rr', '--detach']);
      expect(s.exitCode).not.toBe(0);
      expect(s.stderr).toContain(`group rr: schema ${roleName} cannot hold a group: a role of that name exists on this server`);
      // public: no role can own it for one group, so the group would run as the launcher's own user.
      ws.writeEnv('rpub', { SUPABASE_DB_SCHEMA: 'public' });
      const p = await ws.run(['start', '--group', 'rpub', '--detach']);
      expect(p.exitCode).not.toBe(0);
      expect(p.stderr).toContain('schema public cannot hold a group');
      expect((await ws.run(['check'])).stdout).toMatch(/FAIL\s+\S*rpub\.env\n\s+- SUPABASE_DB_SCHEMA: schema public cannot hold a group/);
      expect(ws.registry()).toEqual({});
    } finally {
      const admin = adminSql();
      await admin.unsafe(`drop role "${roleName}"`);
      await admin.end();
    }
  }, 120_000);
});

describe('role names are unambiguous per server', () => {
  test('schemas x and x_analyze on one database both serve their own data; neither clobbers the other', async () => {
    const x = testSchemaName('l_x');
    const ws = workspace([]);
    ws.writeEnv('gx', { SUPABASE_DB_SCHEMA: x, VCON_INSTANCE_LABEL: `label-gx-${tag()}` });
    ws.writeEnv('gxa', { SUPABASE_DB_SCHEMA: `${x}_analyze`, VCON_INSTANCE_LABEL: `label-gxa-${tag()}` });
    ws.schemas.gx = x;
    ws.schemas.gxa = `${x}_analyze`;
    const s = await ws.run(['start', '--all', '--detach']);
    expect(s.exitCode, s.stderr).toBe(0);
    // migrate re-provisions both (as start does): still nobody's role is the other's.
    const m = await ws.run(['migrate', '--all']);
    expect(m.exitCode, m.stdout + m.stderr).toBe(0);
    await healthyStatus(ws, ['gx', 'gxa']);
    const reg = ws.registry();
    const uuids: Record<string, string> = { gx: randomUUID(), gxa: randomUUID() };
    for (const g of ['gx', 'gxa']) {
      const created = await api(`${reg[g].url}/api/v1`, '/vcons', {
        method: 'POST',
        json: { uuid: uuids[g], vcon: '0.3.0', created_at: new Date().toISOString(), subject: `own ${g}`, parties: [] },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }
    for (const [g, other] of [
      ['gx', 'gxa'],
      ['gxa', 'gx'],
    ]) {
      expect((await api(`${reg[g].url}/api/v1`, `/vcons/${uuids[g]}`)).status).toBe(200);
      expect((await api(`${reg[g].url}/api/v1`, `/vcons/${uuids[other]}`)).status).toBe(404);
    }
    // Four distinct roles, each group's server connecting as its own.
    const names = [roleNamesOf(x), roleNamesOf(`${x}_analyze`)];
    expect(new Set(names.flatMap((n) => [n.role, n.analyzeRole])).size).toBe(4);
    const st = await healthyStatus(ws, ['gx', 'gxa']);
    expect(st.map((e) => [e.group, e.role])).toEqual([
      ['gx', names[0].role],
      ['gxa', names[1].role],
    ]);
  }, 180_000);

  test('one schema name on two databases of the server: two roles, and neither group loses its password', async () => {
    const db2 = `vcon_t_db_${tag()}`;
    const setup = adminSql();
    await setup.unsafe(`create database "${db2}"`);
    await setup.end();
    const url2 = new URL(databaseUrl());
    url2.pathname = `/${db2}`;
    const ws = workspace(['d1']);
    const schema = ws.schemas.d1;
    ws.writeEnv('d2', { SUPABASE_DB_SCHEMA: schema, DATABASE_URL: url2.toString(), VCON_INSTANCE_LABEL: `label-d2-${tag()}` });
    try {
      const a = await ws.run(['start', '--group', 'd1', '--detach']);
      expect(a.exitCode, a.stderr).toBe(0);
      const before = credentialsOf(ws, 'd1');
      // The role's stored SCRAM verifier: a reset writes a new one (a new salt), whatever the
      // server's pg_hba asks of logins (trust on the test server would let any password in).
      const verifier = async (role: string) => {
        const admin = adminSql();
        try {
          const [r] = await admin<{ v: string | null }[]>`select rolpassword as v from pg_authid where rolname = ${role}`;
          return r?.v ?? null;
        } finally {
          await admin.end();
        }
      };
      const stored = await verifier(before.role);
      expect(stored).toMatch(/^SCRAM-SHA-256\$/);
      const b = await ws.run(['start', '--group', 'd2', '--detach']);
      expect(b.exitCode, b.stderr).toBe(0);
      const other = credentialsOf(ws, 'd2');
      expect(other.role).not.toBe(before.role);
      expect(other.role).toBe(groupRoleNames(db2, schema).role);
      expect(await verifier(before.role)).toBe(stored);
      // d1's stored password still logs in (it was not reset), into its own database only.
      const sql = connectAsGroup(ws, 'd1');
      try {
        const [who] = await sql`select current_user as u, current_database() as db`;
        expect(who).toEqual({ u: before.role, db: databaseOfUrl(databaseUrl()) });
      } finally {
        await sql.end();
      }
      await healthyStatus(ws, ['d1', 'd2']);
    } finally {
      await ws.run(['stop', '--all']);
      const admin2 = openAdmin(url2.toString());
      try {
        await dropGroupRoles(admin2, schema);
      } finally {
        await admin2.end();
      }
      const admin = adminSql();
      await admin.unsafe(`drop database if exists "${db2}" with (force)`);
      await admin.end();
    }
  }, 180_000);
});

describe('a running server notices when its role no longer pins its own schema', () => {
  test('/health answers unhealthy and every request 503 database_identity until the role owns its schema again', async () => {
    const ws = await startedWorkspace(['ri']);
    const schema = ws.schemas.ri;
    const base = `${ws.registry().ri.url}/api/v1`;
    const admin = adminSql();
    try {
      await admin.unsafe(`alter schema "${schema}" owner to current_user`);
      const health = await api(base, '/health');
      expect(health.status).toBe(503);
      expect(health.body.status).toBe('unhealthy');
      const created = await api(base, '/vcons', {
        method: 'POST',
        json: { uuid: randomUUID(), vcon: '0.3.0', created_at: new Date().toISOString(), parties: [] },
      });
      expect(created.status).toBe(503);
      expect(created.body).toMatchObject({
        error: 'database_identity',
        message: expect.stringContaining(`schema ${schema}`),
      });
      expect((await api(base, '/vcons')).body).toMatchObject({ error: 'database_identity' });
      await admin.unsafe(`alter schema "${schema}" owner to "${roleNamesOf(schema).role}"`);
      expect((await api(base, '/health')).status).toBe(200);
      expect((await api(base, '/vcons')).status).toBe(200);
    } finally {
      await admin.end();
    }
  }, 120_000);
});

describe('what a leaked group-role password still gives', () => {
  test("holding the launcher's provisioning lock stalls no start for long: the error names the holder", async () => {
    const ws = await startedWorkspace(['lh', 'lw']);
    const holder = connectAsGroup(ws, 'lh', 'leaked-lock-holder');
    try {
      const [{ pid }] = await holder<{ pid: number }[]>`select pg_backend_pid() as pid, pg_advisory_lock(hashtext('vcon-launch:provision'))`;
      // The lock is the database's, so every launcher on it (another test run's too) waits while it
      // is held: a short wait keeps the hold short.
      const w = await ws.run(['start', '--group', 'lw', '--detach'], { env: { ...cliEnv(), VCON_LAUNCH_LOCK_WAIT_MS: '1000' } });
      expect(w.exitCode).not.toBe(0);
      expect(w.stderr).toContain(
        `group lw: waited 1000 ms for the advisory lock "vcon-launch:provision", held by pid ${pid} (user ${credentialsOf(ws, 'lh').role}, application_name "leaked-lock-holder")`,
      );
    } finally {
      await holder.end();
    }
  }, 180_000);

  test('the analyze role reads the vCon tables but PostgreSQL refuses it the webhook tables (their URLs carry secrets)', async () => {
    const ws = await startedWorkspace(['wa']);
    const c = JSON.parse(readFileSync(path.join(ws.instancesDir, 'credentials', 'wa.json'), 'utf8')) as {
      analyze_role: string;
      analyze_password: string;
    };
    const analyze = postgres(withCredentials(databaseUrl(), c.analyze_role, c.analyze_password), { max: 1, onnotice: () => {} });
    try {
      expect(await analyze`select count(*)::int as n from vcons`).toEqual([{ n: 0 }]);
      for (const table of ['webhook_endpoint', 'webhook_delivery'])
        await expect(analyze.unsafe(`select * from ${table}`)).rejects.toMatchObject({ code: '42501' });
    } finally {
      await analyze.end();
    }
    // provision again on the migrated schema: its grant of every table must leave them out too.
    const p = await ws.run(['provision', '--group', 'wa']);
    expect(p.exitCode, p.stderr).toBe(0);
    const again = postgres(withCredentials(databaseUrl(), c.analyze_role, c.analyze_password), { max: 1, onnotice: () => {} });
    try {
      await expect(again.unsafe('select * from webhook_endpoint')).rejects.toMatchObject({ code: '42501' });
    } finally {
      await again.end();
    }
  }, 180_000);

  test('check warns that PUBLIC holds CONNECT and TEMPORARY on the database, with the statements that take them away', async () => {
    const ws = workspace(['pw']);
    const c = await ws.run(['check']);
    expect(c.exitCode, c.stdout).toBe(0);
    const db = databaseOfUrl(databaseUrl());
    expect(c.stdout).toMatch(/PostgreSQL server \S+\n\s+warning: PUBLIC holds /);
    expect(c.stdout).toContain(`CONNECT and TEMPORARY on database ${db}`);
    expect(c.stdout).toContain(`revoke connect, temporary on database "${db}" from public;`);
  }, 60_000);
});
