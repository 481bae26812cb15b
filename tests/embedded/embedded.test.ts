// The embedded default database, exercised for real (CI runs this file without TEST_DATABASE_URL).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import postgres from 'postgres';
import { acquireEmbeddedPostgres } from '../../src/db/embedded.js';
import { isAlive as alive } from '../../src/process.js';
import { packageRoot } from '../../src/paths.js';

const base = mkdtempSync(path.join(os.tmpdir(), 'vcon-emb-'));
afterAll(async () => {
  // Make sure nothing is left running, then remove the cluster.
  await new Promise((r) => execFile('pkill', ['-f', `-D ${path.join(base, 'pgdata')}`], r));
  rmSync(base, { recursive: true, force: true });
});

// pg_ctl stop -w returns once postmaster.pid is gone, a moment before the process itself exits.
const exited = (pid: number) => vi.waitFor(() => expect(alive(pid)).toBe(false), { timeout: 60_000, interval: 50 });

const postmasterPid = () => Number(readFileSync(path.join(base, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);

describe('embedded PostgreSQL', () => {
  it('starts on 127.0.0.1, is shared by two users, and stops when the last one leaves', async () => {
    const a = await acquireEmbeddedPostgres(base);
    const b = await acquireEmbeddedPostgres(base);
    expect(b.url).toBe(a.url);
    expect(a.url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);
    const sql = postgres(a.url, { max: 1 });
    const [row] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
    expect(Number(row.v.split('.')[0])).toBeGreaterThanOrEqual(15);
    await sql.end();
    const pid = postmasterPid();
    await a.release();
    expect(alive(pid)).toBe(true);
    await b.release();
    await exited(pid);
  });

  it('recovers from a postmaster orphaned by a SIGKILLed owner', async () => {
    const script = `
      import { acquireEmbeddedPostgres } from ${JSON.stringify(path.join(packageRoot, 'src/db/embedded.ts'))};
      const pg = await acquireEmbeddedPostgres(${JSON.stringify(base)});
      process.stdout.write(pg.url + '\\n');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: packageRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d) => resolve(String(d).trim()));
      child.on('exit', (code) => reject(new Error(`child exited ${code}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const orphan = postmasterPid();
    expect(alive(orphan)).toBe(true);

    const next = await acquireEmbeddedPostgres(base);
    expect(next.url).toBe(url);
    const sql = postgres(next.url, { max: 1 });
    expect((await sql`select 1 as ok`)[0].ok).toBe(1);
    await sql.end();
    await next.release();
    await exited(orphan);
  });
});
