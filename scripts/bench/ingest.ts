// Batch ingest against its floor, and the bulk load of the rest of the corpus.
import os from 'node:os';
import type { Sql } from 'postgres';
import { generateVcon } from './corpus.js';
import { benchAuth, cpuMark, cpuParts, readCpuMs, type CpuParts } from './processes.js';
import { indexDrained } from './load.js';
import { makeFigure, median, type Figure } from './stats.js';

export const BATCH = 100;

/**
 * Creates the floor tables: uuid primary key, jsonb document, lz4 when the server has it.
 * floor_docs takes the direct floor's rows, floor_http_docs the HTTP floor's (the same documents).
 */
export async function createFloorTable(sql: Sql): Promise<{ lz4: boolean }> {
  try {
    await sql`create table floor_docs (uuid uuid primary key, doc jsonb compression lz4 not null)`;
    await sql`create table floor_http_docs (like floor_docs including all)`;
    return { lz4: true };
  } catch (err) {
    // Only a server built without lz4 falls back; anything else is a real failure of the bench.
    if ((err as { code?: string }).code !== '0A000') throw err;
    await sql`create table floor_docs (uuid uuid primary key, doc jsonb not null)`;
    await sql`create table floor_http_docs (like floor_docs including all)`;
    return { lz4: false };
  }
}

async function postBatch(api: string, body: string, expect = 201): Promise<void> {
  const res = await fetch(`${api}/vcons/batch`, { method: 'POST', headers: { 'content-type': 'application/json', ...benchAuth }, body });
  const text = await res.text();
  if (res.status !== expect) throw new Error(`POST /vcons/batch answered ${res.status}: ${text.slice(0, 500)}`);
}

/**
 * Interleaved rounds: each round sends the same fresh documents to the server (POST /vcons/batch
 * of 100, one writer, bodies serialised before the clock starts) and to the floor (postgres.js
 * `sql(rows)` into the bare table, batches of 100, one writer). The server's figure is the rate of
 * acknowledged writes; its indexing backlog is drained before the floor's round. With
 * `httpFloorApi`, the same bodies also go to the floor server's POST /vcons/batch (node:http, the
 * body parsed, the same insert): what HTTP alone leaves of the floor. Returns the figures and how
 * many vCons the server now holds.
 */
export async function measureIngest(opts: {
  api: string;
  floorSql: Sql;
  seed: number;
  rounds: number;
  perRound: number;
  lz4: boolean;
  /** The floor server's URL: the HTTP floor's side of each round (none without it). */
  httpFloorApi?: string;
  /** The server's pid, for its CPU time per vCon. */
  serverPid?: number;
  /** The database's backends serving the server (for the CPU budget; none when not local). */
  pgPids?: () => Promise<number[]>;
  log: (msg: string) => void;
}): Promise<{ figures: Figure[]; stored: number }> {
  const server: number[] = [];
  const serverCpu: number[] = [];
  const floor: number[] = [];
  const httpFloor: number[] = [];
  // Per round: CPU per 100 vCons of each part while the writes are acknowledged, and until indexed.
  const writing: { parts: CpuParts; wall: number }[] = [];
  const whole: CpuParts[] = [];
  const pgPids = opts.pgPids ?? (async () => []);
  let next = 0;
  for (let r = 0; r < opts.rounds; r++) {
    const docs = Array.from({ length: opts.perRound }, (_, k) => generateVcon(opts.seed, next + k));
    next += opts.perRound;
    const bodies: string[] = [];
    for (let i = 0; i < docs.length; i += BATCH) bodies.push(JSON.stringify(docs.slice(i, i + BATCH)));
    const runServer = async () => {
      const mark0 = opts.serverPid ? await cpuMark(opts.serverPid, pgPids) : undefined;
      const t0 = performance.now();
      const cpu0 = opts.serverPid ? readCpuMs(opts.serverPid) : NaN;
      for (const b of bodies) await postBatch(opts.api, b);
      const wall = performance.now() - t0;
      server.push(docs.length / (wall / 1000));
      const mark1 = opts.serverPid ? await cpuMark(opts.serverPid, pgPids) : undefined;
      // The round's indexing settles before the floor's round starts (it would take the floor's CPU)
      // and its CPU counts: the rate is of acknowledged writes, the CPU is of the whole work.
      await indexDrained(opts.api, 60_000);
      serverCpu.push(((opts.serverPid ? readCpuMs(opts.serverPid) : NaN) - cpu0) / docs.length);
      if (mark0 && mark1 && opts.serverPid) {
        const hundreds = docs.length / BATCH;
        writing.push({ parts: cpuParts(mark0, mark1, opts.serverPid, hundreds), wall: wall / hundreds });
        whole.push(cpuParts(mark0, await cpuMark(opts.serverPid, pgPids), opts.serverPid, hundreds));
      }
    };
    const runFloor = async () => {
      const t0 = performance.now();
      for (let i = 0; i < docs.length; i += BATCH) {
        const rows = docs.slice(i, i + BATCH).map((d) => ({ uuid: d.uuid as string, doc: opts.floorSql.json(d as never) }));
        await opts.floorSql`insert into floor_docs ${opts.floorSql(rows)}`;
      }
      floor.push(docs.length / ((performance.now() - t0) / 1000));
    };
    const runHttpFloor = async () => {
      if (!opts.httpFloorApi) return;
      const t0 = performance.now();
      for (const b of bodies) await postBatch(opts.httpFloorApi, b, 200);
      httpFloor.push(docs.length / ((performance.now() - t0) / 1000));
    };
    // Alternate the order so that drift in machine load hits every side alike.
    const sides = [runServer, runFloor, runHttpFloor];
    for (const side of r % 2 === 0 ? sides : sides.reverse()) await side();
    const http = opts.httpFloorApi ? `, HTTP floor ${httpFloor[r].toFixed(0)} vCons/s` : '';
    opts.log(`  ingest round ${r + 1}/${opts.rounds}: server ${server[r].toFixed(0)} vCons/s, floor ${floor[r].toFixed(0)} vCons/s${http}`);
  }
  const figure = makeFigure({
    id: 'ingest.batch',
    label: 'POST /vcons/batch (100/batch, 1 writer)',
    unit: 'vCons/s',
    better: 'higher',
    rounds: server,
    floor: { label: `postgres.js sql(rows) into bare jsonb${opts.lz4 ? ' lz4' : ' (pglz: lz4 unavailable)'} table`, rounds: floor },
    goal: { kind: 'ratio', min: 0.5 },
  });
  const cpu = makeFigure({
    id: 'ingest.batch.cpu',
    label: 'POST /vcons/batch server CPU per vCon',
    unit: 'ms',
    better: 'lower',
    rounds: serverCpu,
    note: 'CPU time of the server process per stored vCon, its search indexing included (the round ends when the index queue is empty; PostgreSQL not included), from /proc',
  });
  // Informational: the direct floor has no HTTP in it, the other floors of the bench do (node:http).
  const viaHttp =
    httpFloor.length > 0
      ? [
          makeFigure({
            id: 'ingest.batch.http_floor',
            label: 'POST /vcons/batch against the HTTP floor (100/batch, 1 writer)',
            unit: 'vCons/s',
            better: 'higher',
            rounds: server,
            floor: { label: "node:http, body read and JSON.parse, then the direct floor's insert", rounds: httpFloor },
            note: `the HTTP floor itself is ${(median(httpFloor) / median(floor)).toFixed(2)} × the direct floor: the body's transfer and parse, before any work of the server's own`,
          }),
        ]
      : [];
  return { figures: [figure, ...viaHttp, cpu, ...budgetFigures(writing, whole)], stored: next };
}

const partsTotal = (p: CpuParts) => p.main + p.index + p.other + (Number.isNaN(p.pg) ? 0 : p.pg) + p.client;

/** "main 19.0, index thread 22.1, …" of the medians over rounds, ms per 100 vCons. */
function partsText(rounds: CpuParts[]): string {
  const m = (k: keyof CpuParts) => median(rounds.map((r) => r[k]));
  const f = (v: number) => (Number.isNaN(v) ? 'n/a (database not on this machine)' : v.toFixed(1));
  return `main thread ${f(m('main'))}, index thread ${f(m('index'))}, other threads ${f(m('other'))}, PostgreSQL backends ${f(m('pg'))}, bench client ${f(m('client'))}`;
}

/**
 * The CPU budget of batch ingest: what each part of the machine spends per 100 vCons
 * while the writes are acknowledged (the index thread shares the cores with them) and in all
 * until the round is searchable, and how many cores were busy while writing: the rate a machine
 * can reach is bounded by the sum over its cores.
 */
function budgetFigures(writing: { parts: CpuParts; wall: number }[], whole: CpuParts[]): Figure[] {
  if (writing.length === 0) return [];
  const cores = writing.map((w) => partsTotal(w.parts) / w.wall);
  return [
    makeFigure({
      id: 'ingest.batch.budget',
      label: 'Batch ingest: CPU per 100 vCons, written and indexed (server, PostgreSQL, bench client)',
      unit: 'ms',
      better: 'lower',
      rounds: whole.map(partsTotal),
      note: `${partsText(whole)} (ms per 100 vCons, from /proc, medians over rounds)`,
    }),
    makeFigure({
      id: 'ingest.batch.cores',
      label: 'Batch ingest: cores busy while the writes are acknowledged',
      unit: 'cores',
      better: 'lower',
      rounds: cores,
      note: `of ${os.availableParallelism()} on this machine; CPU per 100 vCons acknowledged, meanwhile: ${partsText(writing.map((w) => w.parts))}`,
    }),
  ];
}

/** Loads vCons [from, to) through POST /vcons/batch with `writers` concurrent writers. */
export async function loadCorpus(opts: {
  api: string;
  seed: number;
  from: number;
  to: number;
  writers: number;
  log: (msg: string) => void;
}): Promise<{ seconds: number; perSecond: number }> {
  let next = opts.from;
  const total = opts.to - opts.from;
  const t0 = performance.now();
  let lastReport = t0;
  const writer = async () => {
    while (next < opts.to) {
      const start = next;
      const end = Math.min(opts.to, start + BATCH);
      next = end;
      const docs = [];
      for (let i = start; i < end; i++) docs.push(generateVcon(opts.seed, i));
      await postBatch(opts.api, JSON.stringify(docs));
      const now = performance.now();
      if (now - lastReport > 10_000) {
        lastReport = now;
        const done = next - opts.from;
        opts.log(`  corpus: ${done}/${total} vCons loaded (${(done / ((now - t0) / 1000)).toFixed(0)} vCons/s)`);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.writers }, writer));
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, perSecond: total / seconds };
}

/** Samples /health's index lag (age of the oldest vCon not yet searchable) every `everyMs` until stopped. */
function pollLag(api: string, everyMs = 100): { stop(): Promise<number[]> } {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      const res = await fetch(`${api}/health`).catch(() => undefined);
      const body = res ? ((await res.json().catch(() => ({}))) as { index?: { lag_s?: number } | null }) : {};
      if (typeof body.index?.lag_s === 'number') samples.push(body.index.lag_s);
      await new Promise((r) => setTimeout(r, Math.max(0, everyMs - (performance.now() - t0))));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

/** The sustained ingest goal, as a fraction of the batch floor. */
export const SUSTAINED_GOAL = 0.2;

/**
 * Sustained ingest with search keeping up: batches of 100 paced at a fraction of the
 * floor's rate for `seconds`, while /health's index lag is sampled every 100 ms. Each step waits
 * for the queue to drain before the next. The figure is the highest achieved rate whose lag p95
 * stays within 1 s. The bodies are ready before a step starts: made inside it, the client fell
 * behind its pace (1,740/s paced at 1,791/s), so a step paced at the goal could not reach it
 * whatever the server did.
 */
export async function measureSustained(opts: {
  api: string;
  seed: number;
  from: number;
  floorRate: number;
  fractions: number[];
  seconds: number;
  serverPid?: number;
  pgPids?: () => Promise<number[]>;
  log: (msg: string) => void;
}): Promise<{ figures: Figure[]; stored: number }> {
  let next = opts.from;
  const steps: { fraction: number; achieved: number; lagP95: number; lagMax: number; cores: number }[] = [];
  const pgPids = opts.pgPids ?? (async () => []);
  for (const fraction of opts.fractions) {
    const interval = (BATCH / (opts.floorRate * fraction)) * 1000;
    // The step's bodies are made before its clock starts, as batch ingest's are: generating them
    // inside the step took ~5 ms of the client's CPU per batch from the 2 cores the server uses.
    const bodies: string[] = [];
    for (let b = Math.ceil((opts.seconds * 1000) / interval) + 1; b > 0; b--) {
      const docs = [];
      for (let i = 0; i < BATCH; i++) docs.push(generateVcon(opts.seed, next++));
      bodies.push(JSON.stringify(docs));
    }
    const lag = pollLag(opts.api);
    const mark0 = opts.serverPid ? await cpuMark(opts.serverPid, pgPids) : undefined;
    const t0 = performance.now();
    let sent = 0;
    for (const body of bodies) {
      if (performance.now() - t0 >= opts.seconds * 1000) break;
      const due = t0 + (sent / BATCH) * interval;
      if (due > performance.now()) await new Promise((r) => setTimeout(r, due - performance.now()));
      await postBatch(opts.api, body);
      sent += BATCH;
    }
    // Bodies the step had no time for were never stored: the next step makes those vCons again.
    next -= bodies.length * BATCH - sent;
    const wall = performance.now() - t0;
    const achieved = sent / (wall / 1000);
    // Cores busy over the step (server, its database backends, this client): how near the machine is to saturation.
    const cores = mark0 && opts.serverPid ? partsTotal(cpuParts(mark0, await cpuMark(opts.serverPid, pgPids), opts.serverPid, 1)) / wall : NaN;
    // Drain: the step's last writes count too.
    for (const end = performance.now() + 120_000; performance.now() < end;) {
      const res = await fetch(`${opts.api}/health`);
      const body = (await res.json()) as { index?: { pending?: number } | null };
      if (body.index?.pending === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const samples = await lag.stop();
    const sorted = [...samples].sort((a, b) => a - b);
    const lagP95 = sorted[Math.min(sorted.length - 1, Math.floor(0.95 * sorted.length))] ?? NaN;
    steps.push({ fraction, achieved, lagP95, lagMax: sorted[sorted.length - 1] ?? NaN, cores });
    opts.log(
      `  sustained ${fraction} × floor (${(opts.floorRate * fraction).toFixed(0)} vCons/s): achieved ${achieved.toFixed(0)} vCons/s, index lag p95 ${lagP95.toFixed(2)} s, max ${steps[steps.length - 1].lagMax.toFixed(2)} s, ${cores.toFixed(2)} cores busy`,
    );
  }
  const kept = steps.filter((s) => s.lagP95 <= 1);
  const best = kept.length ? Math.max(...kept.map((s) => s.achieved)) : 0;
  // The lag goal is judged at the goal's pace (0.2 × the floor), whatever other steps ran.
  const first = steps.find((s) => s.fraction === SUSTAINED_GOAL) ?? steps[0];
  return {
    stored: next,
    figures: [
      makeFigure({
        id: 'ingest.sustained',
        label: 'Sustained ingest, search keeping up (lag p95 ≤ 1 s)',
        unit: 'vCons/s',
        better: 'higher',
        rounds: [best],
        floor: { label: 'the batch ingest floor of this run', rounds: [opts.floorRate] },
        goal: { kind: 'ratio', min: SUSTAINED_GOAL },
        note: steps
          .map(
            (s) =>
              `${s.fraction}×: ${s.achieved.toFixed(0)}/s, lag p95 ${s.lagP95.toFixed(2)} s${Number.isNaN(s.cores) ? '' : `, ${s.cores.toFixed(2)} of ${os.availableParallelism()} cores busy`}`,
          )
          .join('; '),
      }),
      makeFigure({
        id: 'ingest.sustained.lag',
        label: `Index lag p95 at ${first.fraction} × floor (${first.achieved.toFixed(0)} vCons/s achieved)`,
        unit: 's',
        better: 'lower',
        rounds: [first.lagP95],
        goal: { kind: 'max', value: 1 },
        note: '/health index.lag_s (age of the oldest vCon not yet searchable), sampled every 100 ms',
      }),
    ],
  };
}
