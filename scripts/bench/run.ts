#!/usr/bin/env node
// npm run bench [-- --quick]: every figure against a floor measured in the same run.
// Starts real vcon-server processes on TEST_DATABASE_URL / DATABASE_URL (or the embedded
// PostgreSQL), loads a deterministic corpus over HTTP, prints a table and writes
// tests/bench/results/<date>.json + .md. It reports and never fails: exit 0 on FAIL too.
// Keep in sync with docs/benchmarks.md.
import { existsSync, mkdirSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { packageRoot } from '../../src/paths.js';
import { acquireEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.js';
import { generateVcon, SEARCH_BENCH_QUERIES, TAG_KEYS, tagValues } from './corpus.js';
import { SUSTAINED_GOAL, createFloorTable, loadCorpus, measureIngest, measureSustained } from './ingest.js';
import { measureRoute, type RouteCase } from './http-figures.js';
import { measureSearch } from './search.js';
import { formatDevSet, measureDevSet } from './devset.js';
import { measureLauncher } from './launcher.js';
import { measureBodies } from './bodies.js';
import { measureChanges } from './changes.js';
import { densityFigures, densityMarkdown, runDensity, type DensityResult } from './density.js';
import { pgbouncerInstalled } from './pgbouncer.js';
import { measureImport } from './import.js';
import { measureStages, stagesMarkdown, type StageBreakdown } from './stages.js';
import { applicationNameOf } from '../../src/db/server-limits.js';
import { readRssMb, startFloorServer, startServer, type Child } from './processes.js';
import { formatTable, writeReport, type BenchReport } from './report.js';
import { makeFigure, median, type Figure } from './stats.js';

const SECTIONS = [
  'stages',
  'import',
  'dump',
  'bodies',
  'changes',
  'ingest',
  'routes',
  'search',
  'memory',
  'create',
  'launcher',
  'density',
  'diagnostics',
] as const;
type Section = (typeof SECTIONS)[number];

interface Options {
  quick: boolean;
  size: number;
  seed: number;
  rounds: number;
  seconds: number;
  ingestPerRound: number;
  searchPasses: number;
  launcherRounds: number;
  sections: Set<Section>;
  corpus: 'own' | 'shared';
  freshCorpus: boolean;
  profile: boolean;
  keep: boolean;
  out: string;
  densityGroups: number[];
  densitySeconds: number;
  densityClients: number;
  /** For each N: directly (false) and/or through PgBouncer (true). */
  densityVia: boolean[];
  importCount: number;
}

const USAGE = `Usage: npm run bench [-- options]

  --quick            sanity run in under 2 minutes (small corpus, short rounds)
  --size <n>         read/search corpus size (default 100000; quick 600)
  --corpus own|shared
                     shared (default): built once with the search bench's generator and kept in
                     schema bench_kept_corpus_<size>; own (quick default): this run's, over HTTP
  --fresh-corpus     drop the kept corpus first and rebuild it (its build time is reported)
  --rounds <n>       rounds per figure (default 5; quick 3)
  --seconds <s>      seconds per load round (default 2; quick 0.5)
  --seed <n>         corpus seed (default 20250101)
  --only <a,b,...>   sections: ${SECTIONS.join(', ')}
  --density-groups <a,b,...>
                     group counts of the density section (default 10,30,50; quick 5), each on a
                     PostgreSQL with max_connections = 100 started by the bench
  --density-seconds <s>  seconds of mixed load per group count (default 60; quick 10)
  --density-clients <n>  concurrent clients per group (default 10)
  --density-pgbouncer <direct|pgbouncer|both>
                     groups connect to PostgreSQL directly, through a real PgBouncer the bench
                     starts (Debian's package), or each N both ways (default: both when pgbouncer
                     is installed)
  --import-count <n> vCon files of the import section (default 100000; quick 2000); the dump
                     section imports as many, then dumps them and imports the dump into a fresh group
  --profile          run the main server under node --cpu-prof (profiles in the run directory)
  --keep             keep the schemas and the run directory
  --out <dir>        results directory (default tests/bench/results)

Database: TEST_DATABASE_URL, else DATABASE_URL, else the embedded PostgreSQL.`;

function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const value = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, def: number) => {
    const v = value(name);
    if (v === undefined) return def;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} needs a positive number, got "${v}"`);
    return n;
  };
  const only = value('--only');
  const sections = new Set<Section>(only ? (only.split(',') as Section[]) : SECTIONS.filter((s) => !(quick && s === 'diagnostics')));
  for (const s of sections) if (!SECTIONS.includes(s)) throw new Error(`unknown section "${s}"; sections: ${SECTIONS.join(', ')}`);
  return {
    quick,
    size: Math.floor(num('--size', quick ? 600 : 100_000)),
    seed: Math.floor(num('--seed', 20_250_101)),
    rounds: Math.floor(num('--rounds', quick ? 3 : 5)),
    seconds: num('--seconds', quick ? 0.5 : 2),
    ingestPerRound: quick ? 100 : 1_000,
    searchPasses: quick ? 1 : 2,
    launcherRounds: quick ? 1 : 2,
    sections,
    corpus: (value('--corpus') ?? (quick ? 'own' : 'shared')) === 'own' ? 'own' : 'shared',
    freshCorpus: argv.includes('--fresh-corpus'),
    profile: argv.includes('--profile'),
    keep: argv.includes('--keep'),
    out: path.resolve(value('--out') ?? path.join(packageRoot, 'tests', 'bench', 'results')),
    densityGroups: (value('--density-groups') ?? (quick ? '5' : '10,30,50')).split(',').map((x) => {
      const n = Number(x);
      if (!Number.isInteger(n) || n < 1) throw new Error(`--density-groups needs positive integers, got "${x}"`);
      return n;
    }),
    densitySeconds: num('--density-seconds', quick ? 10 : 60),
    densityClients: Math.floor(num('--density-clients', 10)),
    densityVia: (() => {
      const v = value('--density-pgbouncer') ?? (pgbouncerInstalled ? 'both' : 'direct');
      if (v !== 'direct' && v !== 'pgbouncer' && v !== 'both') throw new Error(`--density-pgbouncer is direct, pgbouncer or both, got "${v}"`);
      return v === 'both' ? [false, true] : [v === 'pgbouncer'];
    })(),
    importCount: Math.floor(num('--import-count', quick ? 2_000 : 100_000)),
  };
}

/** The search bench of scripts/embeddings, loaded at run time so the bench still runs without it. */
const SEARCH_BENCH_JS = 'dist/scripts/embeddings/bench-search.js';
/** The kept read/search corpus of a size: the bench's own schema, so no other run drops it mid-way. */
const keptCorpusSchema = (size: number) => `bench_kept_corpus_${size}`;

interface SearchBenchModule {
  /** The search bench's query set, when it exports one. */
  QUERIES?: readonly string[];
  runSearchBench(opts: { size?: number; requests?: number; schema?: string; databaseUrl?: string; log?: (line: string) => void }): Promise<{
    corpus: { vcons: number; units: number; built: number; build_s: number | null; rate_per_s: number | null };
    searches: Record<'content' | 'semantic' | 'hybrid', { requests: number; p50_ms: number; p95_ms: number }>;
  }>;
}

async function loadSearchBench(): Promise<SearchBenchModule | undefined> {
  const file = path.join(packageRoot, SEARCH_BENCH_JS);
  if (!existsSync(file)) return undefined;
  return (await import(pathToFileURL(file).href)) as SearchBenchModule;
}

const log = (msg: string) => process.stderr.write(`${msg}\n`);

/** Thrown to skip the corpus sections when only the density section runs. */
class SkipCorpus extends Error {}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const loadStart = os.loadavg();
  const runId = `bench_${Date.now().toString(36)}`;
  const runDir = path.join(packageRoot, '.vcon', 'bench', runId);
  mkdirSync(runDir, { recursive: true });
  const notes: string[] = [];
  const figures: Figure[] = [];
  const children: Child[] = [];
  const schemas = new Set<string>();

  let embedded: EmbeddedPostgres | undefined;
  let databaseUrl = process.env.TEST_DATABASE_URL?.trim() || process.env.DATABASE_URL?.trim();
  if (!databaseUrl) {
    embedded = await acquireEmbeddedPostgres(path.join(packageRoot, '.vcon', 'embedded'));
    databaseUrl = embedded.url;
  }
  const admin = postgres(databaseUrl, { max: 2, onnotice: () => undefined });
  const mainSchema = `${runId}_main`;
  const floorSchema = `${runId}_floor`;
  let floorSql: Sql | undefined;

  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.allSettled(children.map((c) => c.stop()));
    await floorSql?.end({ timeout: 2 }).catch(() => undefined);
    if (!opts.keep) for (const s of schemas) await admin.unsafe(`drop schema if exists "${s}" cascade`).catch(() => undefined);
    await admin.end({ timeout: 2 }).catch(() => undefined);
    await embedded?.release();
  };
  const onSignal = () => {
    log('interrupted: stopping the servers and dropping the bench schemas');
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  /** Runs one section; a failure becomes a note and the run goes on (the bench reports, never fails). */
  const section = async (name: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      notes.push(`section ${name} failed: ${(err as Error).message.split('\n')[0].slice(0, 300)}`);
      log(`bench: section ${name} failed: ${(err as Error).stack ?? (err as Error).message}`);
    }
  };

  const server_version = String((await admin`show server_version`)[0].server_version);
  const autovacuum = String((await admin`show autovacuum`)[0].autovacuum);
  if (autovacuum !== 'on') notes.push(`autovacuum is ${autovacuum} on this PostgreSQL: the bench vacuums the read corpus itself`);
  log(
    `bench ${opts.quick ? '(quick) ' : ''}${runId}: corpus ${opts.size} vCons, ${opts.rounds} rounds; run directory ${path.relative(process.cwd(), runDir)}`,
  );
  if (loadStart[0] > 1.5) log(`note: load average ${loadStart[0].toFixed(2)}: the machine is busy, figures will be noisy`);

  const corpus: Record<string, unknown> = { size: opts.size, seed: opts.seed };
  let lz4 = false;
  // Write stages: in-process on a schema of their own, before anything else loads the machine.
  let stages: StageBreakdown[] = [];
  if (opts.sections.has('stages'))
    await section('stages', async () => {
      log('write stages (in-process)');
      stages = await measureStages({ databaseUrl, seed: opts.seed, creates: opts.quick ? 50 : 300, batches: opts.quick ? 5 : 20 });
      for (const b of stages) log(`  ${b.what}: ${b.total.wall_ms.toFixed(2)} ms wall, ${b.total.cpu_ms.toFixed(2)} ms CPU`);
    });

  // vcon-launch import of a generated corpus into a group on the embedded PostgreSQL; with the
  // dump section, that group dumped and the dump imported into a fresh group (the same run's import is its baseline).
  if (opts.sections.has('import') || opts.sections.has('dump'))
    await section(opts.sections.has('dump') ? 'dump' : 'import', async () => {
      log(
        `import: ${opts.importCount} vCon files through vcon-launch import (embedded PostgreSQL)${opts.sections.has('dump') ? ', then dump and back' : ''}`,
      );
      figures.push(...(await measureImport({ count: opts.importCount, seed: opts.seed, roundTrip: opts.sections.has('dump'), log })));
    });

  // 50 concurrent 14 MB creates on a server of its own: its peak and settled RSS.
  if (opts.sections.has('bodies'))
    await section('bodies', async () => {
      log('bodies: concurrent large creates');
      const schema = `${runId}_bodies`;
      schemas.add(schema);
      figures.push(...(await measureBodies({ databaseUrl, schema, runDir, concurrent: 50, log })));
    });

  // The change feed: stream latency, one stream's read rate, idle streams, 1,000 streams, webhooks, the log's write cost.
  if (opts.sections.has('changes'))
    await section('changes', async () => {
      const r = await measureChanges({
        databaseUrl,
        schemaPrefix: runId,
        onSchema: (s) => schemas.add(s),
        runDir,
        seed: opts.seed,
        quick: opts.quick,
        rounds: opts.rounds,
        log,
      });
      figures.push(...r.figures);
      notes.push(...r.notes);
    });

  // The density, stages, import, dump, bodies and changes sections bring their own PostgreSQL or schemas: alone, they need no corpus.
  const noCorpus = new Set<Section>(['density', 'stages', 'import', 'dump', 'bodies', 'changes']);
  const needsCorpus = [...opts.sections].some((s) => !noCorpus.has(s));
  try {
    if (!needsCorpus) throw new SkipCorpus();
    // Corpus shape, from a sample.
    const sample = Array.from({ length: 500 }, (_, i) => Buffer.byteLength(JSON.stringify(generateVcon(opts.seed, i))) / 1024);
    const tg = performance.now();
    for (let i = 0; i < 2_000; i++) JSON.stringify(generateVcon(opts.seed, i));
    Object.assign(corpus, {
      kb_median: median(sample),
      kb_min: Math.min(...sample),
      kb_max: Math.max(...sample),
      generate_per_s: 2_000 / ((performance.now() - tg) / 1000),
    });

    schemas.add(mainSchema);
    schemas.add(floorSchema);
    await admin.unsafe(`create schema "${floorSchema}"`);
    const floorDb = postgres(databaseUrl, { max: 1, onnotice: () => undefined, connection: { search_path: `"${floorSchema}"` } });
    floorSql = floorDb;
    lz4 = (await createFloorTable(floorDb)).lz4;
    if (!lz4) notes.push('lz4 compression is unavailable on this PostgreSQL: the floor table uses pglz');

    const tStart = performance.now();
    const main = await startServer({
      name: 'main',
      databaseUrl,
      schema: mainSchema,
      runDir,
      nodeArgs: opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(runDir, 'profiles')}`] : [],
    });
    children.push(main);
    corpus.server_start_s = (performance.now() - tStart) / 1000;
    const mainApi = `${main.url}/api/v1`;
    await sleep(1_000);
    const idleRss = readRssMb(main.pid);

    // 1. Batch ingest against the floor, into the fresh main schema.
    let stored = 0;
    if (opts.sections.has('ingest'))
      await section('ingest', async () => {
        log('batch ingest');
        // The server's sessions (its pool and index thread name themselves after its label), not the
        // floor's or another client's of the same database.
        const pgPids = async () =>
          (
            await admin<{ pid: number }[]>`
            select pid from pg_stat_activity where backend_type = 'client backend' and application_name = ${applicationNameOf(main.name, mainSchema)}`
          ).map((r) => r.pid);
        // The floor server over the floor schema alone, for the HTTP floor's side of each round.
        const httpFloor = await startFloorServer({ name: 'floor-ingest', databaseUrl, searchPath: `"${floorSchema}"`, runDir });
        children.push(httpFloor);
        const r = await measureIngest({
          api: mainApi,
          floorSql: floorDb,
          httpFloorApi: httpFloor.url,
          seed: opts.seed,
          rounds: opts.rounds,
          perRound: opts.ingestPerRound,
          lz4,
          serverPid: main.pid,
          pgPids,
          log,
        });
        await httpFloor.stop();
        figures.push(...r.figures);
        stored = r.stored;
        log('sustained ingest (search keeping up)');
        const floorRate = r.figures[0].floor?.median ?? 0;
        const sustained = await measureSustained({
          api: mainApi,
          seed: opts.seed,
          from: stored,
          floorRate,
          fractions: [SUSTAINED_GOAL, 0.1, 0.05],
          seconds: opts.quick ? 3 : 8,
          serverPid: main.pid,
          pgPids,
          log,
        });
        figures.push(...sustained.figures);
        stored = sustained.stored;
      });

    // 2. The read corpus: the search bench's kept corpus (full runs), or the main schema loaded
    //    to the corpus size through POST /vcons/batch (quick runs, or without that module).
    let corpusSchema = mainSchema;
    let corpusServer = main;
    const shared = opts.corpus === 'shared' ? await loadSearchBench() : undefined;
    if (opts.corpus === 'shared' && !shared) notes.push(`${SEARCH_BENCH_JS} is missing: the corpus was loaded through HTTP instead`);
    let useShared = false;
    let queries: readonly string[] | undefined;
    const SHARED_CORPUS_SCHEMA = keptCorpusSchema(opts.size);
    if (shared) {
      if (opts.freshCorpus) await admin.unsafe(`drop schema if exists "${SHARED_CORPUS_SCHEMA}" cascade`);
      log(`corpus: ${opts.size} vCons in schema ${SHARED_CORPUS_SCHEMA} (built once with the search bench's generator, then kept)`);
      corpus.source = `scripts/embeddings/bench-search.ts generateVcon, schema ${SHARED_CORPUS_SCHEMA} (kept between runs)`;
      try {
        const r = await shared.runSearchBench({
          size: opts.size,
          schema: SHARED_CORPUS_SCHEMA,
          databaseUrl,
          requests: 30,
          log: (l) => log(`  search-bench: ${l}`),
        });
        corpus.build_s = r.corpus.build_s ?? 'reused';
        corpus.build_per_s = r.corpus.rate_per_s ?? 'reused';
        corpus.search_units = r.corpus.units;
        notes.push(
          `search-bench cross-check (in-process server, one round of ${r.searches.content.requests} requests): ` +
            (['content', 'semantic', 'hybrid'] as const).map((k) => `${k} p50 ${r.searches[k].p50_ms} / p95 ${r.searches[k].p95_ms} ms`).join(', '),
        );
      } catch (err) {
        notes.push(`the search bench failed: ${(err as Error).message.split('\n')[0].slice(0, 300)}`);
        log(`bench: the search bench failed: ${(err as Error).message}`);
      }
      const [{ n }] = await admin<
        { n: number }[]
      >`select count(*)::int as n from pg_tables where schemaname = ${SHARED_CORPUS_SCHEMA} and tablename = 'vcons'`;
      const have = n ? (await admin.unsafe(`select count(*)::int as n from "${SHARED_CORPUS_SCHEMA}".vcons`))[0].n : 0;
      useShared = have >= opts.size;
      if (useShared)
        await admin.unsafe(
          `comment on schema "${SHARED_CORPUS_SCHEMA}" is 'kept by npm run bench: the read/search corpus (drop it, or run with --fresh-corpus, to rebuild)'`,
        );
      if (!useShared) {
        notes.push(`the kept corpus holds ${have} vCons, fewer than ${opts.size}: this run loaded its own through HTTP`);
        delete corpus.source;
      }
    }
    if (useShared) {
      corpusSchema = SHARED_CORPUS_SCHEMA;
      queries = shared?.QUERIES ?? SEARCH_BENCH_QUERIES;
      const tc = performance.now();
      corpusServer = await startServer({ name: 'corpus', databaseUrl, schema: corpusSchema, runDir });
      children.push(corpusServer);
      corpus.corpus_server_start_s = (performance.now() - tc) / 1000;
    } else if (stored < opts.size) {
      corpus.source = 'scripts/bench/corpus.ts, loaded through POST /vcons/batch (2 writers)';
      log(`corpus: loading ${opts.size - stored} vCons through POST /vcons/batch (2 writers)`);
      const r = await loadCorpus({ api: mainApi, seed: opts.seed, from: stored, to: opts.size, writers: 2, log });
      corpus.build_s = (performance.now() - tStart) / 1000;
      corpus.load_per_s = r.perSecond;
    }
    const api = `${corpusServer.url}/api/v1`;
    const corpusSql = postgres(databaseUrl, { max: 1, onnotice: () => undefined, connection: { search_path: `"${corpusSchema}"` } });
    const uuids = (await corpusSql<{ uuid: string }[]>`select uuid::text from vcons`).map((r) => r.uuid);
    // Production runs autovacuum; a test server may not (this machine's has it off). Without a
    // vacuum the visibility map stays empty and every index-only scan reads the heap.
    const tv = performance.now();
    for (const { tablename } of await admin<{ tablename: string }[]>`select tablename from pg_tables where schemaname = ${corpusSchema}`) {
      await admin.unsafe(`vacuum (analyze) "${corpusSchema}"."${tablename}"`);
    }
    corpus.vacuum_s = (performance.now() - tv) / 1000;
    const tagPairs = (
      await corpusSql<{ key: string; value: string }[]>`
      select key, value from vcon_tags group by key, value order by count(*) desc limit 12`
    ).map((r) => JSON.stringify({ [r.key]: r.value }));
    // The middle third of the corpus's dates: a date filter that keeps a third of it.
    const [span] = await corpusSql<{ from: Date | null; to: Date | null }[]>`
      select min(created_at) + (max(created_at) - min(created_at)) / 3 as from,
             min(created_at) + 2 * (max(created_at) - min(created_at)) / 3 as to
      from vcons`;
    await corpusSql.end();
    corpus.stored = uuids.length;
    log(`corpus: ${uuids.length} vCons in ${corpusSchema}`);
    const floor = await startFloorServer({ name: 'floor', databaseUrl, searchPath: `"${floorSchema}", "${corpusSchema}", extensions`, runDir });
    children.push(floor);

    const targets = {
      serverApi: api,
      floorApi: floor.url,
      serverPid: corpusServer.pid,
      floorPid: floor.pid,
      rounds: opts.rounds,
      seconds: opts.seconds,
      log,
    };
    let k = 0;
    const randomUuid = () => uuids[(k = (k * 1103515245 + 12345) >>> 0) % uuids.length];

    // 3. Reads: GET by uuid, list pages, tag search, discovery.
    if (opts.sections.has('routes'))
      await section('routes', async () => {
        log('routes');
        // The corpus's own most common tags, so every search has matches.
        const pairs = tagPairs.length ? tagPairs : TAG_KEYS.flatMap((key) => tagValues(key).map((v) => JSON.stringify({ [key]: v })));
        let t = 0;
        const cases: RouteCase[] = [
          { id: 'get', label: 'GET /vcons/:uuid', connections: 32, path: () => `/vcons/${randomUuid()}`, goal: { kind: 'ratio', min: 0.6 } },
          ...[0, 1_000, 10_000].map((offset) => ({
            id: `list.${offset}`,
            label: `GET /vcons?offset=${offset}&limit=10`,
            connections: 8,
            path: () => `/vcons?offset=${offset}&limit=10`,
            note: offset >= uuids.length ? `offset beyond the ${uuids.length} vCons of the corpus` : undefined,
          })),
          {
            id: 'tags',
            label: 'GET /tags/search (1 pair)',
            connections: 8,
            path: () => `/tags/search?tags=${encodeURIComponent(pairs[t++ % pairs.length])}`,
          },
          {
            id: 'discovery',
            label: 'GET /discovery/analysis/types',
            connections: 8,
            minSeconds: uuids.length >= 10_000 ? 4 : undefined,
            path: () => '/discovery/analysis/types',
          },
        ];
        for (const c of cases) figures.push(...(await measureRoute(c, targets)));
      });

    // 4. Search at the corpus size, then the memory of the instance that served it all.
    if (opts.sections.has('search'))
      await section('search', async () => {
        log('search');
        const r = await measureSearch({
          serverApi: api,
          floorApi: floor.url,
          rounds: opts.rounds,
          passes: opts.searchPasses,
          corpusSize: uuids.length,
          quick: opts.quick,
          queries,
          filters: [
            ...(span.from && span.to ? [`&start_date=${span.from.toISOString()}&end_date=${span.to.toISOString()}`] : []),
            ...tagPairs.slice(0, 1).map((t) => `&tags=${encodeURIComponent(t)}`),
          ],
          log,
        });
        figures.push(...r.figures);
        notes.push(...r.errors.map((e) => `search failed: ${e}`));
        // Quality beside speed: the development set's MRR per route and query type.
        try {
          const lines: string[] = [];
          for (const shape of ['chat', 'call', 'email'] as const) lines.push(...formatDevSet(await measureDevSet(databaseUrl!, undefined, shape)));
          for (const l of lines) log(l);
          notes.push(...lines);
        } catch (err) {
          notes.push(`dev set not measured: ${(err as Error).message.slice(0, 200)}`);
        }
      });
    if (opts.sections.has('memory'))
      await section('memory', async () => {
        const rss = readRssMb(corpusServer.pid);
        figures.push(
          makeFigure({
            id: 'memory.after_corpus',
            label: `RSS of one instance after ${uuids.length.toLocaleString('en-US')} vCons${opts.sections.has('search') ? ' and search' : ''}`,
            unit: 'MB',
            better: 'lower',
            rounds: [rss],
            floor: { label: 'an instance idle, right after start', rounds: [idleRss] },
            note: `peak (VmHWM) ${readRssMb(corpusServer.pid, 'VmHWM').toFixed(0)} MB${corpusServer === main ? '' : '; this instance served the kept corpus (it did not ingest it)'}`,
          }),
        );
      });

    // 5. Single creates (after search, so the search corpus is exactly the loaded one).
    if (opts.sections.has('create'))
      await section('create', async () => {
        log('create');
        const templates = Array.from({ length: 50 }, (_, i) => JSON.stringify(generateVcon(opts.seed + 1, i)));
        const parts = templates.map((s) => {
          const m = /"uuid":"([0-9a-f-]{36})"/.exec(s)!;
          return [s.slice(0, m.index + 8), s.slice(m.index + 8 + 36)];
        });
        let c = 0;
        figures.push(
          ...(await measureRoute(
            {
              id: 'create',
              label: 'POST /vcons',
              method: 'POST',
              connections: 32,
              body: () => {
                const [a, b] = parts[c++ % parts.length];
                return `${a}${randomUUID()}${b}`;
              },
              path: () => '/vcons',
              settleIndex: true,
              // Goals: ≥ 0.3 × the floor, ≤ 1 ms of server CPU per create (its indexing included).
              goal: { kind: 'ratio', min: 0.3 },
              cpuGoal: { kind: 'max', value: 1000 },
            },
            { ...targets, serverApi: mainApi, serverPid: main.pid },
          )),
        );
      });

    // 6. Diagnostics: what request logging costs on the hottest read.
    if (opts.sections.has('diagnostics'))
      await section('diagnostics', async () => {
        log('diagnostics: GET /vcons/:uuid with LOG_LEVEL=warn (no per-request log lines)');
        await corpusServer.stop();
        const quiet = await startServer({ name: 'corpus-warn', databaseUrl, schema: corpusSchema, runDir, logLevel: 'warn' });
        children.push(quiet);
        const r = await measureRoute(
          {
            id: 'diag.get_warn',
            label: 'GET /vcons/:uuid, LOG_LEVEL=warn',
            connections: 32,
            path: () => `/vcons/${randomUuid()}`,
            note: 'diagnostic: request logging off',
          },
          { ...targets, serverApi: `${quiet.url}/api/v1`, serverPid: quiet.pid },
        );
        figures.push(...r);
        await quiet.stop();
      });
    await floor.stop();
    await Promise.all([main.stop(), corpusServer.stop()]);

    // 7. The launcher: 10 groups on this database.
    if (opts.sections.has('launcher'))
      await section('launcher', async () => {
        log('launcher');
        figures.push(
          ...(await measureLauncher({
            databaseUrl,
            schemaPrefix: runId,
            groups: 10,
            rounds: opts.launcherRounds,
            runDir,
            onSchema: (s) => schemas.add(s),
            log,
          })),
        );
      });
  } catch (err) {
    if (!(err instanceof SkipCorpus)) notes.push(`the run stopped early: ${(err as Error).message.split('\n')[0]}`);
    if (!(err instanceof SkipCorpus)) log(`bench: ${(err as Error).stack ?? (err as Error).message}`);
  } finally {
    await cleanup();
  }

  const density: DensityResult[] = [];
  if (opts.sections.has('density'))
    await section('density', async () => {
      for (const pgbouncer of opts.densityVia) {
        for (const n of opts.densityGroups) {
          log(`density: ${n} groups${pgbouncer ? ' through PgBouncer' : ''}`);
          const r = await runDensity({
            groups: n,
            seconds: opts.densitySeconds,
            clientsPerGroup: opts.densityClients,
            maxConnections: 100,
            dir: path.join(runDir, `density-${n}${pgbouncer ? '-pgbouncer' : ''}`),
            pgbouncer,
            log,
          });
          density.push(r);
          figures.push(...densityFigures(r));
        }
      }
    });

  const loadEnd = os.loadavg();
  const report: BenchReport = {
    date: new Date().toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    machine: { cpus: os.cpus().length, node: process.versions.node, loadavg_start: loadStart, loadavg_end: loadEnd, quiet: loadStart[0] < 1.5 },
    database: { kind: embedded ? 'embedded' : 'url', label: embedded ? 'embedded PostgreSQL' : redact(databaseUrl), lz4, server_version, autovacuum },
    corpus,
    seconds: (performance.now() - t0) / 1000,
    figures,
    notes,
    ...(density.length ? { density } : {}),
    ...(stages.length ? { stages } : {}),
    ...(density.length || stages.length
      ? { extra_markdown: [stages.length ? stagesMarkdown(stages) : '', density.length ? densityMarkdown(density) : ''].filter(Boolean).join('\n\n') }
      : {}),
  };
  if (opts.size < 100_000) notes.push(`corpus of ${opts.size} vCons, not 100k: the search goals are for 100k`);
  const files = writeReport(report, opts.out);
  process.stdout.write(`\n${formatTable(report)}\n\n`);
  for (const n of notes) process.stdout.write(`note: ${n}\n`);
  process.stdout.write(`results: ${path.relative(process.cwd(), files.json)}, ${path.relative(process.cwd(), files.md)}\n`);
  if (opts.profile) process.stdout.write(`CPU profiles: ${path.relative(process.cwd(), path.join(runDir, 'profiles'))}\n`);
}

const redact = (url: string) => {
  try {
    const u = new URL(url);
    u.password = '';
    return `${u.protocol}//${u.username ? `${u.username}@` : ''}${u.host}${u.pathname}`;
  } catch {
    return '(database URL)';
  }
};

main().then(
  () => process.exit(0),
  (err: Error) => {
    process.stderr.write(`bench: ${err.message}\n`);
    process.exit(0);
  },
);
