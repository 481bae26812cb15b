// `check` refuses what `start` would refuse (an unreachable database included: not checked is not
// valid), shows typo warnings beside errors, takes --instances-dir, and answers about groups on the
// embedded database without starting it.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createWorkspace, type Workspace } from './helpers.js';

describe('vcon-launch check', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = createWorkspace(['good']);
  });
  afterAll(async () => {
    await ws?.cleanup();
  });

  test('a group whose database cannot be reached fails check, as it would fail start', async () => {
    ws.writeEnv('away', { SUPABASE_DB_SCHEMA: 'l_away_x', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' });
    try {
      const r = await ws.run(['check']);
      expect(r.exitCode, r.stdout).toBe(1);
      expect(r.stdout).toMatch(
        /FAIL\s+\S*away\.env[^\n]*\n\s+- DATABASE_URL: cannot reach the database postgres@127\.0\.0\.1:1\/test: .*ECONNREFUSED/,
      );
      expect(r.stdout).toMatch(/FAIL\s+connection budget of server 127\.0\.0\.1:1\n\s+- cannot reach the server/);
      expect(r.stdout).not.toContain('valid');
      expect(r.stdout).not.toContain('fit the connection budget');
      const start = await ws.run(['start', '--group', 'away', '--detach']);
      expect(start.exitCode).not.toBe(0);
    } finally {
      ws.writeEnv('away', { SUPABASE_DB_SCHEMA: 'l_away_x' });
    }
  });

  test('unknown variables are shown beside the errors of the same file', async () => {
    ws.writeEnv('typos', { SUPABASE_DB_SCHEMA: 'l_typos_x', API_KEY: 'k', EMBEDINGS_PROVIDER: 'hashing', DB_POOL_MAX: 'many' });
    try {
      const r = await ws.run(['check']);
      expect(r.exitCode).toBe(1);
      expect(r.stdout).toMatch(
        /FAIL\s+\S*typos\.env\n\s+- DB_POOL_MAX: [^\n]*\n\s+warning: API_KEY is not a variable the server reads \(typo\?\)\n\s+warning: EMBEDINGS_PROVIDER is not a variable/,
      );
    } finally {
      ws.writeEnv('typos', { SUPABASE_DB_SCHEMA: 'l_typos_x' });
    }
  });

  test('takes --instances-dir, and answers for a group on the embedded database without starting it', async () => {
    const dataDir = path.join(ws.dir, 'data');
    // No DATABASE_URL in its own file and none in shared.env for this one: the embedded cluster.
    ws.writeEnv('shared', { API_KEYS: 'k', LOG_LEVEL: 'warn', EMBEDDINGS_PROVIDER: 'hashing' });
    ws.writeEnv('good', { SUPABASE_DB_SCHEMA: ws.schemas.good, VCON_DATA_DIR: dataDir });
    ws.writeEnv('away', { SUPABASE_DB_SCHEMA: 'l_away_x', VCON_DATA_DIR: dataDir });
    ws.writeEnv('typos', { SUPABASE_DB_SCHEMA: 'l_typos_x', VCON_DATA_DIR: dataDir });
    const r = await ws.run(['check', '--instances-dir', path.join(ws.dir, 'elsewhere')]);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/ok\s+\S*good\.env: [^\n]*database embedded/);
    expect(r.stdout).toMatch(/ok\s+connection budget of server embedded/);
    expect(existsSync(path.join(dataDir, 'embedded'))).toBe(false);
  });
});
