// Load generation: autocannon for closed-loop throughput at N connections (latencies recorded per
// response, so p50/p95 are exact), and a plain sequential client for latency at concurrency 1.
import autocannon from 'autocannon';
import { benchAuth, readCpuMs } from './processes.js';
import { percentile } from './stats.js';

export interface LoadRound {
  rps: number;
  /** CPU time the target process used per successful request, in µs (when its pid is known). */
  cpuUs: number;
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
  const result = await instance;
  const cpu1 = spec.pid ? readCpuMs(spec.pid) : NaN;
  const ok = statuses['2xx'] ?? 0;
  const seconds = result.duration || spec.seconds;
  return {
    rps: ok / seconds,
    cpuUs: ok > 0 ? ((cpu1 - cpu0) * 1000) / ok : NaN,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    requests: latencies.length,
    errors: result.errors + result.timeouts + latencies.length - ok,
    statuses,
  };
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
