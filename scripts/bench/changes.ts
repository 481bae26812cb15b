// The change feed (npm run bench -- --only changes): how soon an acknowledged write is an event on
// a stream, at idle and at the sustained ingest pace; how fast one stream reads the log; what an
// idle stream costs its server; 1,000 streams on one group; webhook deliveries per second to a
// local receiver; and what the log costs a batch write. Every server is a real vcon-server started
// as the launcher starts a group, on a schema of its own.
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { applicationNameOf } from '../../src/db/server-limits.js';
import { generateVcon } from './corpus.js';
import { BATCH, SUSTAINED_GOAL, createFloorTable, measureIngest } from './ingest.js';
import { indexDrained } from './load.js';
import { benchAuth, cpuMark, cpuParts, readCpuMs, readRssMb, startServer, type Child } from './processes.js';
import { changeOf, openEventStream, type EventStream } from './sse.js';
import { makeFigure, median, percentile, type Figure } from './stats.js';

export interface ChangesOptions {
  databaseUrl: string;
  /** Schemas are named after it; each is reported to onSchema before it is used (the run drops them). */
  schemaPrefix: string;
  onSchema: (schema: string) => void;
  runDir: string;
  seed: number;
  quick: boolean;
  rounds: number;
  log: (msg: string) => void;
}

/** The idle-stream memory goal, per stream. */
const STREAM_KB_GOAL = 50;

/** vCons of the bench corpus with fresh uuids (the corpus's own repeat from run to run). */
function docs(seed: number, from: number, n: number): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, i) => ({ ...generateVcon(seed, from + i), uuid: randomUUID() }));
}

/** POSTs a JSON body with the bench key; resolves when the answer is read (the write is acknowledged). */
async function post(url: string, body: string, expect: number): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...benchAuth }, body });
  const text = await res.text();
  if (res.status !== expect) throw new Error(`POST ${url} answered ${res.status}: ${text.slice(0, 300)}`);
}

/**
 * A stream of a server's change log that notes when each vCon's first event arrived (a bench
 * clock, performance.now()), and lets a caller wait for one.
 */
function follow(api: string, query: string) {
  const arrivals = new Map<string, number>();
  const waiters = new Map<string, (t: number) => void>();
  let count = 0;
  let lastAt = 0;
  let lastId: string | undefined;
  let readyNow!: (id: string) => void;
  const ready = new Promise<string>((r) => (readyNow = r));
  const stream = openEventStream(`${api}/changes/stream${query}`, benchAuth, (e) => {
    const t = performance.now();
    if (e.id !== undefined) lastId = e.id;
    if (e.event === 'ready') readyNow(e.id ?? '');
    const c = changeOf(e);
    if (!c) return;
    count++;
    lastAt = t;
    if (!arrivals.has(c.uuid)) arrivals.set(c.uuid, t);
    waiters.get(c.uuid)?.(t);
    waiters.delete(c.uuid);
  });
  return {
    stream,
    ready: Promise.race([ready, stream.ended.then(() => Promise.reject(new Error(`the stream of ${api} ended before its ready event`)))]),
    arrivals,
    count: () => count,
    /** When the latest change event arrived. */
    lastAt: () => lastAt,
    lastId: () => lastId,
    /** When the vCon's first event arrived; rejects after `ms` without one. */
    arrival(uuid: string, ms = 60_000): Promise<number> {
      const t = arrivals.get(uuid);
      if (t !== undefined) return Promise.resolve(t);
      return Promise.race([
        new Promise<number>((r) => waiters.set(uuid, r)),
        sleep(ms).then(() => Promise.reject(new Error(`no event for ${uuid} within ${ms} ms`))),
      ]);
    },
  };
}

/** Waits until `done()` holds, checking every 20 ms; false when `ms` passed first (the bench reports, never hangs). */
async function until(done: () => boolean, ms: number): Promise<boolean> {
  for (const end = performance.now() + ms; !done();) {
    if (performance.now() > end) return false;
    await sleep(20);
  }
  return true;
}

/** A figure's p50 and p95 of latencies (ms) per round, with a note. */
function latencyFigures(id: string, label: string, rounds: number[][], goalP95: number, note: string): Figure[] {
  return [
    makeFigure({ id: `${id}.p50`, label: `${label} p50`, unit: 'ms', better: 'lower', rounds: rounds.map((r) => percentile(r, 50)), note }),
    makeFigure({
      id: `${id}.p95`,
      label: `${label} p95`,
      unit: 'ms',
      better: 'lower',
      rounds: rounds.map((r) => percentile(r, 95)),
      goal: { kind: 'max', value: goalP95 },
    }),
  ];
}

/**
 * Samples, every 100 ms until stopped, the age (ms) of the oldest running transaction that holds a
 * transaction id: among the server's own sessions (`appName`) and among all others of the cluster.
 * Such a transaction holds every feed's horizon back while it runs.
 */
function sampleTransactions(admin: postgres.Sql, appName: string) {
  const own: number[] = [];
  const others: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const [r] = await admin<{ own: number | null; others: number | null }[]>`
        select max(extract(epoch from clock_timestamp() - xact_start) * 1000) filter (where application_name = ${appName})::float8 as own,
               max(extract(epoch from clock_timestamp() - xact_start) * 1000) filter (where application_name <> ${appName})::float8 as others
        from pg_stat_activity where backend_xid is not null`;
      own.push(r.own ?? 0);
      others.push(r.others ?? 0);
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { own, others };
    },
  };
}

/** The server's heap in use (bytes), from its GET /metrics. */
async function heapUsed(server: Child): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: benchAuth })).text();
  const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text);
  return m ? Number(m[1]) : NaN;
}

export async function measureChanges(opts: ChangesOptions): Promise<{ figures: Figure[]; notes: string[] }> {
  const figures: Figure[] = [];
  const notes: string[] = [];
  const { log } = opts;
  const servers: Child[] = [];
  const admin = postgres(opts.databaseUrl, { max: 2, onnotice: () => undefined });
  let floorSql: Sql | undefined;
  const schema = (suffix: string) => {
    const s = `${opts.schemaPrefix}_${suffix}`;
    opts.onSchema(s);
    return s;
  };
  const start = async (name: string, env: Record<string, string> = {}) => {
    const s = schema(name.replace(/-/g, '_'));
    const child = await startServer({ name, databaseUrl: opts.databaseUrl, schema: s, runDir: opts.runDir, logLevel: 'warn', env });
    servers.push(child);
    return { child, schema: s, api: `${child.url}/api/v1` };
  };
  /** The database backends serving a server (its pool and index thread), for its PostgreSQL CPU. */
  const pgPidsOf = (name: string, s: string) => async () =>
    (
      await admin<{ pid: number }[]>`
        select pid from pg_stat_activity where backend_type = 'client backend' and application_name = ${applicationNameOf(name, s)}`
    ).map((r) => r.pid);
  try {
    // 1. Latency at idle: one write at a time, each once its predecessor's event arrived.
    const feed = await start('changes');
    const main = follow(feed.api, '?after=now');
    await main.ready;
    const perRound = opts.quick ? 10 : 40;
    log(`changes: latency at idle (${opts.rounds} rounds of ${perRound} creates, one stream)`);
    let n = 0;
    const idle: number[][] = [];
    const idleAges = sampleTransactions(admin, applicationNameOf('changes', feed.schema));
    for (let r = 0; r < opts.rounds; r++) {
      const lat: number[] = [];
      for (let i = 0; i < perRound; i++) {
        const [doc] = docs(opts.seed + 11, n++, 1);
        await post(`${feed.api}/vcons`, JSON.stringify(doc), 201);
        const acked = performance.now();
        // An event before the answer was read counts as 0: the write was on the stream when it was acknowledged.
        lat.push(Math.max(0, (await main.arrival(doc.uuid as string)) - acked));
      }
      idle.push(lat);
      log(`  idle round ${r + 1}/${opts.rounds}: p50 ${percentile(lat, 50).toFixed(0)} ms, p95 ${percentile(lat, 95).toFixed(0)} ms`);
    }
    const quiet = await idleAges.stop();
    await indexDrained(feed.api, 60_000);
    figures.push(
      ...latencyFigures(
        'changes.idle',
        'Change event latency at idle (acknowledged write to its SSE event)',
        idle,
        100,
        `${perRound} sequential POST /vcons per round, one stream on the same process; from the write's answer to its event (0 when the event came first); the horizon is sampled every 50 ms. The oldest transaction holding an id elsewhere in the cluster (it holds the horizon back), sampled every 100 ms: p50 ${percentile(quiet.others, 50).toFixed(0)} / p95 ${percentile(quiet.others, 95).toFixed(0)} / max ${Math.max(0, ...quiet.others).toFixed(0)} ms`,
      ),
    );

    // 2. Batch ingest with the stream following (the rate one stream must keep up with), against the ingest floor.
    const floorSchema = schema('changes_floor');
    await admin.unsafe(`create schema "${floorSchema}"`);
    floorSql = postgres(opts.databaseUrl, { max: 1, onnotice: () => undefined, connection: { search_path: `"${floorSchema}"` } });
    const { lz4 } = await createFloorTable(floorSql);
    const ingestRounds = opts.quick ? 2 : 3;
    const ingestPerRound = opts.quick ? 300 : 1_000;
    log(`changes: batch ingest, ${ingestRounds} rounds of ${ingestPerRound}, while the stream follows`);
    await until(() => main.lastId() !== undefined, 10_000);
    const before = main.count();
    const afterCursor = main.lastId()!;
    const ingest = await measureIngest({
      api: feed.api,
      floorSql,
      seed: opts.seed,
      rounds: ingestRounds,
      perRound: ingestPerRound,
      lz4,
      serverPid: feed.child.pid,
      log: (l) => log(`  ${l.trim()}`),
    });
    const ingested = ingestRounds * ingestPerRound;
    const rates = ingest.figures[0].value.rounds;
    const floorRate = ingest.figures[0].floor?.median ?? NaN;
    if (!(await until(() => main.count() >= before + ingested, 120_000)))
      notes.push('changes: the stream did not show every batch-ingested vCon within 120 s');

    // 3. How fast one stream reads: a fresh stream from before the ingest, until it has all of it.
    log(`changes: one stream reading the ${ingested} entries of the ingest from its start`);
    const readRates: number[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const t0 = performance.now();
      const reader = follow(feed.api, `?after=${afterCursor}`);
      const done = await until(() => reader.count() >= ingested, 120_000);
      const last = reader.lastAt();
      reader.stream.close();
      if (!done) {
        notes.push(`changes: a catch-up stream read ${reader.count()} of ${ingested} entries in 120 s`);
        continue;
      }
      readRates.push(ingested / ((last - t0) / 1000));
      log(`  catch-up round ${r + 1}/${opts.rounds}: ${readRates.at(-1)!.toFixed(0)} events/s`);
    }
    figures.push(
      makeFigure({
        id: 'changes.follow',
        label: 'One stream reading the log (events/s)',
        unit: 'events/s',
        better: 'higher',
        rounds: readRates,
        floor: { label: 'the batch ingest rate of this run (POST /vcons/batch of 100, 1 writer)', rounds: rates },
        goal: { kind: 'ratio', min: 1 },
        note: `a stream from the cursor before ${ingested} batch-ingested entries until it has them all (connection included); it keeps up when it reads at least as fast as one writer ingests`,
      }),
    );

    // 4. Latency under the bench's sustained ingest: batches paced at SUSTAINED_GOAL × the ingest floor.
    const seconds = opts.quick ? 3 : 6;
    const interval = (BATCH / (floorRate * SUSTAINED_GOAL)) * 1000;
    const sustainedRounds = opts.quick ? 1 : 3;
    log(`changes: latency under sustained ingest (${(floorRate * SUSTAINED_GOAL).toFixed(0)} vCons/s, ${sustainedRounds} × ${seconds} s)`);
    const loaded: number[][] = [];
    const achieved: number[] = [];
    const held = { own: [] as number[], others: [] as number[] };
    let m = 0;
    for (let r = 0; r < sustainedRounds; r++) {
      const bodies: { uuids: string[]; body: string }[] = [];
      for (let b = Math.ceil((seconds * 1000) / interval) + 1; b > 0; b--) {
        const batch = docs(opts.seed + 13, m, BATCH);
        m += BATCH;
        bodies.push({ uuids: batch.map((d) => d.uuid as string), body: JSON.stringify(batch) });
      }
      const sent: { uuids: string[]; acked: number }[] = [];
      const ages = sampleTransactions(admin, applicationNameOf('changes', feed.schema));
      const t0 = performance.now();
      for (const b of bodies) {
        if (performance.now() - t0 >= seconds * 1000) break;
        const due = t0 + sent.length * interval;
        if (due > performance.now()) await sleep(due - performance.now());
        await post(`${feed.api}/vcons/batch`, b.body, 201);
        sent.push({ uuids: b.uuids, acked: performance.now() });
      }
      achieved.push((sent.length * BATCH) / ((performance.now() - t0) / 1000));
      const lat: number[] = [];
      for (const s of sent) for (const u of s.uuids) lat.push(Math.max(0, (await main.arrival(u, 120_000)) - s.acked));
      const a = await ages.stop();
      held.own.push(...a.own);
      held.others.push(...a.others);
      loaded.push(lat);
      log(
        `  sustained round ${r + 1}/${sustainedRounds}: ${achieved.at(-1)!.toFixed(0)} vCons/s, event latency p50 ${percentile(lat, 50).toFixed(0)} ms, p95 ${percentile(lat, 95).toFixed(0)} ms`,
      );
      await indexDrained(feed.api, 120_000);
    }
    figures.push(
      ...latencyFigures(
        'changes.ingest',
        `Change event latency under sustained ingest (${SUSTAINED_GOAL} × the ingest floor)`,
        loaded,
        1_000,
        `batches of ${BATCH} paced at ${SUSTAINED_GOAL} × the ingest floor of this run (${floorRate.toFixed(0)} vCons/s), ${median(achieved).toFixed(0)} vCons/s achieved; each vCon from its batch's answer to its event. ` +
          `The horizon passes an entry once every transaction older than its sample has ended; the oldest transaction holding an id, sampled every 100 ms: ` +
          `the server's own (writes, index rounds) p50 ${percentile(held.own, 50).toFixed(0)} / p95 ${percentile(held.own, 95).toFixed(0)} ms, the rest of the cluster's p50 ${percentile(held.others, 50).toFixed(0)} / p95 ${percentile(held.others, 95).toFixed(0)} ms`,
      ),
    );
    main.stream.close();

    // 5. Idle streams: the server's memory per stream, then one run of batches to all of them.
    const streams = opts.quick ? 200 : 1_000;
    log(`changes: ${streams} idle streams on one group`);
    await sleep(1_000);
    const rss0 = readRssMb(feed.child.pid);
    const heap0 = await heapUsed(feed.child);
    const batches = opts.quick ? 2 : 5;
    const batchOf = new Map<string, number>();
    /** Per stream and batch: entries received and when the last arrived. */
    const got = Array.from({ length: streams }, () => ({ count: new Array<number>(batches).fill(0), last: new Array<number>(batches).fill(0) }));
    const many: EventStream[] = [];
    let ready = 0;
    for (let s = 0; s < streams; s++) {
      const mine = got[s];
      many.push(
        openEventStream(`${feed.api}/changes/stream?after=now`, benchAuth, (e) => {
          if (e.event === 'ready') ready++;
          const c = changeOf(e);
          const b = c ? batchOf.get(c.uuid) : undefined;
          if (b === undefined) return;
          mine.count[b]++;
          mine.last[b] = performance.now();
        }),
      );
    }
    try {
      if (!(await until(() => ready === streams, 180_000))) notes.push(`changes: only ${ready} of ${streams} streams were ready within 180 s`);
      await sleep(2_000);
      const rss1 = readRssMb(feed.child.pid);
      const heap1 = await heapUsed(feed.child);
      const perStreamKb = ((rss1 - rss0) * 1024) / ready;
      figures.push(
        makeFigure({
          id: 'changes.stream_memory',
          label: `Server memory per idle stream (RSS over ${ready} streams)`,
          unit: 'KB',
          better: 'lower',
          rounds: [perStreamKb],
          goal: { kind: 'max', value: STREAM_KB_GOAL },
          note: `RSS ${rss0.toFixed(0)} → ${rss1.toFixed(0)} MB with ${ready} streams open (after=now, no events yet); V8 heap in use ${((heap1 - heap0) / ready / 1024).toFixed(1)} KB a stream (${(heap0 / 1024 ** 2).toFixed(0)} → ${(heap1 / 1024 ** 2).toFixed(0)} MB, GC-dependent)`,
        }),
      );
      log(`  RSS ${rss0.toFixed(0)} → ${rss1.toFixed(0)} MB: ${perStreamKb.toFixed(1)} KB a stream`);

      log(`changes: ${batches} batches of ${BATCH} to ${ready} streams`);
      const cpu0 = readCpuMs(feed.child.pid);
      const acked: number[] = [];
      const t0 = performance.now();
      for (let b = 0; b < batches; b++) {
        const batch = docs(opts.seed + 17, b * BATCH, BATCH);
        for (const d of batch) batchOf.set(d.uuid as string, b);
        await post(`${feed.api}/vcons/batch`, JSON.stringify(batch), 201);
        acked.push(performance.now());
      }
      const complete = () => got.filter((g) => g.count.every((c) => c >= BATCH)).length;
      await until(() => complete() === streams, 180_000);
      const all = performance.now() - t0;
      const cpu = readCpuMs(feed.child.pid) - cpu0;
      const delays = got
        .flatMap((g) => g.last.map((t, b) => (g.count[b] >= BATCH ? Math.max(0, t - acked[b]) : NaN)))
        .filter((x) => !Number.isNaN(x));
      const events = got.reduce((sum, g) => sum + g.count.reduce((a, c) => a + c, 0), 0);
      log(
        `  ${complete()} of ${streams} streams got every event; batch to a stream p50 ${percentile(delays, 50).toFixed(0)} ms, p95 ${percentile(delays, 95).toFixed(0)} ms`,
      );
      figures.push(
        makeFigure({
          id: 'changes.fanout.complete',
          label: `Streams on one group that got every event of ${batches * BATCH} writes`,
          unit: 'streams',
          better: 'higher',
          rounds: [complete()],
          goal: { kind: 'min', value: streams },
          note: `${streams} streams open, ${batches} batches of ${BATCH} written one after another; all delivered ${(all / 1000).toFixed(1)} s after the first batch was sent; server CPU ${((cpu * 1000) / Math.max(1, events)).toFixed(0)} µs per event delivered (the writes' own included)`,
        }),
        makeFigure({
          id: 'changes.fanout.p95',
          label: `A batch of ${BATCH} on each of ${streams} streams, p95 (its answer to its last event on a stream)`,
          unit: 'ms',
          better: 'lower',
          rounds: [percentile(delays, 95)],
          note: `p50 ${percentile(delays, 50).toFixed(0)} ms; each stream reads the log itself (one query per stream per horizon move)`,
        }),
      );
    } finally {
      for (const s of many) s.close();
    }
    await indexDrained(feed.api, 120_000);
    await feed.child.stop();

    figures.push(...(await webhookFigures(opts, start, notes)));
    figures.push(...(await logCostFigures(opts, start, pgPidsOf, admin)));
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await floorSql?.end({ timeout: 2 }).catch(() => undefined);
    await admin.end({ timeout: 2 }).catch(() => undefined);
  }
  return { figures, notes };
}

type Start = (name: string, env?: Record<string, string>) => Promise<{ child: Child; schema: string; api: string }>;

/**
 * Webhook deliveries per second to a receiver on this machine (204 at once): rounds of batch
 * writes, each measured from its first delivery to its last.
 */
async function webhookFigures(opts: ChangesOptions, start: Start, notes: string[]): Promise<Figure[]> {
  const rounds = opts.quick ? 2 : 3;
  const perRound = opts.quick ? 300 : 1_000;
  opts.log(`changes: webhook deliveries, ${rounds} rounds of ${perRound} writes`);
  const arrivals = new Map<string, number>();
  const ids = new Set<string>();
  let repeats = 0;
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      if (ids.has(id)) repeats++;
      ids.add(id);
      const uuid = (JSON.parse(body) as { data: { uuid: string } }).data.uuid;
      if (!arrivals.has(uuid)) arrivals.set(uuid, performance.now());
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  try {
    const { port } = receiver.address() as AddressInfo;
    const hooks = await start('changes-hooks', {
      WEBHOOK_URLS: `http://127.0.0.1:${port}/hook`,
      WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
      WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    // The endpoint starts at the end of the log once registered: write after /health lists it.
    for (let tries = 0; tries < 300; tries++) {
      const h = (await (await fetch(`${hooks.api}/health`, { headers: benchAuth })).json()) as { webhooks?: unknown[] | null };
      if (Array.isArray(h.webhooks) && h.webhooks.length > 0) break;
      await sleep(100);
    }
    const rates: number[] = [];
    const ingest: number[] = [];
    let n = 0;
    for (let r = 0; r < rounds; r++) {
      const uuids: string[] = [];
      const t0 = performance.now();
      for (let b = 0; b < perRound / BATCH; b++) {
        const batch = docs(opts.seed + 19, n, BATCH);
        n += BATCH;
        uuids.push(...batch.map((d) => d.uuid as string));
        await post(`${hooks.api}/vcons/batch`, JSON.stringify(batch), 201);
      }
      ingest.push(perRound / ((performance.now() - t0) / 1000));
      if (!(await until(() => uuids.every((u) => arrivals.has(u)), 300_000))) {
        notes.push(`changes: webhook round ${r + 1} got ${uuids.filter((u) => arrivals.has(u)).length} of ${perRound} deliveries in 300 s`);
        continue;
      }
      const times = uuids.map((u) => arrivals.get(u)!);
      const first = Math.min(...times);
      const last = Math.max(...times);
      rates.push((perRound - 1) / ((last - first) / 1000));
      opts.log(
        `  webhook round ${r + 1}/${rounds}: ${rates.at(-1)!.toFixed(0)} deliveries/s (writes acknowledged at ${ingest.at(-1)!.toFixed(0)} vCons/s)`,
      );
      await indexDrained(hooks.api, 120_000);
    }
    await hooks.child.stop();
    return [
      makeFigure({
        id: 'changes.webhooks',
        label: 'Webhook deliveries per second to a local receiver',
        unit: 'deliveries/s',
        better: 'higher',
        rounds: rates,
        note: `one endpoint on 127.0.0.1 answering 204 at once, one server process (4 attempts in flight per endpoint); ${perRound} batch-written vCons a round, from the round's first delivery to its last; writes acknowledged at ${median(ingest).toFixed(0)} vCons/s; ${repeats} repeated deliveries`,
      }),
    ];
  } finally {
    receiver.closeAllConnections();
    await new Promise<void>((r) => receiver.close(() => r()));
  }
}

/**
 * What the log costs a batch write. There is no switch that turns the log off, so the comparison
 * is the same server and statements on a second schema whose change_log drops every row: a
 * BEFORE INSERT trigger returns null, and the cursor's default is removed, so no sequence value is
 * drawn. What remains there of the log is the trigger's call per row.
 */
async function logCostFigures(
  opts: ChangesOptions,
  start: Start,
  pgPidsOf: (name: string, schema: string) => () => Promise<number[]>,
  admin: postgres.Sql,
): Promise<Figure[]> {
  const rounds = opts.quick ? 3 : 6;
  const perRound = opts.quick ? 300 : 1_000;
  opts.log(`changes: batch ingest with and without the change log, ${rounds} rounds of ${perRound} each`);
  const withLog = await start('changes-log');
  const without = await start('changes-nolog');
  await admin.unsafe(`create function "${without.schema}".drop_change() returns trigger language plpgsql as 'begin return null; end'`);
  await admin.unsafe(
    `create trigger drop_change before insert on "${without.schema}".change_log for each row execute function "${without.schema}".drop_change()`,
  );
  await admin.unsafe(`alter table "${without.schema}".change_log alter column cursor drop default`);
  const sides = [
    { name: 'changes-log', ...withLog, rates: [] as number[], cpu: [] as number[], pg: [] as number[] },
    { name: 'changes-nolog', ...without, rates: [] as number[], cpu: [] as number[], pg: [] as number[] },
  ];
  // One warm-up batch each: JIT, prepared statements, the index thread started.
  for (const s of sides) {
    await post(`${s.api}/vcons/batch`, JSON.stringify(docs(opts.seed + 23, 0, BATCH)), 201);
    await indexDrained(s.api, 120_000);
  }
  let next = BATCH;
  for (let r = 0; r < rounds; r++) {
    const batch = generateBodies(opts.seed + 23, next, perRound);
    next += perRound;
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const pgPids = pgPidsOf(s.name, s.schema);
      const mark0 = await cpuMark(s.child.pid, pgPids);
      const t0 = performance.now();
      for (const body of batch) await post(`${s.api}/vcons/batch`, body, 201);
      const wall = performance.now() - t0;
      const mark1 = await cpuMark(s.child.pid, pgPids);
      const parts = cpuParts(mark0, mark1, s.child.pid, perRound / 100);
      s.rates.push(perRound / (wall / 1000));
      s.cpu.push(parts.main + parts.other + (Number.isNaN(parts.pg) ? 0 : parts.pg));
      s.pg.push(parts.pg);
      await indexDrained(s.api, 120_000);
    }
    opts.log(
      `  round ${r + 1}/${rounds}: with the log ${sides[0].rates[r].toFixed(0)} vCons/s, ${sides[0].cpu[r].toFixed(1)} ms CPU/100; without ${sides[1].rates[r].toFixed(0)} vCons/s, ${sides[1].cpu[r].toFixed(1)} ms CPU/100`,
    );
  }
  const [{ logged }] = await admin.unsafe<{ logged: number }[]>(`select count(*)::int as logged from "${withLog.schema}".change_log`);
  const [{ dropped }] = await admin.unsafe<{ dropped: number }[]>(`select count(*)::int as dropped from "${without.schema}".change_log`);
  // The entries alone: PostgreSQL's execution time of 100 of them (the statement's default
  // expressions, the row, its index entry, its WAL), in transactions rolled back.
  const entryMs: number[] = [];
  for (let i = 0; i < 20; i++) {
    await admin
      .begin(async (tx) => {
        const [plan] = await tx.unsafe<{ 'QUERY PLAN': { 'Execution Time': number }[] }[]>(
          `explain (analyze, format json) insert into "${withLog.schema}".change_log (uuid, kind, key_id)
           select gen_random_uuid(), 'created', null from generate_series(1, 100)`,
        );
        entryMs.push(plan['QUERY PLAN'][0]['Execution Time']);
        throw new RolledBack();
      })
      .catch((err: unknown) => {
        if (!(err instanceof RolledBack)) throw err;
      });
  }
  const [l, w] = sides;
  const how =
    'without = the same server and statements on a schema whose change_log drops each row (a BEFORE INSERT trigger returning null; no cursor drawn)';
  const pgNote = Number.isNaN(median(l.pg)) ? '' : `; PostgreSQL alone ${median(l.pg).toFixed(1)} vs ${median(w.pg).toFixed(1)} ms per 100 vCons`;
  return [
    makeFigure({
      id: 'changes.log_cost.rate',
      label: 'Batch ingest with the change log (vCons/s)',
      unit: 'vCons/s',
      better: 'higher',
      rounds: l.rates,
      floor: { label: 'the same without its entries', rounds: w.rates },
      goal: { kind: 'ratio', min: 0.95 },
      note: `${how}; ${logged} entries logged, ${dropped} kept by the other schema; POST /vcons/batch of ${BATCH}, 1 writer, rounds alternating`,
    }),
    makeFigure({
      id: 'changes.log_cost.cpu',
      label: 'Batch ingest CPU with the change log (server + PostgreSQL, per 100 vCons acknowledged)',
      unit: 'ms',
      better: 'lower',
      rounds: l.cpu,
      floor: { label: 'the same without its entries', rounds: w.cpu },
      note: `from /proc while the writes were acknowledged: the server's main and other threads (not the index thread, whose work is the same) and its database backends${pgNote}`,
    }),
    makeFigure({
      id: 'changes.log_cost.share',
      label: "The log's entries' share of a batch write's CPU",
      unit: '%',
      better: 'lower',
      rounds: entryMs.map((ms) => (100 * ms) / median(l.cpu)),
      goal: { kind: 'max', value: 5 },
      note: `PostgreSQL's execution time of 100 entries (EXPLAIN ANALYZE of the insert, rolled back): median ${median(entryMs).toFixed(2)} ms, against the ${median(l.cpu).toFixed(1)} ms of CPU a batch of 100 costs with the log (above)`,
    }),
  ];
}

/** Ends a measuring transaction by rolling it back. */
class RolledBack extends Error {}

/** Bodies of `n` bench vCons (fresh uuids) in batches of BATCH, serialised before any clock starts. */
function generateBodies(seed: number, from: number, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i += BATCH) out.push(JSON.stringify(docs(seed, from + i, Math.min(BATCH, n - i))));
  return out;
}
