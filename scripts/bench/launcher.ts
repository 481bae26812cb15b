// The launcher figures: wall time of `vcon-launch start --detach` of 10 groups on one database
// (fresh schemas, so migrations included) until all are healthy, and each instance's idle RSS.
// Floor: 10 bare node:http + postgres.js processes started in parallel until each answers.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { CLI_JS, readRssMb, startFloorServer, type Child } from './processes.js';
import { makeFigure, type Figure } from './stats.js';

interface StatusRow {
  group: string;
  pid: number;
  status: string;
}

export async function measureLauncher(opts: {
  databaseUrl: string;
  schemaPrefix: string;
  groups: number;
  rounds: number;
  runDir: string;
  /** Schemas created, so the caller can drop them. */
  onSchema: (schema: string) => void;
  log: (msg: string) => void;
}): Promise<Figure[]> {
  const startTimes: number[] = [];
  const warmTimes: number[] = [];
  const rss: number[] = [];
  const floorTimes: number[] = [];
  const floorRss: number[] = [];
  let notes: string[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const dir = path.join(opts.runDir, `launcher-${r}`);
    const envDir = path.join(dir, 'env');
    const instancesDir = path.join(dir, 'instances');
    mkdirSync(envDir, { recursive: true });
    writeFileSync(path.join(envDir, 'shared.env'), 'API_AUTH_REQUIRED=false\nLOG_LEVEL=warn\nMCP_HTTP_PORT=0\nNODE_ENV=production\n');
    for (let g = 0; g < opts.groups; g++) {
      const schema = `${opts.schemaPrefix}_l${r}_g${g}`;
      opts.onSchema(schema);
      writeFileSync(path.join(envDir, `g${g}.env`), `SUPABASE_DB_SCHEMA=${schema}\n`);
    }
    const env = { ...process.env, DATABASE_URL: opts.databaseUrl };
    const cli = (...args: string[]) => execa(process.execPath, [CLI_JS, ...args, '--instances-dir', instancesDir], { env, reject: false, all: true });
    // Twice per round: on fresh schemas (migrations included), then again on the migrated ones.
    for (const phase of ['fresh', 'migrated'] as const) {
      try {
        const t0 = performance.now();
        const started = await cli('start', '--all', '--env-dir', envDir, '--detach');
        const seconds = (performance.now() - t0) / 1000;
        if (started.exitCode !== 0) throw new Error(`vcon-launch start failed (${started.exitCode}):\n${started.all}`);
        const status = await cli('status', '--json');
        const rows = JSON.parse(String(status.stdout)) as StatusRow[];
        const healthy = rows.filter((x) => x.status === 'healthy').length;
        if (healthy !== opts.groups) throw new Error(`only ${healthy}/${opts.groups} groups healthy after start:\n${status.stdout}`);
        (phase === 'fresh' ? startTimes : warmTimes).push(seconds);
        if (phase === 'migrated') {
          // Idle: no traffic for a few seconds (startup garbage collected, word vectors loaded).
          await sleep(3_000);
          rss.push(...rows.map((x) => readRssMb(x.pid)));
        }
        opts.log(`  launcher round ${r + 1}/${opts.rounds}, ${phase} schemas: ${opts.groups} groups healthy in ${seconds.toFixed(2)} s`);
      } finally {
        const stopped = await cli('stop', '--all');
        if (stopped.exitCode !== 0) notes.push(`stop --all exited ${stopped.exitCode}`);
      }
    }

    const t1 = performance.now();
    const floors: Child[] = await Promise.all(
      Array.from({ length: opts.groups }, (_, g) =>
        startFloorServer({ name: `floor-l${r}-${g}`, databaseUrl: opts.databaseUrl, searchPath: 'public', runDir: dir }),
      ),
    );
    await Promise.all(floors.map(async (f) => (await fetch(`${f.url}/health`)).arrayBuffer()));
    floorTimes.push((performance.now() - t1) / 1000);
    await sleep(3_000);
    floorRss.push(...floors.map((f) => readRssMb(f.pid)));
    await Promise.all(floors.map((f) => f.stop()));
  }
  notes = [...new Set(notes)];
  const floorLabel = `${opts.groups} bare node:http + postgres.js processes`;
  return [
    makeFigure({
      id: 'launcher.start10',
      label: `vcon-launch start of ${opts.groups} groups to all healthy (fresh schemas)`,
      unit: 's',
      better: 'lower',
      rounds: startTimes,
      floor: { label: `${floorLabel} started to first answer`, rounds: floorTimes },
      goal: { kind: 'max', value: 5 },
      note: ['new schemas each round: migrations included', ...notes].join('; '),
    }),
    makeFigure({
      id: 'launcher.start10_migrated',
      label: `vcon-launch start of ${opts.groups} groups to all healthy (migrated schemas)`,
      unit: 's',
      better: 'lower',
      rounds: warmTimes,
      floor: { label: `${floorLabel} started to first answer`, rounds: floorTimes },
      goal: { kind: 'max', value: 5 },
    }),
    makeFigure({
      id: 'launcher.idle_rss',
      label: 'idle RSS per instance',
      unit: 'MB',
      better: 'lower',
      rounds: rss,
      floor: { label: `one of ${floorLabel}`, rounds: floorRss },
      goal: { kind: 'max', value: 100 },
      note: `max ${Math.max(...rss).toFixed(0)} MB over ${rss.length} instances`,
    }),
  ];
}
