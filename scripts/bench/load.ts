// Load generation: autocannon for closed-loop throughput at N connections (latencies recorded per
// response, so p50/p95 are exact), and a plain sequential client for latency at concurrency 1.
import autocannon from 'autocannon';
import { benchAuth, readCpuMs, readThreadCpuMs } from './processes.js';
import { percentile } from './stats.js';

export interface LoadRound {
  rps: number;
  /** CPU time the target process used per successful request, in µs (when its pid is known). */
  cpuUs: number;
  /**
   * Where cpuUs went, per request: the main (request) thread, the busiest other thread (in a
   * vcon-server the index thread) and all the others (V8's GC and compiler threads, libuv's pool).
   * Threads that ended during the round are left out of the split.
   */
  threadsUs: { main: number; busiest: number; rest: number };
  p50: number;
  p95: number;
  requests: number;
  errors: number;
  /** Responses by status class, e.g. { '2xx': 1000 }. */
  statuses: Record<string, number>;
}

export interface LoadSpec {
  url: string;
  method?: 'GET' | 'POST';
  connections: number;
  seconds: number;
  headers?: Record<string, string>;
  /** Path of each request (called once per request), relative to url. */
  path?: () => string;
  /** Body of each request (called once per request). */
  body?: () => string;
  /** The target's pid, to measure its CPU time per request. */
  pid?: number;
  /**
   * Waits for the target's background work of the round (a server's indexing of the round's
   * writes) before its CPU time is read: that work is part of what the requests cost.
   */
  settle?: () => Promise<void>;
}

/** One closed-loop round with autocannon. */
export async function runAutocannon(spec: LoadSpec): Promise<LoadRound> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.seconds,
    method: spec.method ?? 'GET',
    headers: { 'content-type': 'application/json', ...benchAuth, ...spec.headers },
    requests: [
      {
        setupRequest: (req: Record<string, unknown>) => ({
          ...req,
          ...(spec.path ? { path: new URL(spec.url).pathname.replace(/\/$/, '') + spec.path() } : {}),
          ...(spec.body ? { body: spec.body() } : {}),
        }),
      },
    ],
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    latencies.push(ms);
    const cls = `${Math.floor(status / 100)}xx`;
    statuses[cls] = (statuses[cls] ?? 0) + 1;
  });
  const cpu0 = spec.pid ? readCpuMs(spec.pid) : NaN;
  const threads0 = spec.pid ? readThreadCpuMs(spec.pid) : new Map<number, number>();
  const result = await instance;
  await spec.settle?.();
  const cpu1 = spec.pid ? readCpuMs(spec.pid) : NaN;
  const threads1 = spec.pid ? readThreadCpuMs(spec.pid) : new Map<number, number>();
  const ok = statuses['2xx'] ?? 0;
  const seconds = result.duration || spec.seconds;
  return {
    rps: ok / seconds,
    cpuUs: ok > 0 ? ((cpu1 - cpu0) * 1000) / ok : NaN,
    threadsUs: splitThreads(threads0, threads1, spec.pid ?? 0, ok),
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    requests: latencies.length,
    errors: result.errors + result.timeouts + latencies.length - ok,
    statuses,
  };
}

function splitThreads(before: Map<number, number>, after: Map<number, number>, pid: number, ok: number) {
  const us = (ms: number) => (ok > 0 ? (ms * 1000) / ok : NaN);
  let main = NaN;
  let busiest = 0;
  let rest = 0;
  for (const [tid, ms] of after) {
    const d = ms - (before.get(tid) ?? 0);
    if (tid === pid) main = d;
    else {
      rest += Math.min(d, busiest);
      busiest = Math.max(d, busiest);
    }
  }
  return { main: us(main), busiest: us(busiest), rest: us(rest) };
}

/**
 * Waits until a server's /health shows no vCon queued for indexing (at most `maxMs`): the settle
 * of a write round.
 */
export async function indexDrained(api: string, maxMs = 30_000): Promise<void> {
  let last = 'no answer';
  for (const end = performance.now() + maxMs; performance.now() < end;) {
    const res = await fetch(`${api}/health`, { headers: benchAuth });
    const body = (await res.json()) as { index?: { pending?: number; failing?: number } | null };
    // Rows whose embedding failed wait for a retry: they are not this round's indexing to settle.
    if (body.index && body.index.pending !== undefined && body.index.pending - (body.index.failing ?? 0) === 0) return;
    last = JSON.stringify(body.index ?? null);
    await new Promise((r) => setTimeout(r, 50));
  }
  // A round that never settled would report CPU without its indexing: no figure rather than a wrong one.
  throw new Error(`the index queue did not drain within ${maxMs} ms (last /health index: ${last})`);
}

/** Sequential requests (concurrency 1): per-request latencies in ms and the non-2xx count. */
export async function runSequential(urls: string[], headers: Record<string, string> = benchAuth): Promise<{ latencies: number[]; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  for (const u of urls) {
    const t0 = performance.now();
    const res = await fetch(u, { headers });
    await res.arrayBuffer();
    latencies.push(performance.now() - t0);
    if (!res.ok) errors++;
  }
  return { latencies, errors };
}
