import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { proxyDatabase, type startTcpProxy } from '../helpers/tcp-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';
import { currentDatabase, dropGroupRoles, groupRoleNames, provisionGroupRoles } from '../../src/db/roles.js';

describe('/livez and /readyz while the database is unreachable', () => {
  let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
  let s: TestServer;
  beforeAll(async () => {
    const db = await proxyDatabase(databaseUrl());
    proxy = db.proxy;
    s = await startTestServer({ DATABASE_URL: db.url });
  });
  afterAll(async () => {
    await proxy?.restore().catch(() => undefined);
    await s?.close();
    await proxy?.close();
  });

  it('livez stays 200 and readyz turns 503 with the reason, then 200 again', async () => {
    expect((await s.api('/livez', { key: null })).body).toMatchObject({ success: true, status: 'alive' });
    expect(await s.api('/readyz', { key: null })).toMatchObject({ status: 200, body: { success: true, status: 'healthy', reason: null } });

    await proxy.cut();
    const live = await s.api('/livez', { key: null });
    expect(live.status).toBe(200);
    const ready = await s.api('/readyz', { key: null });
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ success: false, status: 'unhealthy' });
    expect(ready.body.reason).toMatch(/not reachable|did not answer/);
    const health = await s.api('/health', { key: null });
    expect(health.body.reason).toMatch(/not reachable|did not answer/);

    await proxy.restore();
    await waitFor(async () => (await s.api('/readyz', { key: null })).status === 200, 60_000, 100, '/readyz to answer 200 again');
    expect((await s.api('/health', { key: null })).body.reason).toBeNull();
  });

  it('probes refuse other methods with 405', async () => {
    expect((await s.api('/livez', { method: 'POST', key: null })).status).toBe(405);
    expect((await s.api('/readyz', { method: 'DELETE', key: null })).status).toBe(405);
  });
});

describe("when the database refuses the group's role", () => {
  const schema = testSchemaName('refused');
  let role: string;
  let s: TestServer;
  const admin = adminSql();
  beforeAll(async () => {
    const database = await currentDatabase(admin);
    role = groupRoleNames(database, schema).role;
    const password = randomBytes(12).toString('hex');
    await provisionGroupRoles(admin, { schema, role, password });
    s = await startTestServer({ SUPABASE_DB_SCHEMA: schema, DATABASE_USER: role, DATABASE_PASSWORD: password });
  });
  afterAll(async () => {
    await admin.unsafe(`alter role "${role}" login`).catch(() => undefined);
    await s?.close();
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await dropGroupRoles(admin, schema);
    await admin.end();
  });

  it('REST answers 503 database_refused naming the reason, /health and /readyz carry it', async () => {
    expect((await s.api('/vcons')).status).toBe(200);
    await admin.unsafe(`alter role "${role}" nologin`);

    const r = await waitFor(
      async () => {
        // A connection being opened while the role changed may have got in: end whatever got in.
        await admin`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${role}`;
        const x = await s.api('/vcons');
        return x.status === 503 && x.body.error === 'database_refused' ? x : undefined;
      },
      60_000,
      100,
      'database_refused',
    );
    expect(r.body.message).toMatch(/may not log in \(NOLOGIN\)/);

    const health = await s.api('/health', { key: null });
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'unhealthy', reason: expect.stringMatching(/may not log in \(NOLOGIN\)/) });
    // Unauthenticated: the reason names no role.
    expect(health.body.reason).not.toContain(role);
    const ready = await s.api('/readyz', { key: null });
    expect(ready).toMatchObject({ status: 503, body: { reason: health.body.reason } });
    expect((await s.api('/livez', { key: null })).status).toBe(200);

    await admin.unsafe(`alter role "${role}" login`);
    await waitFor(async () => (await s.api('/vcons')).status === 200, 60_000, 100, 'the role to be let in again');
  });
});
