// The group roles' passwords, checked by PostgreSQL itself: the shared test server trusts every
// connection, so this starts a PostgreSQL 15 of its own whose pg_hba.conf asks every connection
// for a SCRAM-SHA-256 password, provisions two groups through the launcher, and logs in as each
// role with its own password, with the other group's, and with none. Stopped after.
import { chmodSync, chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort } from '../../src/db/embedded.js';
import { pgbouncerInstalled, startPgBouncer } from '../../scripts/bench/pgbouncer.js';
import { api, createWorkspace, KEY, type Workspace } from './helpers.js';

const BIN = '/usr/lib/postgresql/15/bin';
const isRoot = process.getuid?.() === 0;

/** The group's DATABASE_URL as provision wrote it into its env file. */
const urlOf = (ws: Workspace, group: string) => new URL(/^DATABASE_URL=(.*)$/m.exec(readFileSync(path.join(ws.envDir, `${group}.env`), 'utf8'))![1]);

/** Logs in with `url` and answers current_user, or the error PostgreSQL (or the driver) gave. */
async function login(url: URL): Promise<{ user?: string; code?: string; message?: string }> {
  const sql = postgres(url.href, { max: 1, connect_timeout: 10, onnotice: () => {} });
  try {
    const [r] = await sql<{ u: string }[]>`select current_user as u`;
    return { user: r.u };
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  } finally {
    await sql.end({ timeout: 1 }).catch(() => undefined);
  }
}

describe.skipIf(!isRoot)('group roles on a PostgreSQL 15 that checks passwords (scram-sha-256)', () => {
  let ws: Workspace;
  let dir: string;
  let data: string;
  const adminPassword = randomBytes(12).toString('hex');
  // initdb and postgres refuse to run as root: they run as the postgres OS user.
  const asPostgres = (cmd: string, args: string[]) => execa('runuser', ['-u', 'postgres', '--', path.join(BIN, cmd), ...args]);

  beforeAll(async () => {
    ws = createWorkspace(['pwa', 'pwb']);
    dir = path.join(ws.dir, 'pg15');
    data = path.join(dir, 'data');
    mkdirSync(data, { recursive: true });
    chmodSync(ws.dir, 0o755);
    const pwfile = path.join(dir, 'pw');
    writeFileSync(pwfile, `${adminPassword}\n`);
    const [uid, gid] = await Promise.all([execa('id', ['-u', 'postgres']), execa('id', ['-g', 'postgres'])]);
    for (const p of [dir, data, pwfile]) chownSync(p, Number(uid.stdout), Number(gid.stdout));
    await asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwfile}`, '-E', 'UTF8', '--no-sync']);
    // Every connection, local or TCP, of every user must give its password.
    writeFileSync(path.join(data, 'pg_hba.conf'), 'local all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n');
    const port = await freePort();
    await asPostgres('pg_ctl', [
      '-D',
      data,
      '-w',
      '-l',
      path.join(dir, 'log'),
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      'start',
    ]);
    ws.writeEnv('shared', {
      DATABASE_URL: `postgres://postgres:${adminPassword}@127.0.0.1:${port}/postgres`,
      API_KEYS: KEY,
      LOG_LEVEL: 'warn',
      EMBEDDINGS_PROVIDER: 'hashing',
    });
    for (const g of ['shared', 'pwa', 'pwb']) chmodSync(path.join(ws.envDir, `${g}.env`), 0o600);
  }, 120_000);

  afterAll(async () => {
    await ws?.run(['stop', '--all']);
    if (data) await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => undefined);
    await ws?.cleanup();
  });

  test("each provisioned role logs in with its own password, not with the other group's nor with none", async () => {
    const r = await ws.run(['provision', '--group', 'pwa', '--group', 'pwb']);
    expect(r.exitCode, r.stderr).toBe(0);
    const a = urlOf(ws, 'pwa');
    const b = urlOf(ws, 'pwb');
    expect(a.username).not.toBe(b.username);
    expect(a.password).not.toBe(b.password);

    expect(await login(a)).toEqual({ user: decodeURIComponent(a.username) });
    expect(await login(b)).toEqual({ user: decodeURIComponent(b.username) });
    const withOthers = new URL(a.href);
    withOthers.password = b.password;
    expect(await login(withOthers)).toMatchObject({ code: '28P01' });
    const without = new URL(a.href);
    without.password = '';
    expect((await login(without)).user).toBeUndefined();
    // The admin's URL without its password is refused too: nothing here is trusted.
    const admin = new URL(`postgres://postgres@${a.host}/postgres`);
    expect((await login(admin)).user).toBeUndefined();
  }, 120_000);

  // PostgreSQL 14 and later store SCRAM verifiers: PgBouncer must log in to the server with SCRAM,
  // which an md5 secret in its auth file cannot do.
  test.skipIf(!pgbouncerInstalled && process.env.CI !== 'true')(
    'the PgBouncer files export writes log each group in through a real PgBouncer, and refuse a wrong password',
    async () => {
      const out = path.join(ws.dir, 'pgbouncer-export');
      const r = await ws.run(['export', '--target', 'pgbouncer', '--group', 'pwa', '--group', 'pwb', '--out', out]);
      expect(r.exitCode, r.stderr).toBe(0);
      const bouncer = await startPgBouncer({
        exported: { ini: readFileSync(path.join(out, 'pgbouncer.ini'), 'utf8'), userlist: readFileSync(path.join(out, 'userlist.txt'), 'utf8') },
      });
      try {
        for (const g of ['pwa', 'pwb']) {
          const direct = urlOf(ws, g);
          const through = new URL(bouncer.url(decodeURIComponent(direct.username), decodeURIComponent(direct.password), 'postgres'));
          expect(await login(through)).toEqual({ user: decodeURIComponent(direct.username) });
          through.password = 'wrong';
          expect((await login(through)).user).toBeUndefined();
        }
      } finally {
        await bouncer.stop();
      }
    },
    120_000,
  );

  test('the group then starts through the launcher and serves with its own role', async () => {
    const r = await ws.run(['start', '--group', 'pwa', '--detach']);
    expect(r.exitCode, r.stderr).toBe(0);
    const { pwa } = ws.registry();
    expect(pwa.role).toBe(decodeURIComponent(urlOf(ws, 'pwa').username));
    const created = await api(`${pwa.url}${pwa.api_base_path}`, '/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: 'scram' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }, 120_000);
});
