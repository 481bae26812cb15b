// Attacks on POST /database/analyze, as a security review sent them, through REST and MCP, with
// two groups (alpha, beta) on one database as `vcon-launch start` runs them — with per-group roles
// (the default) and with one shared superuser (roles off, shared superuser allowed). alpha's key
// does its worst through analyze; nothing of beta may come back, no file or setting may be read,
// no lock or slot may stay behind, and beta must start afterwards.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createAnalyzeRepo } from '../../src/db/analyze-repo.js';
import { adminSql, databaseUrl } from '../helpers/db.js';
import { api, cliEnv, createWorkspace, KEY, roleNamesOf, type Workspace } from '../launcher/helpers.js';
import { connectHttp, textOf, type HttpSession } from '../mcp/helpers.js';

const MODES = [
  { name: 'per-group roles (default)', env: {} as Record<string, string>, role: (schema: string) => roleNamesOf(schema).role },
  { name: 'one shared superuser (roles off)', env: { VCON_LAUNCH_ROLES: 'off', VCON_LAUNCH_ALLOW_SHARED_SUPERUSER: 'yes' }, role: () => 'postgres' },
];

describe.each(MODES)('analyze attacks with $name', (mode) => {
  const secret = `BETA-SECRET-${randomBytes(4).toString('hex')}`;
  // alpha's label names its connections; unique, since other checkouts may run this on the same server.
  const tag = randomBytes(4).toString('hex');
  let ws: Workspace;
  let alpha: string;
  let beta: string;
  let mcp: HttpSession;
  const env = () => ({ ...cliEnv(), ...mode.env });

  beforeAll(async () => {
    ws = createWorkspace(['alpha', 'beta'], { alpha: { VCON_INSTANCE_LABEL: `alpha-${tag}` } });
    const r = await ws.run(['start', '--all', '--detach'], { env: env() });
    expect(r.exitCode, r.stderr).toBe(0);
    const reg = ws.registry();
    expect([reg.alpha.role, reg.beta.role]).toEqual([mode.role(ws.schemas.alpha), mode.role(ws.schemas.beta)]);
    alpha = `${reg.alpha.url}/api/v1`;
    beta = `${reg.beta.url}/api/v1`;
    const created = await api(beta, '/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: secret, parties: [{ name: secret }] } });
    expect(created.status).toBe(201);
    mcp = await connectHttp(reg.alpha.url, KEY);
  });

  afterAll(async () => {
    await mcp?.close();
    await ws?.run(['stop', '--all']);
    await ws?.cleanup();
  });

  /** The same request through REST and MCP: both must refuse it and carry nothing of beta. */
  async function refusedBoth(query: string, analyze = true): Promise<string> {
    const rest = await api(alpha, '/database/analyze', { method: 'POST', json: { query, analyze } });
    const restText = JSON.stringify(rest.body);
    expect(rest.status, restText).toBe(400);
    const tool = await mcp.call('analyze_query', { query, analyze });
    const toolText = textOf(tool);
    expect(tool.isError, toolText).toBe(true);
    for (const text of [restText, toolText]) {
      expect(text).not.toContain(secret);
      expect(text).not.toMatch(/<row>|\/var\/lib\/postgresql|PG_VERSION|127\.0\.0\.1\/32/);
    }
    return restText;
  }

  const beta_ = () => ws.schemas.beta;

  test("U& identifiers reach neither beta's rows, nor files, nor other sessions, nor slots", async () => {
    await refusedBoth(`select U&"\\0071uery_to_xml"('select subject from ${beta_()}.vcons',true,false,'')::text::int`);
    await refusedBoth(`select U&"!0071uery_to_xml" UESCAPE '!'('select subject from ${beta_()}.vcons',true,false,'')::text::int`);
    await refusedBoth(`select U&"\\0070g_read_file"('/etc/hostname')::int`);
    await refusedBoth(`select U&"\\0070g_ls_dir"('.')`);
    await refusedBoth(`select * from U&"\\0070g_ls_dir"('.') as f(name)`);
    await refusedBoth(`select U&"\\0070g_cancel_backend"(pid) from pg_stat_activity`);
    await refusedBoth(`select U&"\\0070g_cancel_backend"(g) from generate_series(1, 100000) g`);
    const slot = `attack_${randomBytes(3).toString('hex')}`;
    await refusedBoth(`select * from U&"\\0070g_create_logical_replication_slot"('${slot}', 'test_decoding')`);
    await refusedBoth(`select * from U&"\\0070g_create_physical_replication_slot"('${slot}')`);
    // Figures by OID: the table's OID is no secret, its statistics are.
    const admin = adminSql();
    try {
      const [{ oid }] = await admin<{ oid: number }[]>`select ${`${beta_()}.vcons`}::regclass::oid::int as oid`;
      for (const fn of ['pg_stat_get_tuples_inserted', 'pg_stat_get_live_tuples', 'pg_total_relation_size']) {
        await refusedBoth(`select ${fn}(${oid})`);
        await refusedBoth(`select U&"${fn.replace('p', '\\0070')}"(${oid}::oid)`);
      }
      await refusedBoth(`select ${oid}::oid::regclass`);
      const [{ n }] = await admin<{ n: number }[]>`select count(*)::int as n from pg_replication_slots where slot_name = ${slot}`;
      expect(n).toBe(0);
    } finally {
      await admin.end();
    }
  });

  test('catalog views and functions are refused, inside views and function scans too', async () => {
    await refusedBoth('select query from pg_stat_activity');
    await refusedBoth("select setting from pg_settings where name = 'data_directory'");
    await refusedBoth('select * from pg_hba_file_rules');
    await refusedBoth('select pg_describe_object(1259, g::oid, 0) from generate_series(16384, 20000) g');
    await refusedBoth("select (select string_agg(pg_describe_object(1259, g::oid, 0), ',') from generate_series(16384, 20000) g)::int");
    await refusedBoth('select relname from pg_class');
    await refusedBoth(`select * from "${beta_()}".vcons`);
    // A view of the catalogs is expanded in the plan: its relations are checked as well.
    await refusedBoth('select * from information_schema.tables');
    await refusedBoth("select current_setting('data_directory')");
    await refusedBoth("select set_config('work_mem', '1GB', false)");
  });

  test("an advisory lock on beta's migrate key does not outlive the call; beta restarts", async () => {
    await refusedBoth(`select U&"\\0070g_advisory_lock"(hashtext('vcon-launch:migrate:${beta_()}'))`);
    await refusedBoth(`select pg_advisory_lock(hashtext('vcon-launch:migrate:${beta_()}'))`);
    const admin = adminSql();
    try {
      const [{ mine }] = await admin<{ mine: number }[]>`
        select count(*)::int as mine from pg_locks l join pg_stat_activity a using (pid)
        where l.locktype = 'advisory' and a.application_name like ${`vcon-alpha-${tag}%`}`;
      expect(mine).toBe(0);
    } finally {
      await admin.end();
    }
    expect((await ws.run(['stop', '--group', 'beta'])).exitCode).toBe(0);
    const again = await ws.run(['start', '--group', 'beta', '--detach'], { env: env() });
    expect(again.exitCode, again.stderr).toBe(0);
    const reg = ws.registry();
    beta = `${reg.beta.url}/api/v1`;
    const list = await api(beta, '/vcons');
    expect(JSON.stringify(list.body)).toContain(secret);
  });

  test('a sort that spills is cut off by the temporary file limit', async () => {
    // 2,000 rows of one ~96 KB text: the sort spills past 64 MB after little work, so the limit,
    // not the statement timeout, ends it on a loaded machine too (3 million md5s took 20 s there).
    const query =
      "select g, w.h from generate_series(1, 2000) g cross join (select string_agg(md5(i::text), '') as h from generate_series(1, 3000) i) w order by g desc";
    const res = await fetch(`${alpha}/database/analyze`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query, analyze: true }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await res.json()) as { message: string };
    expect(res.status, JSON.stringify(body)).toBe(400);
    expect(body.message).toMatch(/temporary file or memory limit/);
  });

  test.runIf(!mode.env.VCON_LAUNCH_ROLES)('PostgreSQL itself holds the analyze role to SELECT on its own schema', async () => {
    const creds = JSON.parse(readFileSync(path.join(ws.instancesDir, 'credentials', 'alpha.json'), 'utf8'));
    const u = new URL(databaseUrl());
    u.username = creds.analyze_role;
    u.password = creds.analyze_password;
    const sql = postgres(u.toString(), { max: 1, onnotice: () => {} });
    try {
      const [s] =
        await sql`select current_setting('temp_file_limit') as t, current_setting('default_transaction_read_only') as ro, current_setting('statement_timeout') as st`;
      expect(s).toEqual({ t: '64MB', ro: 'on', st: '10s' });
      await expect(sql.unsafe(`select count(*) from "${ws.schemas.alpha}".vcons`)).resolves.toHaveLength(1);
      for (const q of [
        `select subject from "${beta_()}".vcons`,
        "select pg_read_file('/etc/hostname')",
        "select pg_ls_dir('.')",
        "select * from pg_create_logical_replication_slot('never_made', 'test_decoding')",
        "select current_setting('data_directory')",
        'select * from pg_hba_file_rules',
      ]) {
        await expect(sql.unsafe(q), q).rejects.toMatchObject({ code: expect.stringMatching(/^(42501|25006)$/) });
      }
      await expect(sql.begin('read write', (tx) => tx.unsafe(`delete from "${ws.schemas.alpha}".vcons`))).rejects.toMatchObject({ code: '42501' });
      // Other roles' sessions show no query text.
      const texts = await sql<{ q: string }[]>`select query as q from pg_stat_activity where usename <> current_user and usename is not null`;
      expect(texts.every((t) => t.q === '<insufficient privilege>')).toBe(true);
    } finally {
      await sql.end();
    }
  });

  test("alpha's own statements still run, as a restricted identity with roles", async () => {
    const ok = await api(alpha, '/database/analyze', {
      method: 'POST',
      json: {
        query: "select count(*), max(subject), string_agg(lower(subject), ',') from vcons where created_at > now() - interval '1 day'",
        analyze: true,
      },
    });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.data.note).toContain(
      mode.env.VCON_LAUNCH_ROLES === 'off' ? "the server's own database user" : "a role that may only read this group's tables",
    );
    const tool = await mcp.call('analyze_query', { query: 'select uuid, subject from vcons order by created_at desc limit 5' });
    expect(tool.isError, textOf(tool)).toBeFalsy();
    // A data error of alpha's statement says what went wrong without echoing the value.
    const bad = await api(alpha, '/database/analyze', { method: 'POST', json: { query: "select 'alpha-value'::int" } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/invalid input syntax for type integer/);
    expect(bad.body.message).not.toContain('alpha-value');
  });
});

describe('the analyze connection is discarded after each call', () => {
  test('a session-level advisory lock taken by a statement is gone once the call returns', async () => {
    const schema = `analyze_conn_${randomBytes(4).toString('hex')}`;
    const key = randomBytes(4).readInt32BE(0);
    // The plan check is the service's; here it lets everything through, to see what PostgreSQL keeps.
    const analyzer = createAnalyzeRepo({ url: databaseUrl(), schema });
    const r = await analyzer.explain(`select pg_advisory_lock(${key})`, {
      analyze: true,
      timeoutMs: 5_000,
      workMemKb: 1024,
      tempFileLimitKb: 1024,
      inspect: () => undefined,
    });
    expect(JSON.stringify(r.plan)).toContain('pg_advisory_lock');
    const admin = adminSql();
    try {
      // The lock was taken (the statement ran) and released with the connection.
      const held = await admin`select 1 from pg_locks where locktype = 'advisory' and objid = ${key >>> 0} and granted`;
      expect(held).toHaveLength(0);
      const [{ got }] = await admin<{ got: boolean }[]>`select pg_try_advisory_lock(${key}) as got`;
      expect(got).toBe(true);
      await admin`select pg_advisory_unlock(${key})`;
    } finally {
      await admin.end();
    }
  });
});
