// The patched postgres.js (scripts/patch-postgres.mjs): the install fails rather than skip the
// patch, the installed driver carries it, and a query that fails half-way through its rows never
// leaves a pooled connection that answers the next query wrongly (porsager/postgres#1119, #1181),
// and a failed type fetch of a new connection never ends the process (#1192).
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIND_PATCH_MARK, DRIVER_PATCH_MARKS, NODELAY_PATCH_MARK, PGBOUNCER_PATCH_MARK, assertDriverPatched } from '../../src/db/client.js';
import { databaseUrl } from '../helpers/db.js';

const run = promisify(execFile);
const SCRIPT = join(import.meta.dirname, '../../scripts/patch-postgres.mjs');

interface Patch {
  name: string;
  mark: string;
  edits: { from: string; to: string }[];
}
interface PatchModule {
  PINNED_VERSION: string;
  CONNECTION_FILES: string[];
  PATCHES: Patch[];
  postgresRoot(): string;
}
// A path, not a literal: the script is plain JavaScript with no type declarations.
const mod = (await import(pathToFileURL(SCRIPT).href)) as PatchModule;

/** The pristine text of an installed (patched) connection.js: every edit undone. */
const unpatch = (text: string) => mod.PATCHES.reduceRight((t, p) => p.edits.reduceRight((u, e) => u.replace(e.to, e.from), t), text);

const runScript = (root: string) =>
  run(process.execPath, [SCRIPT, root]).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );

describe('the postgres.js patch', () => {
  const root = mod.postgresRoot();
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'vcon-pgpatch-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A copy of the installed package with the given version and unpatched (or given) sources. */
  const fakePackage = (name: string, version: string, edit: (text: string) => string = unpatch) => {
    const copy = join(dir, name);
    cpSync(root, copy, { recursive: true });
    const pkg = JSON.parse(readFileSync(join(copy, 'package.json'), 'utf8'));
    writeFileSync(join(copy, 'package.json'), JSON.stringify({ ...pkg, version }));
    for (const rel of mod.CONNECTION_FILES) writeFileSync(join(copy, rel), edit(readFileSync(join(root, rel), 'utf8')));
    return copy;
  };

  it('is applied to the postgres.js that Node loads, in both module formats', () => {
    const marks = [...DRIVER_PATCH_MARKS, PGBOUNCER_PATCH_MARK, NODELAY_PATCH_MARK, BIND_PATCH_MARK];
    expect(mod.PATCHES.map((p) => p.mark)).toEqual(marks);
    for (const rel of mod.CONNECTION_FILES) {
      const text = readFileSync(join(root, rel), 'utf8');
      for (const mark of marks) expect(text, `${rel} lacks ${mark}`).toContain(mark);
    }
    expect(() => assertDriverPatched({ pgbouncer: true })).not.toThrow();
  });

  it('runs from postinstall and ships with the package', () => {
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8'));
    expect(pkg.scripts.postinstall).toBe('node scripts/patch-postgres.mjs');
    expect(pkg.files).toContain('scripts/patch-postgres.mjs');
    expect(pkg.dependencies.postgres).toBe(mod.PINNED_VERSION);
  });

  it('patches a pristine copy of the pinned version to exactly the installed text, and a second run changes nothing', async () => {
    const copy = fakePackage('pristine', mod.PINNED_VERSION);
    const first = await runScript(copy);
    expect(first.code, first.out).toBe(0);
    expect(first.out).toMatch(/applied closed-socket guard.*row-count reset/);
    for (const rel of mod.CONNECTION_FILES) expect(readFileSync(join(copy, rel), 'utf8')).toBe(readFileSync(join(root, rel), 'utf8'));
    const second = await runScript(copy);
    expect(second.code).toBe(0);
    expect(second.out).toMatch(/already patched/);
  });

  it.each([
    ['TCP_NODELAY', NODELAY_PATCH_MARK],
    ['one-copy bind', BIND_PATCH_MARK],
  ])('adds %s to an install patched before it, which still runs meanwhile (speed only)', async (name, mark) => {
    const patch = mod.PATCHES.find((p) => p.mark === mark)!;
    const undo = (t: string) => patch.edits.reduceRight((u, e) => u.replace(e.to, e.from), t);
    const copy = fakePackage(`before-${mark.replace(/\W+/g, '-')}`, mod.PINNED_VERSION, undo);
    expect(readFileSync(join(copy, 'src/connection.js'), 'utf8')).not.toContain(mark);
    // The startup check asks only for the patches that keep answers right.
    expect(DRIVER_PATCH_MARKS).not.toContain(mark);
    const r = await runScript(copy);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(new RegExp(`applied ${name}$`, 'm'));
    for (const rel of mod.CONNECTION_FILES) expect(readFileSync(join(copy, rel), 'utf8')).toBe(readFileSync(join(root, rel), 'utf8'));
  });

  it('fails the install on another version of postgres.js instead of skipping the patch', async () => {
    const r = await runScript(fakePackage('other-version', '3.5.0'));
    expect(r.code).toBe(1);
    expect(r.out).toContain('postgres.js 3.5.0 is installed');
    expect(r.out).toContain(`written for ${mod.PINNED_VERSION}`);
  });

  it('fails the install when the pinned version does not hold the code it edits', async () => {
    const r = await runScript(
      fakePackage('changed-code', mod.PINNED_VERSION, (t) =>
        unpatch(t).replace('result = new Result()\n    connectTimer', 'result = new Result();\n    connectTimer'),
      ),
    );
    expect(r.code).toBe(1);
    expect(r.out).toContain('row-count reset');
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

  it('leaves the connection answering the next query exactly (#1119)', async () => {
    await expect(failing()).rejects.toThrow(/division by zero/);
    const rows = await sql`select x from generate_series(1, 5) x`;
    expect(rows.length).toBe(5);
    expect(rows.map((r) => r.x)).toEqual([1, 2, 3, 4, 5]);
  });

  it('leaves a query pipelined behind it exact (#1181)', async () => {
    const a = failing().catch((e: Error) => e);
    const b = sql`select x from generate_series(1, 5) x`;
    expect(String(await a)).toMatch(/division by zero/);
    expect((await b).map((r) => r.x)).toEqual([1, 2, 3, 4, 5]);
  });

  it('sends every parameter exactly in its one-copy Bind message, through a cursor too', async () => {
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
  // (57014); unpatched, its rejection is unhandled and ends the process (#1192). A child process,
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

  it('fails the waiting query, never the process (#1192)', async () => {
    const root = mod.postgresRoot();
    const patched = await attempt(root);
    expect(patched).toEqual({ unhandled: 0, code: '57014' });
    // The control: the installed text with this one patch undone.
    const patch = mod.PATCHES.find((p) => p.mark === TYPE_FETCH_MARK)!;
    const copy = join(dir, 'without-type-fetch-patch');
    cpSync(root, copy, { recursive: true });
    for (const rel of mod.CONNECTION_FILES) {
      writeFileSync(
        join(copy, rel),
        patch.edits.reduceRight((t, e) => t.replace(e.to, e.from), readFileSync(join(root, rel), 'utf8')),
      );
      expect(readFileSync(join(copy, rel), 'utf8')).not.toContain(TYPE_FETCH_MARK);
    }
    expect((await attempt(copy)).unhandled).toBeGreaterThan(0);
  });
});
