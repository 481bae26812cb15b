// Overload answers 503 database_busy with Retry-After, never a hang or a reset: a full pool
// (the admission bound) and a PostgreSQL that refuses a connection for capacity (SQLSTATE 53300,
// here a role's CONNECTION LIMIT) both, and /health says busy rather than unreachable.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { adminSql, asProvisioner, createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../launcher/helpers.js';

const vconFixture = () => ({
  vcon: '0.3.0',
  subject: 'Busy hello',
  parties: [{ tel: '+15550001', name: 'Ann' }],
  dialog: [{ type: 'text', start: '2025-01-01T10:00:00Z', parties: [0], encoding: 'none', body: 'hello, where is my order?' }],
});

const expectBusy = (r: { status: number; headers: Headers; body: any }) => {
  expect(r.status, JSON.stringify(r.body)).toBe(503);
  expect(r.headers.get('retry-after')).toBe('1');
  expect(r.body).toMatchObject({ success: false, error: 'database_busy' });
  expect(r.body.message).toMatch(/busy|connection limit/);
};

describe('a full pool', () => {
  let s: TestServer;
  // The same pool with a wait bound no test reaches: its waiter stays queued while /health is
  // asked, however slowly a loaded machine serves that request (150 ms could pass before it).
  let patient: TestServer;
  beforeAll(async () => {
    [s, patient] = await Promise.all([
      startTestServer({ DB_POOL_MAX: '2', DB_QUEUE_TIMEOUT_MS: '150' }),
      startTestServer({ DB_POOL_MAX: '2', DB_QUEUE_TIMEOUT_MS: '600000' }),
    ]);
  });
  afterAll(() => Promise.all([s?.close(), patient?.close()]));

  it('answers database_busy with Retry-After once the wait bound passes', async () => {
    // Requests take turns on the pool less the index thread's connection: hold every turn.
    const turns = s.instance.services.admission.stats().size;
    expect(turns).toBe(1);
    const held = [await s.instance.services.admission.acquire()];
    try {
      expectBusy(await s.api('/vcons'));
      expectBusy(await s.api('/vcons', { method: 'POST', json: vconFixture() }));
      expect(s.instance.services.admission.stats()).toMatchObject({ refused: 2, waiting: 0 });
    } finally {
      for (const release of held) release();
    }
    const after = await s.api('/vcons');
    expect(after.status).toBe(200);
    const h = await s.api('/health', { key: null });
    expect(h.status).toBe(200);
    expect(h.body).toMatchObject({ status: 'healthy', database: 'connected', pool: { size: 2, in_use: 0, waiting: 0 } });
    expect(h.body.pool.connections).toBeGreaterThanOrEqual(1);
    expect(h.body.pool.connections).toBeLessThanOrEqual(2);
  });

  it('says busy on /health while a request waits for a turn, without queueing its own ping behind it', async () => {
    const admission = patient.instance.services.admission;
    expect(admission.stats().size).toBe(1);
    const release = await admission.acquire();
    const waiter = patient.api('/vcons');
    try {
      await waitFor(() => admission.stats().waiting === 1, 60_000, 20, 'the request to wait for a turn');
      const h = await patient.api('/health', { key: null });
      expect(h.status).toBe(503);
      expect(h.headers.get('retry-after')).toBe('1');
      expect(h.body).toMatchObject({ success: false, status: 'busy', database: 'busy', pool: { size: 2, in_use: 1, waiting: 1 } });
    } finally {
      release();
    }
    // The turn passes to the waiter.
    expect((await waiter).status).toBe(200);
    expect(admission.stats()).toMatchObject({ in_use: 0, waiting: 0, refused: 0 });
  });

  it('under a burst answers only 2xx or database_busy, and stores exactly what it acknowledged', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 2 ? s.api('/vcons', { method: 'POST', json: vconFixture() }) : s.api('/vcons/search/content?q=hello'),
      ),
    );
    const created: string[] = [];
    for (const r of results) {
      if (r.status === 503) expectBusy(r);
      else {
        expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
        if (r.status === 201) created.push(r.body.uuid);
      }
    }
    for (const uuid of created) expect((await s.api(`/vcons/${uuid}`)).status).toBe(200);
    expect(s.instance.services.admission.stats()).toMatchObject({ in_use: 0, waiting: 0 });
  });
});

describe('PostgreSQL refusing a connection for capacity (53300)', () => {
  const role = `h15_busy_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  let t: TestSchema;
  let s: TestServer;
  let roleUrl: string;

  beforeAll(async () => {
    t = await createTestSchema('busy');
    const admin = adminSql();
    await admin.unsafe(`create role "${role}" login password '${password}' connection limit 1`);
    // The role owns the schema and what is in it, as a group's role does: a server refuses to run
    // as a role that does not own its schema.
    await admin.unsafe(`alter schema "${t.schema}" owner to "${role}"`);
    await admin.unsafe(
      `do $$ declare o record; begin
         for o in select c.relname, c.relkind from pg_class c
                  where c.relnamespace = '"${t.schema}"'::regnamespace and c.relkind in ('r', 'S', 'v', 'm')
                    and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i'))
         loop
           execute format('alter %s %I.%I owner to %I', case o.relkind when 'S' then 'sequence' when 'v' then 'view' when 'm' then 'materialized view' else 'table' end,
                          '${t.schema}', o.relname, '${role}');
         end loop;
         for o in select p.oid::regprocedure as sig from pg_proc p where p.pronamespace = '"${t.schema}"'::regnamespace loop
           execute format('alter routine %s owner to %I', o.sig, '${role}');
         end loop;
       end $$`,
    );
    await admin.end();
    const u = new URL(databaseUrl());
    u.username = role;
    u.password = password;
    roleUrl = u.toString();
    s = await startTestServer({
      DATABASE_URL: roleUrl,
      SUPABASE_DB_SCHEMA: t.schema,
      DB_POOL_MAX: '2',
      DB_IDLE_TIMEOUT_S: '1',
      INDEX_THREAD_IDLE_S: '1',
    });
  });
  afterAll(async () => {
    await s?.close();
    await t?.drop();
    await asProvisioner([`drop owned by "${role}"`, `drop role if exists "${role}"`]).catch(() => undefined);
  });

  const roleConnections = async () => {
    const admin = adminSql();
    const [r] = await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where usename = ${role}`;
    await admin.end();
    return r.n;
  };

  it('answers database_busy (not database_unavailable) and recovers when a slot frees', async () => {
    expect((await s.api('/vcons')).status).toBe(200);
    // Idle connections go back after DB_IDLE_TIMEOUT_S (the index thread's after INDEX_THREAD_IDLE_S): none while idle.
    await waitFor(async () => (await roleConnections()) === 0, 60_000, 100);
    const squatter = postgres(roleUrl, { max: 1, onnotice: () => {} });
    try {
      // The role's one slot: the index thread may still be starting up and take it first; it gives
      // it back once retired (INDEX_THREAD_IDLE_S), so the squatter retries until it holds it.
      await waitFor(
        () =>
          squatter`select 1`.then(
            () => true,
            () => false,
          ),
        60_000,
        100,
      );
      expectBusy(await s.api('/vcons'));
      const h = await s.api('/health', { key: null });
      expect(h.status).toBe(503);
      expect(h.body).toMatchObject({ status: 'busy', database: 'busy' });
    } finally {
      await squatter.end();
    }
    await waitFor(async () => (await s.api('/vcons')).status === 200, 60_000, 100);
    expect((await s.api('/health', { key: null })).body).toMatchObject({ status: 'healthy' });
  });
});
