// provision: a LOGIN role per group that owns its schema, cannot read another group's schema or
// use public, and is what the group then connects as.
import { statSync, readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorkspace, dropProvisioned, roleNamesOf, type Workspace } from './helpers.js';

const urlIn = (file: string) => /^DATABASE_URL=(.*)$/m.exec(readFileSync(file, 'utf8'))?.[1];

describe('vcon-launch provision', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['pa', 'pb']);
  });
  afterAll(async () => {
    await dropProvisioned(Object.values(ws.schemas));
    await ws?.cleanup();
  });

  test('creates one role per group, writes its DATABASE_URL, and is idempotent', async () => {
    const r = await ws.run(['provision', '--group', 'pa', '--group', 'pb']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`pa\\s+${ws.schemas.pa}\\s+${roleNamesOf(ws.schemas.pa).role}\\s+created`));
    const file = path.join(ws.envDir, 'pa.env');
    const url = urlIn(file)!;
    expect(new URL(url).username).toBe(roleNamesOf(ws.schemas.pa).role);
    expect(new URL(url).password).toMatch(/^[0-9a-f]{48}$/);
    expect(statSync(file).mode & 0o077).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain(`SUPABASE_DB_SCHEMA=${ws.schemas.pa}`);

    const again = await ws.run(['provision', '--group', 'pa']);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/pa\s+\S+\s+\S+\s+updated/);
    expect(urlIn(file)).toBe(url);

    const printed = await ws.run(['provision', '--group', 'pb', '--print']);
    expect(printed.stdout).toContain(urlIn(path.join(ws.envDir, 'pb.env'))!);
  });

  test("the group role reads its own schema but not the other group's, nor public", async () => {
    const sql = postgres(urlIn(path.join(ws.envDir, 'pa.env'))!, { max: 1, onnotice: () => {} });
    try {
      const [who] = await sql`select current_user as u, current_schemas(false) as path`;
      expect(who.u).toBe(roleNamesOf(ws.schemas.pa).role);
      expect(who.path[0]).toBe(ws.schemas.pa);
      await expect(sql`select count(*) from vcons`).resolves.toHaveLength(1);
      await expect(sql.unsafe(`select count(*) from "${ws.schemas.pb}".vcons`)).rejects.toMatchObject({ code: '42501' });
      await expect(sql.unsafe('create table public.launcher_probe (x int)')).rejects.toMatchObject({ code: '42501' });
      // No CREATE on the database: a group role can't make itself new schemas either.
      await expect(sql.unsafe('create schema launcher_probe_schema')).rejects.toMatchObject({ code: '42501' });
      const [owner] = await sql`select tableowner from pg_tables where schemaname = ${ws.schemas.pa} and tablename = 'vcons'`;
      expect(owner.tableowner).toBe(roleNamesOf(ws.schemas.pa).role);
    } finally {
      await sql.end();
    }
  });

  test('the group then starts and migrates as its role', async () => {
    const m = await ws.run(['migrate', '--group', 'pa']);
    expect(m.exitCode, m.stdout + m.stderr).toBe(0);
    expect(m.stdout).toContain(`${roleNamesOf(ws.schemas.pa).role}@`);
    const s = await ws.run(['start', '--group', 'pa', '--detach']);
    expect(s.exitCode, s.stderr).toBe(0);
    const st = JSON.parse((await ws.run(['status', '--json'])).stdout);
    expect(st[0]).toMatchObject({
      group: 'pa',
      status: 'healthy',
      database: expect.stringMatching(new RegExp(`^${roleNamesOf(ws.schemas.pa).role}@`)),
    });
    expect((await ws.run(['stop', '--all'])).exitCode).toBe(0);
  });
});
