// The patched postgres.js (patches/postgres+3.4.9.patch, applied by patch-package at install): the
// installed driver carries every correctness fix, a query that fails half-way through its rows never
// leaves a pooled connection that answers the next query wrongly (porsager/postgres#1119 and #1181), and
// a failed type fetch of a new connection never ends the process (porsager/postgres#1192).
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER_PATCH_MARKS, PGBOUNCER_PATCH_MARK, assertDriverPatched, createSql, socketOption } from '../../src/db/client.js';
import { databaseUrl } from '../helpers/db.js';

const run = promisify(execFile);
const REPO = join(import.meta.dirname, '../..');
const PATCH = join(REPO, 'patches/postgres+3.4.9.patch');
const CONNECTION_FILES = ['src/connection.js', 'cjs/src/connection.js'];
/** The installed package's root, the one `import 'postgres'` loads (its CommonJS entry is <root>/cjs/src/index.js). */
const postgresRoot = () => join(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');

/** The lines one hunk group of the patch adds and removes for a mark, from the diff's text. */
function hunkOf(mark: string): { added: string[]; removed: string[] } {
  const lines = readFileSync(PATCH, 'utf8').split('\n');
  const at = lines.findIndex((l) => l.startsWith('+') && l.includes(mark));
  // The hunk around the mark: from its @@ header to the next one.
  let from = at;
  while (from > 0 && !lines[from].startsWith('@@')) from--;
  let to = at + 1;
  while (to < lines.length && !lines[to].startsWith('@@') && !lines[to].startsWith('diff ')) to++;
  const body = lines.slice(from + 1, to);
  return {
    added: body.filter((l) => l.startsWith('+')).map((l) => l.slice(1)),
    removed: body.filter((l) => l.startsWith('-')).map((l) => l.slice(1)),
  };
}

describe('the postgres.js patch', () => {
  it('is applied to the postgres.js that Node loads, in both module formats, with every mark the server checks', () => {
    const patch = readFileSync(PATCH, 'utf8');
    for (const mark of [...DRIVER_PATCH_MARKS, PGBOUNCER_PATCH_MARK]) {
      // Each mark is in the diff twice (ESM and CommonJS) and in both installed files.
      expect(patch.split(mark).length - 1, mark).toBe(2);
      for (const rel of CONNECTION_FILES) expect(readFileSync(join(postgresRoot(), rel), 'utf8'), `${rel} lacks ${mark}`).toContain(mark);
    }
    expect(() => assertDriverPatched({ pgbouncer: true })).not.toThrow();
  });

  it('runs from postinstall with patch-package, which ships with the package, and fails the install on a mismatch', () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
    expect(pkg.scripts.postinstall).toBe('patch-package --error-on-fail --error-on-warn');
    expect(pkg.dependencies['patch-package']).toMatch(/^\d/);
    expect(pkg.files).toContain('patches');
    // The diff is written for the pinned version: another one warns, and --error-on-warn fails it.
    expect(pkg.dependencies.postgres).toBe('3.4.9');
  });

  it('carries only fixes with an upstream link, documented in patches/README.md', () => {
    const readme = readFileSync(join(REPO, 'patches/README.md'), 'utf8');
    const marks = [...readFileSync(PATCH, 'utf8').matchAll(/\/\* vcon-launch: ([^*]+) \*\//g)].map((m) => m[1].trim());
    for (const mark of new Set(marks)) {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${mark}\``));
      expect(row, `patches/README.md has no row for ${mark}`).toBeDefined();
      expect(row).toMatch(/porsager\/postgres#\d+/);
    }
  });

  it('the server refuses a driver without a correctness fix', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcon-pgpatch-'));
    try {
      const copy = join(dir, 'postgres');
      cpSync(postgresRoot(), copy, { recursive: true });
      const { added } = hunkOf('/* vcon-launch: row-count reset */');
      for (const rel of CONNECTION_FILES) {
        const text = readFileSync(join(copy, rel), 'utf8');
        writeFileSync(join(copy, rel), text.replace(`${added[0]}\n`, ''));
        expect(readFileSync(join(copy, rel), 'utf8')).not.toContain('row-count reset');
      }
      expect(() => assertDriverPatched({ root: copy })).toThrow(/row-count reset \*\/ missing in src\/connection\.js/);
      expect(() => assertDriverPatched({ root: postgresRoot(), pgbouncer: true })).not.toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('TCP_NODELAY through the socket option', () => {
  it('is used for one TCP host, not for a Unix socket or a host list', () => {
    expect(socketOption('postgres://u@127.0.0.1:5432/db').socket).toBeTypeOf('function');
    expect(socketOption('postgres://u@db.example:5432/db?sslmode=require').socket).toBeTypeOf('function');
    expect(socketOption('postgres://u@%2Fvar%2Frun%2Fpostgresql/db').socket).toBeUndefined();
    expect(socketOption('postgres://u@/db?host=/var/run/postgresql').socket).toBeUndefined();
    expect(socketOption('postgres://u@a:5432,b:5432/db').socket).toBeUndefined();
  });

  it("connects through it, answers queries, and fails an unreachable server the driver's usual way", async () => {
    const sql = createSql({ url: databaseUrl(), schema: 'public', max: 1 });
    try {
      const [r] = await sql<{ x: number }[]>`select 1 as x`;
      expect(r.x).toBe(1);
    } finally {
      await sql.end({ timeout: 5 });
    }
    // A port nothing listens on: the driver's own error and close handlers see the refusal.
    const free = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as net.AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const gone = createSql({ url: `postgres://postgres@127.0.0.1:${free}/test`, schema: 'public', max: 1 });
    try {
      await expect(gone`select 1`).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      await gone.end({ timeout: 1 });
    }
  });
});

describe('a query that fails half-way through its rows', () => {
  // One connection, so every query below shares the connection the failing one used.
  let sql: postgres.Sql;
  beforeAll(() => {
    sql = postgres(databaseUrl(), { max: 1, onnotice: () => {} });
  });
  afterAll(() => sql?.end({ timeout: 5 }));

  // Rows 1-3 are sent, then row 4 divides by zero: the error arrives after three DataRows.
  const failing = () => sql`select i, 1 / (4 - i) as boom from generate_series(1, 10) i`;

  it('leaves the connection answering the next query exactly (porsager/postgres#1119)', async () => {
    await expect(failing()).rejects.toThrow(/division by zero/);
    const rows = await sql`select x from generate_series(1, 5) x`;
    expect(rows.length).toBe(5);
    expect(rows.map((r) => r.x)).toEqual([1, 2, 3, 4, 5]);
  });

  it('leaves a query pipelined behind it exact (porsager/postgres#1181)', async () => {
    const a = failing().catch((e: Error) => e);
    const b = sql`select x from generate_series(1, 5) x`;
    expect(String(await a)).toMatch(/division by zero/);
    expect((await b).map((r) => r.x)).toEqual([1, 2, 3, 4, 5]);
  });

  it('sends every parameter exactly in its Bind message, through a cursor too', async () => {
    // Multibyte text (1.3 MB of it in one parameter), empty strings, nulls, 600 parameters, bytea and json.
    const big = 'ü€😀x'.repeat(100_000);
    const texts = ['', 'a', null, 'naïve ☕ 😀', big, ...Array.from({ length: 295 }, (_, i) => `p${i}`)];
    const rows = texts.map((s, i) => [String(i), s]);
    const back = await sql<{ i: number; s: string | null }[]>`
      select i::int, s::text from (values ${sql(rows as never)}) as t(i, s) order by 1`;
    expect(back.map((r) => r.s)).toEqual(texts);
    const seen: (string | null)[] = [];
    await sql<{ s: string | null }[]>`select s::text from (values ${sql(rows as never)}) as t(i, s) order by i::int`.cursor(64, (chunk) => {
      seen.push(...chunk.map((r) => r.s));
    });
    expect(seen).toEqual(texts);
    const bytes = Buffer.from([0, 1, 127, 128, 255]);
    const [r] = await sql`select ${bytes}::bytea as b, ${sql.json({ k: 'ü "q"', n: [1, null] })}::json as j, ${null}::text as z`;
    expect(r).toEqual({ b: bytes, j: { k: 'ü "q"', n: [1, null] }, z: null });
  });

  it('answers every query of mixed concurrent traffic with failures among it correctly', async () => {
    const pool = postgres(databaseUrl(), { max: 3, onnotice: () => {} });
    try {
      const boom = (db: postgres.Sql) => db`select i, 1 / (4 - i) as boom from generate_series(1, 10) i`;
      const ops = Array.from({ length: 400 }, (_, i) => {
        if (i % 4 === 0)
          return boom(pool).then(
            () => `query ${i}: no error`,
            (e: Error) => (/division by zero/.test(e.message) ? 'ok' : e.message),
          );
        const n = (i % 7) + 1;
        return pool`select x, ${i}::int as tag from generate_series(1, ${n}::int) x`.then((rows) => {
          const good = rows.length === n && rows.every((r, k) => r.x === k + 1 && r.tag === i);
          return good ? 'ok' : `query ${i}: ${JSON.stringify(rows)}`;
        });
      });
      const answers = await Promise.all(ops);
      expect(answers.filter((a) => a !== 'ok')).toEqual([]);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });
});

describe("a new connection's array-type fetch that fails", () => {
  // A 1 ms statement_timeout cancels the driver's own pg_type query on every new connection
  // (57014); unpatched, its rejection is unhandled and ends the process (porsager/postgres#1192). A child process,
  // so the runner's own rejection handlers are not the ones observing it; the same script against
  // a copy without the patch shows the fetch really failed.
  const TYPE_FETCH_MARK = '/* vcon-launch: type-fetch rejection */';
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'vcon-typefetch-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const attempt = async (pkgRoot: string) => {
    const script = `
      const { default: postgres } = await import(process.env.PG);
      let unhandled = 0;
      process.on('unhandledRejection', () => unhandled++);
      const sql = postgres(process.env.URL, { max: 1, onnotice: () => {}, connection: { statement_timeout: 1 } });
      const code = await sql\`select 1\`.then(() => null, (e) => e.code ?? e.message);
      await sql.end({ timeout: 5 });
      await new Promise((r) => setImmediate(r));
      console.log(JSON.stringify({ unhandled, code }));`;
    const r = await run(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, URL: databaseUrl(), PG: pathToFileURL(join(pkgRoot, 'src/index.js')).href },
    });
    return JSON.parse(r.stdout.trim()) as { unhandled: number; code: string | null };
  };

  it('fails the waiting query, never the process (porsager/postgres#1192)', async () => {
    const root = postgresRoot();
    const patched = await attempt(root);
    expect(patched).toEqual({ unhandled: 0, code: '57014' });
    // The control: the installed text with this one hunk of the diff undone.
    const { added, removed } = hunkOf(TYPE_FETCH_MARK);
    const copy = join(dir, 'without-type-fetch-patch');
    cpSync(root, copy, { recursive: true });
    for (const rel of CONNECTION_FILES) {
      writeFileSync(join(copy, rel), readFileSync(join(root, rel), 'utf8').replace(added.join('\n'), removed.join('\n')));
      expect(readFileSync(join(copy, rel), 'utf8')).not.toContain(TYPE_FETCH_MARK);
    }
    expect((await attempt(copy)).unhandled).toBeGreaterThan(0);
  });
});
