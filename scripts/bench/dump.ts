// A tenant's data out and back at the import section's size: `vcon-launch dump` of the group the
// import loaded, `import` of that file into a fresh group, a dump of that group, and the two dumps
// compared document by document (streamed: neither is loaded whole). Each command is a real
// process, its peak RSS (VmHWM) and its temporary server's sampled from /proc while it runs.
import { open } from 'node:fs/promises';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { execa } from 'execa';
import { canonicalJson } from '../../cli/content-uuid.js';
import { readLines } from '../../cli/lines.js';
import { CLI_JS, readCpuMs, readRssMb } from './processes.js';
import { makeFigure, type Figure } from './stats.js';

/** RSS goal of the dump and import processes. */
const RSS_GOAL_MB = 300;

export interface Measured {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  seconds: number;
  /** Peak RSS of the command's own process, MB. */
  cliMb: number;
  /** Peak RSS of the largest process it started (its temporary group server), MB; NaN when none was seen. */
  serverMb: number;
  /** CPU seconds of the command's own process (its last sample), and of the processes it started. */
  cliCpu: number;
  serverCpu: number;
}

/** Every live process whose parent chain leads to `root`, from /proc/<pid>/stat. */
function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // The name is in parentheses and may hold spaces: the parent pid is the second field after it.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length) {
    for (const c of children.get(todo.pop()!) ?? []) {
      out.push(c);
      todo.push(c);
    }
  }
  return out;
}

/** Runs the CLI with `args`, sampling its and its children's peak RSS every 200 ms (the process tree every second). */
export async function runMeasured(args: string[], opts: { cwd: string; env: Record<string, string> }): Promise<Measured> {
  const t0 = performance.now();
  const child = execa(process.execPath, [CLI_JS, ...args], {
    cwd: opts.cwd,
    reject: false,
    timeout: 60 * 60_000,
    env: opts.env,
    extendEnv: false,
    maxBuffer: 512 * 1024 * 1024,
  });
  const pid = child.pid!;
  let cliMb = 0;
  let cliCpuMs = 0;
  const peaks = new Map<number, { mb: number; cpuMs: number }>();
  let ticks = 0;
  const sample = () => {
    const own = readRssMb(pid, 'VmHWM');
    if (own > cliMb) cliMb = own;
    const cpu = readCpuMs(pid);
    if (cpu > cliCpuMs) cliCpuMs = cpu;
    if (ticks++ % 5 === 0) for (const p of descendantsOf(pid)) if (!peaks.has(p)) peaks.set(p, { mb: 0, cpuMs: 0 });
    for (const [p, was] of peaks) {
      const mb = readRssMb(p, 'VmHWM');
      if (mb > was.mb) was.mb = mb;
      const ms = readCpuMs(p);
      if (ms > was.cpuMs) was.cpuMs = ms;
    }
  };
  const timer = setInterval(sample, 200);
  sample();
  const r = await child;
  clearInterval(timer);
  const seconds = (performance.now() - t0) / 1000;
  const serverMb = peaks.size ? Math.max(...[...peaks.values()].map((p) => p.mb)) : NaN;
  const serverCpu = [...peaks.values()].reduce((s, p) => s + p.cpuMs, 0) / 1000;
  return {
    exitCode: r.exitCode,
    stdout: String(r.stdout),
    stderr: String(r.stderr),
    seconds,
    cliMb,
    serverMb: serverMb > 0 ? serverMb : NaN,
    cliCpu: cliCpuMs / 1000,
    serverCpu,
  };
}

export interface DumpComparison {
  /** Lines of each dump. */
  a: number;
  b: number;
  /** Uuids in both whose documents have the same canonical JSON. */
  identical: number;
  /** Uuids in both whose documents differ. */
  differing: number;
  /** Uuids in one dump only. */
  missing: number;
}

/** The uuid and canonical JSON of each line of a dump, in file order (a dump is in uuid order). */
async function* documentsOf(file: string): AsyncGenerator<{ uuid: string; canonical: string }> {
  const handle = await open(file, 'r');
  try {
    for await (const { bytes } of readLines(handle, { maxLine: Infinity })) {
      if (!bytes || bytes.length === 0) continue;
      const doc = JSON.parse(bytes.toString('utf8')) as { uuid: string };
      yield { uuid: doc.uuid, canonical: canonicalJson(doc) };
    }
  } finally {
    await handle.close();
  }
}

/** Compares two dumps document by document, a merge on uuid order, holding one line of each. */
export async function compareDumps(fileA: string, fileB: string): Promise<DumpComparison> {
  const out: DumpComparison = { a: 0, b: 0, identical: 0, differing: 0, missing: 0 };
  const ia = documentsOf(fileA);
  const ib = documentsOf(fileB);
  let a = await ia.next();
  let b = await ib.next();
  while (!a.done || !b.done) {
    if (!a.done && (b.done || a.value.uuid < b.value.uuid)) {
      out.a++;
      out.missing++;
      a = await ia.next();
    } else if (!b.done && (a.done || b.value.uuid < a.value.uuid)) {
      out.b++;
      out.missing++;
      b = await ib.next();
    } else if (!a.done && !b.done) {
      out.a++;
      out.b++;
      if (a.value.canonical === b.value.canonical) out.identical++;
      else out.differing++;
      a = await ia.next();
      b = await ib.next();
    }
  }
  return out;
}

const rate = (n: number, seconds: number) => (seconds > 0 ? n / seconds : 0);

/**
 * Dumps group `from` (loaded with `count` vCons by the import of files, at `filesRate` vCons/s),
 * imports the dump into the empty group `into`, dumps that, and compares the two dumps.
 */
export async function measureRoundTrip(opts: {
  count: number;
  filesRate: number;
  filesCliMb: number;
  /** CPU seconds of the import of the files: its own process, its server. */
  filesCpu: { cli: number; server: number };
  from: string;
  into: string;
  dir: string;
  cliArgs: string[];
  env: Record<string, string>;
  log: (msg: string) => void;
}): Promise<Figure[]> {
  const run = (args: string[]) => runMeasured([...args, ...opts.cliArgs], { cwd: opts.dir, env: opts.env });
  const fail = (what: string, r: Measured) => new Error(`${what} exited ${r.exitCode}: ${r.stderr.slice(-500)}`);
  const fileA = `${opts.dir}/${opts.from}.ndjson`;
  const fileB = `${opts.dir}/${opts.into}.ndjson`;

  const dump = await run(['dump', '--group', opts.from, '--output', fileA]);
  if (dump.exitCode !== 0) throw fail('vcon-launch dump', dump);
  const dumped = Number(/dumped (\d+) vCon/.exec(dump.stderr)?.[1] ?? NaN);
  const mb = statSync(fileA).size / 1024 ** 2;
  opts.log(
    `  dump: ${dumped} vCons (${mb.toFixed(0)} MB) in ${dump.seconds.toFixed(1)} s (${rate(dumped, dump.seconds).toFixed(0)}/s); peak RSS dump ${dump.cliMb.toFixed(0)} MB, server ${dump.serverMb.toFixed(0)} MB; CPU dump ${dump.cliCpu.toFixed(1)} s, server ${dump.serverCpu.toFixed(1)} s`,
  );

  // As a person runs it: the summary, not the JSON report of every line.
  const imp = await run(['import', '--group', opts.into, fileA]);
  if (imp.exitCode !== 0) throw fail('vcon-launch import of the dump', imp);
  const stored = Number(/^ {2}stored\s+(\d+)/m.exec(imp.stdout)?.[1] ?? NaN);
  opts.log(
    `  import of the dump: ${stored} stored in ${imp.seconds.toFixed(1)} s (${rate(stored, imp.seconds).toFixed(0)}/s; files: ${opts.filesRate.toFixed(0)}/s); peak RSS import ${imp.cliMb.toFixed(0)} MB, server ${imp.serverMb.toFixed(0)} MB; CPU import ${imp.cliCpu.toFixed(1)} s, server ${imp.serverCpu.toFixed(1)} s (files: ${opts.filesCpu.cli.toFixed(1)} s, ${opts.filesCpu.server.toFixed(1)} s)`,
  );

  const again = await run(['dump', '--group', opts.into, '--output', fileB]);
  if (again.exitCode !== 0) throw fail('vcon-launch dump of the copy', again);
  const tc = performance.now();
  const cmp = await compareDumps(fileA, fileB);
  opts.log(
    `  compared: ${cmp.identical} identical, ${cmp.differing} differing, ${cmp.missing} in one dump only (${cmp.a} / ${cmp.b} lines) in ${((performance.now() - tc) / 1000).toFixed(1)} s`,
  );
  const n = opts.count.toLocaleString('en-US');
  const rssGoal = opts.count >= 100_000 ? ({ kind: 'max', value: RSS_GOAL_MB } as const) : ({ kind: 'none' } as const);
  return [
    makeFigure({
      id: 'dump.rate',
      label: `vcon-launch dump of ${n} vCons to a file`,
      unit: 'vCons/s',
      better: 'higher',
      rounds: [rate(dumped, dump.seconds)],
      note: `whole command (temporary instance start and stop): ${dumped} vCons, ${mb.toFixed(0)} MB in ${dump.seconds.toFixed(1)} s; CPU of the dump process ${dump.cliCpu.toFixed(1)} s, of its server ${dump.serverCpu.toFixed(1)} s`,
    }),
    makeFigure({
      id: 'dump.import.rate',
      label: `vcon-launch import of that ${n}-line dump into an empty group`,
      unit: 'vCons/s',
      better: 'higher',
      rounds: [rate(stored, imp.seconds)],
      floor: { label: 'import of the files, same run', rounds: [opts.filesRate] },
      goal: { kind: 'ratio', min: 1 },
      note: `whole command: ${stored} stored in ${imp.seconds.toFixed(1)} s; ratio to the import of the ${n} files; CPU of the import process ${imp.cliCpu.toFixed(1)} s and of its server ${imp.serverCpu.toFixed(1)} s (files: ${opts.filesCpu.cli.toFixed(1)} s and ${opts.filesCpu.server.toFixed(1)} s)`,
    }),
    makeFigure({
      id: 'dump.roundtrip.differing',
      label: 'documents of the copy that differ from the original (canonical JSON per uuid, or missing)',
      unit: 'docs',
      better: 'lower',
      rounds: [cmp.differing + cmp.missing],
      goal: { kind: 'max', value: 0 },
      note: `${cmp.identical} identical of ${cmp.a} dumped`,
    }),
    makeFigure({
      id: 'dump.rss',
      label: 'peak RSS of the dump process',
      unit: 'MB',
      better: 'lower',
      rounds: [dump.cliMb],
      goal: rssGoal,
      note: `VmHWM sampled every 200 ms; its temporary server ${dump.serverMb.toFixed(0)} MB`,
    }),
    makeFigure({
      id: 'dump.import.rss',
      label: 'peak RSS of the import process (the dump file)',
      unit: 'MB',
      better: 'lower',
      rounds: [imp.cliMb],
      goal: rssGoal,
      note: `VmHWM sampled every 200 ms; its temporary server ${imp.serverMb.toFixed(0)} MB; the import of the ${n} files: ${opts.filesCliMb.toFixed(0)} MB`,
    }),
    makeFigure({
      id: 'dump.server.rss',
      label: 'peak RSS of the group server during the dump',
      unit: 'MB',
      better: 'lower',
      rounds: [dump.serverMb],
      note: 'reported (the server bound is VCON_MEMORY_LIMIT)',
    }),
    makeFigure({
      id: 'dump.import.server.rss',
      label: 'peak RSS of the group server during the import of the dump',
      unit: 'MB',
      better: 'lower',
      rounds: [imp.serverMb],
      note: 'reported (the server bound is VCON_MEMORY_LIMIT)',
    }),
  ];
}
