// provision changes nothing outside the group's own roles and schema: PUBLIC's rights on schema
// public (every application's) are reported and left alone unless --harden-public is given. On a
// throwaway database, so the test server's shared one keeps its grants.
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { dropGroupRoles } from '../../src/db/roles.js';
import { adminSql, databaseUrl } from '../helpers/db.js';
import { createWorkspace, type Workspace } from './helpers.js';

describe('provision and schema public', () => {
  const database = `vcon_pub_${randomBytes(4).toString('hex')}`;
  const url = (() => {
    const u = new URL(databaseUrl());
    u.pathname = `/${database}`;
    return u.toString();
  })();
  let ws: Workspace;
  const publicRights = async () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ p: string }[]>`
        select a.privilege_type as p from pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
        where n.nspname = 'public' and a.grantee = 0 order by 1`;
      return rows.map((r) => r.p);
    } finally {
      await sql.end();
    }
  };
  beforeAll(async () => {
    const admin = adminSql();
    try {
      await admin.unsafe(`create database "${database}"`);
    } finally {
      await admin.end();
    }
    ws = createWorkspace(['pp']);
    ws.writeEnv('pp', { SUPABASE_DB_SCHEMA: ws.schemas.pp, DATABASE_URL: url });
  });
  afterAll(async () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await dropGroupRoles(sql as never, ws.schemas.pp);
    } finally {
      await sql.end();
    }
    const admin = adminSql();
    try {
      await admin.unsafe(`drop database if exists "${database}" with (force)`);
    } finally {
      await admin.end();
    }
    await ws?.cleanup();
  });

  test('without --harden-public, PUBLIC keeps USAGE on schema public and provision says what it would change', async () => {
    const before = await publicRights();
    expect(before).toContain('USAGE');
    const r = await ws.run(['provision', '--group', 'pp']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(await publicRights()).toEqual(before);
    expect(r.stderr).toContain(`PUBLIC holds ${before.join(' and ')} on schema public in database ${database}`);
    expect(r.stderr).toContain('--harden-public');
    expect(r.stderr).not.toMatch(/revoked .* from PUBLIC/);
  });

  test('with --harden-public it revokes them, and says so', async () => {
    const r = await ws.run(['provision', '--group', 'pp', '--harden-public', '--admin-url', url]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(await publicRights()).toEqual([]);
    expect(r.stderr).toMatch(new RegExp(`revoked USAGE on schema public from PUBLIC in database ${database}`));
  });
});
