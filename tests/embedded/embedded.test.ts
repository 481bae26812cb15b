// The embedded default database, exercised for real (CI runs this file without TEST_DATABASE_URL).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
    expect(a.url).toMatch(/^postgres:\/\/postgres:[0-9a-f]{48}@127\.0\.0\.1:\d+\/postgres$/);
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

  it("refuses the superuser without its password (stored 0600, this user's only); the URL it hands out works", async () => {
    const pg = await acquireEmbeddedPostgres(base);
    try {
      const file = path.join(base, 'credentials', 'postgres.password');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
      expect(pg.url).toContain(`:${readFileSync(file, 'utf8').trim()}@`);
      await expect(connectAs(`postgres://postgres@127.0.0.1:${pg.port}/postgres`)).rejects.toThrow();
      await expect(connectAs(`postgres://postgres:wrong@127.0.0.1:${pg.port}/postgres`)).rejects.toMatchObject({ code: '28P01' });
      expect(await connectAs(pg.url)).toBe('postgres');
    } finally {
      await pg.release();
    }
  });

  it('converts a cluster that trusted local connections (made before the superuser had a password) on its next start', async () => {
    const old = mkdtempSync(path.join(os.tmpdir(), 'vcon-emb-old-'));
    try {
      const first = await acquireEmbeddedPostgres(old);
      await first.release();
      // What earlier versions left: trust in pg_hba.conf and no stored password.
      const hba = path.join(old, 'pgdata', 'pg_hba.conf');
      writeFileSync(hba, readFileSync(hba, 'utf8').replace(/scram-sha-256\s*$/gm, 'trust'));
      rmSync(path.join(old, 'credentials'), { recursive: true, force: true });
      const pg = await acquireEmbeddedPostgres(old);
      try {
        expect(readFileSync(hba, 'utf8')).not.toMatch(/^\s*(local|host)\S*\s.*\strust\s*$/m);
        await expect(connectAs(`postgres://postgres@127.0.0.1:${pg.port}/postgres`)).rejects.toThrow();
        expect(await connectAs(pg.url)).toBe('postgres');
      } finally {
        await pg.release();
      }
    } finally {
      await new Promise((r) => execFile('pkill', ['-f', `-D ${path.join(old, 'pgdata')}`], r));
      rmSync(old, { recursive: true, force: true });
    }
  }, 120_000);
});

/** current_user of a fresh connection to `url` (rejects when PostgreSQL refuses it). */
async function connectAs(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [row] = await sql<{ u: string }[]>`select current_user as u`;
    return row.u;
  } finally {
    await sql.end({ timeout: 1 });
  }
}
