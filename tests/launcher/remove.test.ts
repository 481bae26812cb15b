// `vcon-launch remove`: a stopped group's schema and roles go in one transaction (a refusal half-way
// changes nothing), with its env file and every replica's files; --keep-data forgets only the
// launcher's state. Also on a provisioned group, whose env file connects as the group's own role.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import postgres from 'postgres';
import { adminSql, databaseUrl } from '../helpers/db.js';
import { createWorkspace, roleNamesOf, type Workspace } from './helpers.js';

/** The test server's `postgres` database: somewhere else a group role can own something. */
const otherDatabaseUrl = () => {
  const u = new URL(databaseUrl());
  u.pathname = '/postgres';
  return u.toString();
};

describe('vcon-launch remove', () => {
  let ws: Workspace;
  const inDatabase = async (schema: string) => {
    const admin = adminSql();
    try {
      const { role, analyzeRole } = roleNamesOf(schema);
      const [s] = await admin`select count(*)::int as n from pg_namespace where nspname = ${schema}`;
      const roles = await admin<{ rolname: string }[]>`select rolname from pg_roles where rolname in (${role}, ${analyzeRole}) order by 1`;
      return { schema: s.n === 1, roles: roles.map((r) => r.rolname) };
    } finally {
      await admin.end();
    }
  };
  const filesOf = (group: string) =>
    [
      ...readdirSync(ws.instancesDir).filter((f) => f.startsWith(`${group}.`) || f.startsWith(`${group}@`)),
      ...readdirSync(path.join(ws.instancesDir, 'credentials')).filter((f) => f === `${group}.json`),
    ].sort();

  beforeAll(() => {
    ws = createWorkspace(['gone', 'stay']);
  });
  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  test('is refused while the group runs, and without confirmation off a terminal', async () => {
    const s = await ws.run(['start', '--group', 'gone', '--replicas', '2', '--detach']);
    expect(s.exitCode, s.stderr).toBe(0);
    // The stopped group is provisioned: its env file now connects as its own role, not an admin.
    const p = await ws.run(['provision', '--group', 'stay']);
    expect(p.exitCode, p.stderr).toBe(0);
    const running = await ws.run(['remove', '--group', 'gone', '--yes']);
    expect(running.exitCode).not.toBe(0);
    expect(running.stderr).toContain('group gone is running');
    expect((await ws.run(['stop', '--group', 'gone'])).exitCode).toBe(0);
    const unconfirmed = await ws.run(['remove', '--group', 'gone']);
    expect(unconfirmed.exitCode).not.toBe(0);
    expect(unconfirmed.stderr).toContain('pass --yes');
    expect(await inDatabase(ws.schemas.gone)).toMatchObject({ schema: true, roles: expect.arrayContaining([roleNamesOf(ws.schemas.gone).role]) });
  });

  test('refused by the database half-way, it changes nothing', async () => {
    const { role } = roleNamesOf(ws.schemas.gone);
    const before = { db: await inDatabase(ws.schemas.gone), files: filesOf('gone') };
    expect(before.files).toEqual(expect.arrayContaining(['gone.json', 'gone@1.log', 'gone@1.port', 'gone@2.log', 'gone@2.port']));
    // It owns a table in another database: DROP OWNED (this database only) leaves it, so DROP ROLE is refused.
    const other = postgres(otherDatabaseUrl(), { max: 1, onnotice: () => {} });
    const table = `remove_probe_${role}`;
    await other.unsafe(`create table public."${table}" (i int)`);
    await other.unsafe(`alter table public."${table}" owner to "${role}"`);
    try {
      const r = await ws.run(['remove', '--group', 'gone', '--yes']);
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain('nothing was changed');
      expect(await inDatabase(ws.schemas.gone)).toEqual(before.db);
      expect(filesOf('gone')).toEqual(before.files);
      expect(existsSync(path.join(ws.envDir, 'gone.env'))).toBe(true);
    } finally {
      await other.unsafe(`drop table public."${table}"`);
      await other.end();
    }
  });

  test('removes schema, roles, env file and every replica file of the group', async () => {
    // A rotated log of a replica goes with it.
    writeFileSync(path.join(ws.instancesDir, 'gone@2.log.1'), '{}\n');
    const r = await ws.run(['remove', '--group', 'gone', '--yes']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('gone: removed');
    expect(await inDatabase(ws.schemas.gone)).toEqual({ schema: false, roles: [] });
    expect(filesOf('gone')).toEqual([]);
    expect(existsSync(path.join(ws.envDir, 'gone.env'))).toBe(false);
  });

  test('a provisioned group is removed with the admin URL, not its own role', async () => {
    expect(await inDatabase(ws.schemas.stay)).toMatchObject({ schema: true });
    const r = await ws.run(['remove', '--group', 'stay', '--keep-data', '--yes']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('stay: forgotten (data kept)');
    expect(await inDatabase(ws.schemas.stay)).toMatchObject({ schema: true });
    expect(existsSync(path.join(ws.envDir, 'stay.env'))).toBe(true);
    const all = await ws.run(['remove', '--group', 'stay', '--yes']);
    expect(all.exitCode, all.stderr).toBe(0);
    expect(await inDatabase(ws.schemas.stay)).toEqual({ schema: false, roles: [] });
    expect(existsSync(path.join(ws.envDir, 'stay.env'))).toBe(false);
  });
});
