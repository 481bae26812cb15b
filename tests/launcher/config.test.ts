// Env validation before anything starts (bad port, duplicate schema, invalid schema name), `check`,
// and `migrate` / `migrate --status` without servers.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { CLI, cliEnv, createWorkspace, serverPidsForSchema, type Workspace } from './helpers.js';

describe('VCON_VALIDATION in env files', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['modes']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('check takes the three modes and names a bad one with the choices', async () => {
    ws.writeEnv('modes', { SUPABASE_DB_SCHEMA: ws.schemas.modes, VCON_VALIDATION: 'lenient' });
    expect((await ws.run(['check'])).stdout).not.toMatch(/VCON_VALIDATION/);
    ws.writeEnv('modes', { SUPABASE_DB_SCHEMA: ws.schemas.modes, VCON_VALIDATION: 'loose' });
    const c = await ws.run(['check']);
    expect(c.exitCode).toBe(1);
    expect(c.stdout).toMatch(/FAIL\s+\S*modes\.env\n\s+- VCON_VALIDATION: must be one of strict, ietf, lenient/);
  });
});

describe('WEBHOOK_* in env files', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['hooks']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('check names a bad secret, URLs without one and a private literal without WEBHOOK_ALLOW_PRIVATE', async () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    ws.writeEnv('hooks', { SUPABASE_DB_SCHEMA: ws.schemas.hooks, WEBHOOK_URLS: 'https://hooks.example.com/in', WEBHOOK_SECRET: secret });
    expect((await ws.run(['check'])).stdout).not.toMatch(/WEBHOOK/);
    for (const [env, problem] of [
      [{ WEBHOOK_SECRET: 'hunter2' }, /WEBHOOK_SECRET: must be whsec_ followed by the base64/],
      [{ WEBHOOK_URLS: 'https://hooks.example.com/in' }, /WEBHOOK_SECRET: WEBHOOK_URLS is set/],
      [{ WEBHOOK_URLS: 'http://169.254.169.254/x', WEBHOOK_SECRET: secret }, /WEBHOOK_URLS: .*WEBHOOK_ALLOW_PRIVATE=true/],
    ] as const) {
      ws.writeEnv('hooks', { SUPABASE_DB_SCHEMA: ws.schemas.hooks, ...env });
      const c = await ws.run(['check']);
      expect(c.exitCode).toBe(1);
      expect(c.stdout).toMatch(problem);
      expect(c.stdout).not.toContain('hunter2');
    }
  });
});

describe('env validation', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['good']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('a bad port fails before anything starts, naming the file and the variable', async () => {
    ws.writeEnv('badport', { SUPABASE_DB_SCHEMA: 'l_badport_x', MCP_HTTP_PORT: '70000' });
    const r = await ws.run(['start', '--group', 'good', '--group', 'badport', '--detach']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('badport.env');
    expect(r.stderr).toMatch(/MCP_HTTP_PORT: must be between 0 and 65535, got 70000/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(ws.instancesDir)).toBe(false);
    expect(serverPidsForSchema(ws.schemas.good)).toEqual([]);
  });

  test('an invalid schema name and a duplicate schema are both reported, nothing started', async () => {
    ws.writeEnv('badschema', { SUPABASE_DB_SCHEMA: 'Bad-Name' });
    ws.writeEnv('twin', { SUPABASE_DB_SCHEMA: ws.schemas.good });
    const r = await ws.run(['start', '--group', 'good', '--group', 'badschema', '--group', 'twin']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/badschema\.env:\n\s+- SUPABASE_DB_SCHEMA: must be a PostgreSQL identifier/);
    expect(r.stderr).toMatch(new RegExp(`groups good, twin:\\n\\s+- SUPABASE_DB_SCHEMA: all use schema "${ws.schemas.good}"`));
    expect(existsSync(ws.instancesDir)).toBe(false);
    expect(serverPidsForSchema(ws.schemas.good)).toEqual([]);
  });

  test('two groups on one fixed port are refused', async () => {
    ws.writeEnv('p1', { SUPABASE_DB_SCHEMA: 'l_p1_x', MCP_HTTP_PORT: '39999' });
    ws.writeEnv('p2', { SUPABASE_DB_SCHEMA: 'l_p2_x', MCP_HTTP_PORT: '39999' });
    const r = await ws.run(['start', '--group', 'p1', '--group', 'p2']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/groups p1, p2:\n\s+- MCP_HTTP_PORT: all listen on port 39999/);
  });

  test('an unknown group names the known ones', async () => {
    const r = await ws.run(['start', '--group', 'nope']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/nope\.env:\n\s+- no such file; known groups: .*good/);
  });

  test('check reports every file: valid ones, each bad variable, collisions and typos', async () => {
    ws.writeEnv('typo', { SUPABASE_DB_SCHEMA: 'l_typo_x', MCP_HTTP_PROT: '1' });
    const r = await ws.run(['check']);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/ok\s+\S*shared\.env/);
    expect(r.stdout).toMatch(new RegExp(`ok\\s+\\S*good\\.env: schema ${ws.schemas.good}, label label-good, any free port`));
    expect(r.stdout).toMatch(/FAIL\s+\S*badport\.env\n\s+- MCP_HTTP_PORT/);
    expect(r.stdout).toMatch(/FAIL\s+\S*badschema\.env\n\s+- SUPABASE_DB_SCHEMA/);
    expect(r.stdout).toMatch(/FAIL\s+groups good, twin/);
    expect(r.stdout).toMatch(/FAIL\s+groups p1, p2/);
    expect(r.stdout).toMatch(/typo\.env[^\n]*\n\s+warning: MCP_HTTP_PROT is not a variable the server reads/);
  });

  test('an unknown MCP_TRANSPORT stops start and fails check, as it stops the server', async () => {
    ws.writeEnv('pigeon', { SUPABASE_DB_SCHEMA: 'l_pigeon_x', MCP_TRANSPORT: 'carrier-pigeon', MCP_HTTP_PORT: '70000' });
    const r = await ws.run(['start', '--group', 'pigeon', '--detach']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/pigeon\.env:\n\s+- MCP_TRANSPORT: must be stdio or http\n\s+- MCP_HTTP_PORT: must be between/);
    expect(existsSync(ws.instancesDir)).toBe(false);
    const c = await ws.run(['check']);
    expect(c.exitCode).toBe(1);
    expect(c.stdout).toMatch(/FAIL\s+\S*pigeon\.env\n\s+- MCP_TRANSPORT: must be stdio or http/);
  });

  test('check counts problems, not files, and warns about a group without API keys', async () => {
    ws.writeEnv('nokeys', { SUPABASE_DB_SCHEMA: 'l_nokeys_x', API_KEYS: '' });
    ws.writeEnv('stdio', { SUPABASE_DB_SCHEMA: 'l_stdio_x', MCP_TRANSPORT: 'stdio' });
    const r = await ws.run(['check']);
    expect(r.stdout).toMatch(/ok\s+\S*nokeys\.env[^\n]*\n\s+warning: API_KEYS is empty .* 503 auth_not_configured/);
    expect(r.stdout).toMatch(/ok\s+\S*stdio\.env[^\n]*\n\s+warning: MCP_TRANSPORT=stdio is ignored/);
    // badport 1, badschema 1, pigeon 2, twin collision 1, port collision 1: six problems in five subjects.
    // Warnings: nokeys, stdio, typo, and PUBLIC's CONNECT/TEMPORARY on the test server's databases.
    expect(r.stdout).toMatch(/^6 problem\(s\) in 5 file\(s\) or group set\(s\), 4 warning\(s\)$/m);
    for (const f of ['nokeys', 'stdio', 'pigeon']) ws.writeEnv(f, { SUPABASE_DB_SCHEMA: `l_${f}_ok` });
  });

  test('check passes on a clean directory', async () => {
    for (const f of ['badport', 'badschema', 'twin', 'p1', 'p2', 'typo', 'nokeys', 'stdio', 'pigeon'])
      ws.writeEnv(f, { SUPABASE_DB_SCHEMA: `l_${f}_ok` });
    const r = await ws.run(['check']);
    expect(r.exitCode, r.stdout).toBe(0);
    expect(r.stdout).toContain('file(s) valid');
  });

  test('migrate --status lists pending, migrate applies, then nothing is pending', async () => {
    const before = await ws.run(['migrate', '--group', 'good', '--status']);
    expect(before.exitCode, before.stderr).toBe(0);
    expect(before.stdout).toMatch(/^good {2}\d+ pending: 0001_schema, /m);
    const run = await ws.run(['migrate', '--group', 'good']);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/good\s+\S+\s+\S+\s+0001_schema/);
    const after = await ws.run(['migrate', '--group', 'good', '--status']);
    expect(after.stdout).toMatch(/^good {2}up to date \(\d+ migrations\)$/m);
    const json = JSON.parse((await ws.run(['migrate', '--group', 'good', '--status', '--json'])).stdout);
    expect(json[0]).toMatchObject({ group: 'good', schema: ws.schemas.good, status: { pending: [] } });
    expect(json[0].status.applied[0]).toMatchObject({ version: 1, name: '0001_schema', applied_at: expect.any(String) });
    const again = await ws.run(['migrate', '--group', 'good']);
    expect(again.stdout).toContain('none (up to date)');
  });
});

describe('committed env files', () => {
  test('env/example.env documents every variable of the server, one comment line each', async () => {
    const { EnvSchema } = await import('../../src/config.js');
    const text = readFileSync(path.join(packageRoot, 'env', 'example.env'), 'utf8');
    const lines = text.split('\n');
    const documented = lines.flatMap((l, i) => {
      const m = /^# ([A-Z][A-Z0-9_]+)=/.exec(l);
      return m ? [{ key: m[1], comment: lines[i - 1] }] : [];
    });
    expect(documented.map((d) => d.key).sort()).toEqual(Object.keys(EnvSchema.shape).sort());
    for (const d of documented) expect(d.comment, d.key).toMatch(/^# (?![A-Z][A-Z0-9_]+=).{10,}/);
  });

  test('env/demo.env and env/example.env pass check', async () => {
    const { execa } = await import('execa');
    const r = await execa(process.execPath, [CLI, 'check', '--env-dir', path.join(packageRoot, 'env')], {
      env: cliEnv(),
      extendEnv: false,
      reject: false,
    });
    expect(r.stdout).toMatch(/ok\s+\S*demo\.env: schema demo, label demo, any free port, database embedded/);
    expect(r.stdout).toMatch(/ok\s+\S*example\.env: documentation/);
  });
});
