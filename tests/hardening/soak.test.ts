// A bounded soak of a real vcon-server process over loopback: 64 connections of mixed reads,
// writes, searches and tag writes for SOAK_SECONDS (default 300). Zero errors allowed (every
// answer a 2xx, none over its timeout) and no unbounded memory growth: the server's RSS is read
// from /proc at the start, the middle and the end.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl, testSchemaName } from '../helpers/db.js';
import { percentile, request, rssKiB, sampleVcon, sleep, spawnServer, stopAndDrop, type Outcome, type ServerProcess } from './helpers.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const CONNECTIONS = 64;
const SEED = 300;
// A ceiling for a hung request, not a latency bound: on a loaded machine requests queue for the
// CPU (latencies are in the report).
const TIMEOUT_MS = 60_000;
const WORDS = ['refund', 'broken', 'order', 'reimbursement', 'agent', 'kettle', 'delivery', 'invoice', 'hello', 'sorry'];

const schema = testSchemaName('hard_soak');
let server: ServerProcess;

beforeAll(async () => {
  server = await spawnServer({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, VCON_INSTANCE_LABEL: 'soak', DB_POOL_MAX: '20' });
}, 120_000);

afterAll(() => stopAndDrop(server, schema));

type Op = { name: string; weight: number; run(): Promise<Outcome> };

describe(`soak: ${CONNECTIONS} connections for ${SECONDS} s`, () => {
  it('serves mixed traffic with zero errors and bounded memory', async () => {
    const uuids: string[] = [];
    for (let i = 0; i < SEED; i += 100) {
      const docs = Array.from({ length: 100 }, (_, j) => sampleVcon(randomUUID(), i + j));
      const r = await request(`${server.base}/vcons/batch`, { method: 'POST', json: docs, timeoutMs: 60_000 });
      expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(201);
      uuids.push(...docs.map((d) => d.uuid));
    }
    const pick = () => uuids[Math.floor(Math.random() * uuids.length)];
    const word = () => WORDS[Math.floor(Math.random() * WORDS.length)];
    let n = SEED;
    const b = server.base;
    const ops: Op[] = [
      { name: 'get', weight: 25, run: () => request(`${b}/vcons/${pick()}`, { timeoutMs: TIMEOUT_MS }) },
      { name: 'list', weight: 10, run: () => request(`${b}/vcons?limit=20&offset=${Math.floor(Math.random() * 100)}`, { timeoutMs: TIMEOUT_MS }) },
      {
        name: 'create',
        weight: 20,
        run: async () => {
          const doc = sampleVcon(randomUUID(), n++);
          const o = await request(`${b}/vcons`, { method: 'POST', json: doc, timeoutMs: TIMEOUT_MS });
          if (o.status === 201) uuids.push(doc.uuid);
          return o;
        },
      },
      { name: 'search_content', weight: 10, run: () => request(`${b}/vcons/search/content?q=${word()}`, { timeoutMs: TIMEOUT_MS }) },
      { name: 'search_semantic', weight: 5, run: () => request(`${b}/vcons/search/semantic?q=${word()}+${word()}`, { timeoutMs: TIMEOUT_MS }) },
      { name: 'search_hybrid', weight: 5, run: () => request(`${b}/vcons/search/hybrid?q=${word()}`, { timeoutMs: TIMEOUT_MS }) },
      {
        name: 'tag_set',
        weight: 10,
        run: () => request(`${b}/vcons/${pick()}/tags/status`, { method: 'PUT', json: { value: word() }, timeoutMs: TIMEOUT_MS }),
      },
      {
        name: 'tag_search',
        weight: 5,
        run: () => request(`${b}/tags/search?tags=${encodeURIComponent(JSON.stringify({ status: word() }))}`, { timeoutMs: TIMEOUT_MS }),
      },
      { name: 'tags_get', weight: 5, run: () => request(`${b}/vcons/${pick()}/tags`, { timeoutMs: TIMEOUT_MS }) },
      {
        name: 'append_analysis',
        weight: 5,
        run: () =>
          request(`${b}/vcons/${pick()}/analysis`, {
            method: 'POST',
            json: { type: 'note', vendor: 'soak', body: `note ${word()}`, encoding: 'none' },
            timeoutMs: TIMEOUT_MS,
          }),
      },
    ];
    const total = ops.reduce((s, o) => s + o.weight, 0);
    const choose = () => {
      let x = Math.random() * total;
      for (const o of ops) if ((x -= o.weight) < 0) return o;
      return ops[0];
    };

    const stats = new Map<string, { count: number; errors: number; ms: number[] }>(ops.map((o) => [o.name, { count: 0, errors: 0, ms: [] }]));
    const errors: { op: string; status: number | string; body?: unknown }[] = [];
    const rss: { t: number; kib: number }[] = [];
    const t0 = Date.now();
    const deadline = t0 + SECONDS * 1000;
    const sampler = setInterval(() => rss.push({ t: (Date.now() - t0) / 1000, kib: rssKiB(server.pid) }), 1_000);
    rss.push({ t: 0, kib: rssKiB(server.pid) });

    const worker = async () => {
      while (Date.now() < deadline) {
        const op = choose();
        const o = await op.run();
        const s = stats.get(op.name)!;
        s.count++;
        s.ms.push(o.ms);
        if (o.status < 200 || o.status >= 300) {
          s.errors++;
          if (errors.length < 20) errors.push({ op: op.name, status: o.status || o.error!, body: o.body });
        }
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, worker));
    clearInterval(sampler);
    rss.push({ t: (Date.now() - t0) / 1000, kib: rssKiB(server.pid) });
    await sleep(0);

    const all = [...stats.values()];
    const requests = all.reduce((s, x) => s + x.count, 0);
    const errorCount = all.reduce((s, x) => s + x.errors, 0);
    const at = (frac: number) => rss[Math.min(rss.length - 1, Math.round(frac * (rss.length - 1)))].kib;
    const mib = (k: number) => Math.round(k / 1024);
    // "start" is after 10% of the run: the first seconds load caches and warm the JIT.
    const report = {
      seconds: SECONDS,
      connections: CONNECTIONS,
      requests,
      errors: errorCount,
      rps: Math.round(requests / ((Date.now() - t0) / 1000)),
      rss_mib: {
        initial: mib(rss[0].kib),
        start: mib(at(0.1)),
        middle: mib(at(0.5)),
        end: mib(rss[rss.length - 1].kib),
        max: mib(Math.max(...rss.map((r) => r.kib))),
      },
      ops: Object.fromEntries(
        [...stats].map(([k, v]) => [
          k,
          { count: v.count, errors: v.errors, p50_ms: Math.round(percentile(v.ms, 50)), p99_ms: Math.round(percentile(v.ms, 99)) },
        ]),
      ),
      stored_vcons: uuids.length,
    };
    console.log(`[hardening] soak: ${JSON.stringify(report)}`);

    expect(server.proc.exitCode).toBeNull();
    expect(errors).toEqual([]);
    expect(errorCount).toBe(0);
    for (const [name, s] of stats) expect(s.count, name).toBeGreaterThan(0);
    // Bounded memory: the second half of the run does not keep growing like the first warm-up,
    // and the end stays within 1.5x (+64 MiB) of the warmed-up start.
    const start = at(0.1);
    const middle = at(0.5);
    const end = rss[rss.length - 1].kib;
    expect(end).toBeLessThan(start * 1.5 + 64 * 1024);
    expect(end - middle).toBeLessThan(Math.max(middle - start, 0) + 48 * 1024);
    // Still healthy and consistent afterwards.
    const h = await request(`${server.base}/health`);
    expect(h.status).toBe(200);
  });
});
