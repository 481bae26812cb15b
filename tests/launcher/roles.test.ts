// Roles by default: on a URL whose user may create roles, `start` serves every group as its own
// non-superuser role and never hands the admin URL to a server; without that power the groups
// share one identity and the launcher (and `check`) say so; a shared superuser is refused unless
// the operator opts in; `rotate` gives stopped groups new passwords.
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminSql, asProvisioner, databaseUrl } from '../helpers/db.js';
import { cliEnv, createWorkspace, roleNamesOf, type Workspace } from './helpers.js';
import { installUnreachableByOthers } from '../../cli/os-users.js';
import { packageRoot } from '../../src/paths.js';

// As root, groups run as their own OS users unless other users cannot enter the checkout.
const groupUsers = process.getuid?.() === 0 && installUnreachableByOthers(packageRoot) === undefined;

/** The DATABASE_URL a running server process was given (Linux /proc). */
const childEnv = (pid: number) =>
  Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );

describe('per-group roles by default', () => {
  let ws: Workspace;
  beforeAll(() => {
    // Labels unique to this run: other checkouts may run the same test on the same server.
    const tag = randomBytes(4).toString('hex');
    ws = createWorkspace(['ra', 'rb'], { ra: { VCON_INSTANCE_LABEL: `label-ra-${tag}` }, rb: { VCON_INSTANCE_LABEL: `label-rb-${tag}` } });
  });
  afterAll(async () => {
    await ws.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('start serves each group as its own non-superuser role; the admin URL reaches no server', async () => {
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    const st = JSON.parse((await ws.run(['status', '--json'])).stdout) as { group: string; role: string; pid: number; status: string }[];
    expect(st.map((s) => [s.group, s.role, s.status])).toEqual([
      ['ra', roleNamesOf(ws.schemas.ra).role, 'healthy'],
      ['rb', roleNamesOf(ws.schemas.rb).role, 'healthy'],
    ]);
    const admin = adminSql();
    try {
      for (const s of st) {
        const env = childEnv(s.pid);
        // As root each group runs as its own OS user and gets its URL over IPC, not in its environment.
        if (groupUsers) expect(env.DATABASE_URL).toBeUndefined();
        else expect(new URL(env.DATABASE_URL).username).toBe(s.role);
        expect(env.ANALYZE_DATABASE_USER).toBe(roleNamesOf(ws.schemas[s.group]).analyzeRole);
        expect(Object.values(env).join('\n')).not.toContain(databaseUrl());
        const [role] = await admin`select rolsuper, rolcreaterole, rolcreatedb, rolreplication from pg_roles where rolname = ${s.role}`;
        expect(role).toEqual({ rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolreplication: false });
        // Every connection the group's server holds is its role's.
        const label = readFileSync(path.join(ws.envDir, `${s.group}.env`), 'utf8').match(/^VCON_INSTANCE_LABEL=(.*)$/m)![1];
        const users = await admin<{ u: string }[]>`select distinct usename as u from pg_stat_activity where application_name = ${`vcon-${label}`}`;
        expect(users.map((u) => u.u)).toEqual([s.role]);
      }
    } finally {
      await admin.end();
    }
    const creds = path.join(ws.instancesDir, 'credentials', 'ra.json');
    expect(statSync(creds).mode & 0o077).toBe(0);
    expect(statSync(path.dirname(creds)).mode & 0o077).toBe(0);
    expect(JSON.parse(readFileSync(creds, 'utf8'))).toMatchObject({
      role: roleNamesOf(ws.schemas.ra).role,
      password: expect.stringMatching(/^[0-9a-f]{48}$/),
    });
  });

  test('rotate refuses a running group, then gives a stopped one new passwords it starts with', async () => {
    const refused = await ws.run(['rotate', '--group', 'ra']);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/stop ra first/);
    expect((await ws.run(['stop', '--group', 'ra'])).exitCode).toBe(0);
    const file = path.join(ws.instancesDir, 'credentials', 'ra.json');
    const before = JSON.parse(readFileSync(file, 'utf8'));
    const r = await ws.run(['rotate', '--group', 'ra']);
    expect(r.exitCode, r.stderr).toBe(0);
    const after = JSON.parse(readFileSync(file, 'utf8'));
    expect(after.password).not.toBe(before.password);
    expect(after.analyze_password).not.toBe(before.analyze_password);
    const s = await ws.run(['start', '--group', 'ra', '--detach']);
    expect(s.exitCode, s.stderr).toBe(0);
  });
});

describe('without the power to create roles', () => {
  const user = `vcon_t_plain_${randomBytes(4).toString('hex')}`;
  let ws: Workspace;
  beforeAll(async () => {
    const admin = adminSql();
    let db: string;
    try {
      // A user that may create schemas in the database but not roles (a typical application user).
      // With a password: the embedded test cluster asks every connection for one.
      await admin.unsafe(`create role "${user}" login password 'plain-pw'`);
      [{ db }] = await admin<{ db: string }[]>`select current_database() as db`;
    } finally {
      await admin.end();
    }
    await asProvisioner([`grant create on database "${db}" to "${user}"`]);
    ws = createWorkspace(['na', 'nb']);
    const u = new URL(databaseUrl());
    u.username = user;
    u.password = 'plain-pw';
    ws.writeEnv('shared', { DATABASE_URL: u.toString(), API_KEYS: 'k', LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing' });
  });
  afterAll(async () => {
    await ws.run(['stop', '--all']);
    await ws?.cleanup();
    await asProvisioner([`drop owned by "${user}" cascade`, `drop role if exists "${user}"`]);
  });

  test('check and start say the groups share one identity; status shows it', async () => {
    const c = await ws.run(['check']);
    expect(c.stdout).toMatch(
      new RegExp(
        `na\\.env: .*connects as ${user} \\(shared\\)\\n\\s+warning: groups on this database share one identity \\(${user} may not create roles\\): isolation rests on the application only`,
      ),
    );
    const r = await ws.run(['start', '--all', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      new RegExp(
        `group na connects as ${user} \\(${user} may not create roles\\): groups on this database share one identity, and isolation rests on the application only`,
      ),
    );
    const st = JSON.parse((await ws.run(['status', '--json'])).stdout) as { role: string }[];
    expect(st.map((s) => s.role)).toEqual([user, user]);
  });
});

describe('a superuser shared by groups', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['sa', 'sb']);
  });
  afterAll(async () => {
    await ws.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('is refused with roles off, unless the operator opts in', async () => {
    const off = { ...cliEnv(), VCON_LAUNCH_ROLES: 'off' };
    // sa and sb share the database, so the superuser would be shared between them (whatever else the test database holds).
    const refused = await ws.run(['start', '--group', 'sa', '--group', 'sb', '--detach'], { env: off });
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/group sa would connect as superuser postgres to a database other groups use \(schemas [^)]+\)/);
    expect(refused.stderr).toContain('VCON_LAUNCH_ALLOW_SHARED_SUPERUSER=yes');
    expect(ws.registry()).toEqual({});
    const allowed = await ws.run(['start', '--group', 'sa', '--group', 'sb', '--detach'], {
      env: { ...off, VCON_LAUNCH_ALLOW_SHARED_SUPERUSER: 'yes' },
    });
    expect(allowed.exitCode, allowed.stderr).toBe(0);
    const st = JSON.parse((await ws.run(['status', '--json'])).stdout) as { group: string; role: string }[];
    expect(st.map((s) => [s.group, s.role])).toEqual([
      ['sa', 'postgres'],
      ['sb', 'postgres'],
    ]);
  });
});
