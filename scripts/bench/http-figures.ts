// Route-against-floor figures over HTTP: the real server and the floor server take the same
// request stream, in alternating rounds, and each round yields req/s, p50 and p95.
import { indexDrained, runAutocannon, type LoadRound, type LoadSpec } from './load.js';
import { makeFigure, type Figure, type Goal } from './stats.js';

export interface RouteCase {
  id: string;
  label: string;
  method?: 'GET' | 'POST';
  connections: number;
  /** Request path under the API base (the same for the server and the floor). */
  path?: () => string;
  body?: () => string;
  /** Slow routes: rounds last at least this long, so that each completes some requests. */
  minSeconds?: number;
  /** Goal on the req/s ratio. */
  goal?: Goal;
  /** Goal on the server's CPU per request (µs). */
  cpuGoal?: Goal;
  note?: string;
  /** Writes: each server round ends when the server has indexed them (their indexing CPU counts). */
  settleIndex?: boolean;
}

export interface Targets {
  serverApi: string;
  floorApi: string;
  serverPid?: number;
  floorPid?: number;
  rounds: number;
  seconds: number;
  log: (msg: string) => void;
}

/** Runs one case; returns the req/s, p50 and p95 figures (each with the floor's series). */
export async function measureRoute(c: RouteCase, t: Targets): Promise<Figure[]> {
  const server: LoadRound[] = [];
  const floor: LoadRound[] = [];
  const spec = (url: string): LoadSpec => ({
    url,
    pid: url === t.serverApi ? t.serverPid : t.floorPid,
    method: c.method,
    connections: c.connections,
    seconds: Math.max(t.seconds, c.minSeconds ?? 0),
    path: c.path,
    body: c.body,
    settle: c.settleIndex && url === t.serverApi ? () => indexDrained(url) : undefined,
  });
  // One short unmeasured round each: JIT, plan and connection warm-up.
  await runAutocannon({ ...spec(t.serverApi), seconds: 0.5 });
  await runAutocannon({ ...spec(t.floorApi), seconds: 0.5 });
  for (let r = 0; r < t.rounds; r++) {
    if (r % 2 === 0) {
      server.push(await runAutocannon(spec(t.serverApi)));
      floor.push(await runAutocannon(spec(t.floorApi)));
    } else {
      floor.push(await runAutocannon(spec(t.floorApi)));
      server.push(await runAutocannon(spec(t.serverApi)));
    }
    const s = server[r];
    const f = floor[r];
    t.log(
      `  ${c.id} round ${r + 1}/${t.rounds}: server ${s.rps.toFixed(0)} req/s p50 ${s.p50.toFixed(1)} p95 ${s.p95.toFixed(1)} ms` +
        `, ${s.cpuUs.toFixed(0)} µs CPU/req (threads: main ${s.threadsUs.main.toFixed(0)}, busiest other ${s.threadsUs.busiest.toFixed(0)}, rest ${s.threadsUs.rest.toFixed(0)})${s.errors ? ` (${s.errors} errors: ${JSON.stringify(s.statuses)})` : ''}; floor ${f.rps.toFixed(0)} req/s p50 ${f.p50.toFixed(1)} p95 ${f.p95.toFixed(1)} ms, ${f.cpuUs.toFixed(0)} µs CPU/req`,
    );
  }
  const errors = server.reduce((n, r) => n + r.errors, 0);
  const note = [c.note, errors ? `${errors} failed requests` : ''].filter(Boolean).join('; ') || undefined;
  const floorLabel = 'node:http + postgres.js, same query';
  const base = `${c.label} @${c.connections}`;
  return [
    makeFigure({
      id: `${c.id}.rps`,
      label: `${base} req/s`,
      unit: 'req/s',
      better: 'higher',
      rounds: server.map((x) => x.rps),
      floor: { label: floorLabel, rounds: floor.map((x) => x.rps) },
      goal: c.goal,
      note,
    }),
    makeFigure({
      id: `${c.id}.p50`,
      label: `${base} p50`,
      unit: 'ms',
      better: 'lower',
      rounds: server.map((x) => x.p50),
      floor: { label: floorLabel, rounds: floor.map((x) => x.p50) },
    }),
    makeFigure({
      id: `${c.id}.cpu`,
      label: `${c.label} server CPU/req`,
      unit: 'µs',
      better: 'lower',
      rounds: server.map((x) => x.cpuUs),
      floor: { label: floorLabel, rounds: floor.map((x) => x.cpuUs) },
      goal: c.cpuGoal,
      note: 'CPU time of the server process per request, from /proc: robust to other load on the machine',
    }),
    makeFigure({
      id: `${c.id}.p95`,
      label: `${base} p95`,
      unit: 'ms',
      better: 'lower',
      rounds: server.map((x) => x.p95),
      floor: { label: floorLabel, rounds: floor.map((x) => x.p95) },
    }),
  ];
}
