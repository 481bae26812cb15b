// `vcon-launch import` of a generated corpus on the embedded PostgreSQL (goal: 100,000 files within 2 minutes): files of
// fixture-like vCons (3–10 KB, one per file, in directories of 1,000) written to a temporary
// directory, then imported into a stopped group through the CLI (a temporary instance), timed.
// With `roundTrip` (the dump section), that group is then dumped and the dump imported into a
// second group (scripts/bench/dump.ts).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { packageRoot } from '../../src/paths.js';
import { acquireEmbeddedPostgres } from '../../src/db/embedded.js';
import { dropGroupRoles } from '../../src/db/roles.js';
import { generateVcon } from './corpus.js';
import { measureRoundTrip, runMeasured } from './dump.js';
import { makeFigure, type Figure } from './stats.js';

export async function measureImport(opts: { count: number; seed: number; roundTrip?: boolean; log: (msg: string) => void }): Promise<Figure[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'vcon-bench-import-'));
  const schema = `bench_import_${randomBytes(4).toString('hex')}`;
  const backSchema = `${schema}_back`;
  const embedded = await acquireEmbeddedPostgres(path.join(packageRoot, '.vcon', 'embedded'));
  try {
    const files = path.join(dir, 'vcons');
    let bytes = 0;
    const tw = performance.now();
    for (let i = 0; i < opts.count; i++) {
      const sub = path.join(files, String(Math.floor(i / 1000)).padStart(4, '0'));
      if (i % 1000 === 0) mkdirSync(sub, { recursive: true });
      const text = JSON.stringify(generateVcon(opts.seed + 3, i));
      bytes += text.length;
      writeFileSync(path.join(sub, `${String(i).padStart(7, '0')}.json`), text);
    }
    opts.log(
      `  import: ${opts.count} files written (${(bytes / 1024 / opts.count).toFixed(1)} KB mean) in ${((performance.now() - tw) / 1000).toFixed(1)} s`,
    );
    const envDir = path.join(dir, 'env');
    mkdirSync(envDir);
    // No DATABASE_URL: the group runs on the embedded PostgreSQL of this checkout.
    writeFileSync(path.join(envDir, 'imp.env'), `SUPABASE_DB_SCHEMA=${schema}\nLOG_LEVEL=warn\nAPI_KEYS=bench-import-key\n`);
    writeFileSync(path.join(envDir, 'back.env'), `SUPABASE_DB_SCHEMA=${backSchema}\nLOG_LEVEL=warn\nAPI_KEYS=bench-import-key\n`);
    const cliArgs = ['--env-dir', envDir, '--instances-dir', path.join(dir, 'instances')];
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? os.tmpdir() };
    const r = await runMeasured(['import', files, '--group', 'imp', '--json', ...cliArgs], { cwd: dir, env });
    const seconds = r.seconds;
    if (r.exitCode !== 0) throw new Error(`vcon-launch import exited ${r.exitCode}: ${String(r.stderr).slice(-500)}`);
    const report = JSON.parse(String(r.stdout)) as { stored: number; rejected: number; seconds: number };
    const admin = postgres(embedded.url, { max: 1, onnotice: () => undefined });
    const [{ queued }] = await admin.unsafe(`select count(*)::int as queued from "${schema}".index_queue`);
    await admin.end();
    opts.log(
      `  import: ${report.stored} stored, ${report.rejected} rejected in ${seconds.toFixed(1)} s (${(report.stored / seconds).toFixed(0)} vCons/s; sending ${report.seconds.toFixed(1)} s); ${queued} left queued for indexing; peak RSS import ${r.cliMb.toFixed(0)} MB, server ${r.serverMb.toFixed(0)} MB`,
    );
    const roundTrip = opts.roundTrip
      ? await measureRoundTrip({
          count: opts.count,
          filesRate: report.stored / seconds,
          filesCliMb: r.cliMb,
          filesCpu: { cli: r.cliCpu, server: r.serverCpu },
          from: 'imp',
          into: 'back',
          dir,
          cliArgs,
          env,
          log: opts.log,
        })
      : [];
    return [
      makeFigure({
        id: 'import.100k',
        label: `vcon-launch import of ${opts.count.toLocaleString('en-US')} files (embedded PostgreSQL)`,
        unit: 's',
        better: 'lower',
        rounds: [seconds],
        goal: opts.count >= 100_000 ? { kind: 'max', value: 120 } : { kind: 'none' },
        note: `whole command: temporary instance start, ${report.stored} stored, stop; ${queued} vCons still queued for search indexing at the end (indexed by the group's next start); peak RSS of the import process ${r.cliMb.toFixed(0)} MB (--json), of its server ${r.serverMb.toFixed(0)} MB`,
      }),
      ...roundTrip,
    ];
  } finally {
    const admin = postgres(embedded.url, { max: 1, onnotice: () => undefined });
    for (const s of [schema, backSchema]) {
      await admin.unsafe(`drop schema if exists "${s}" cascade`).catch(() => undefined);
      await dropGroupRoles(admin as never, s).catch(() => undefined);
    }
    await admin.end();
    await embedded.release();
    rmSync(dir, { recursive: true, force: true });
  }
}
