import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';
import { startTestServer, KEY, RO_KEY, type TestServer } from '../helpers/server.js';
import { connectHttp } from '../mcp/helpers.js';
import { waitFor } from '../helpers/poll.js';

const METRICS_KEY = 'scraper-secret-0123456789';
let s: TestServer;
let root: string;

beforeAll(async () => {
  s = await startTestServer({ METRICS_KEY });
  root = s.instance.url!;
});
afterAll(async () => {
  await s?.close();
});

type Scrape = Map<string, PromFamily> & { text: string };

async function scrape(key: string | null = RO_KEY): Promise<Scrape> {
  const r = await fetch(`${root}/metrics`, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await r.text();
  // The parser throws on any line that is not the text format.
  return Object.assign(new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f])), { text });
}

/**
 * A histogram's count for one label set, from its `_count` line: the parser merges a labelled
 * histogram's series into one (it keeps the buckets of the last label set only).
 */
function histogramCount(m: Scrape, name: string, labels: Record<string, string>): number {
  let total = 0;
  for (const line of m.text.split('\n')) {
    if (!line.startsWith(`${name}_count{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** The value of one sample of a family whose labels include `labels`. */
function valueOf(m: Scrape, name: string, labels: Record<string, string> = {}): number {
  const family = m.get(name);
  if (!family) throw new Error(`no metric ${name}`);
  const sample = family.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  if (!sample) return 0;
  return Number(sample.value ?? sample.count);
}

describe('GET /metrics', () => {
  it('is served at the root to any key of the group or METRICS_KEY, never without one', async () => {
    expect((await fetch(`${root}/metrics`)).status).toBe(401);
    const wrong = await fetch(`${root}/metrics`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ success: false, error: 'unauthorized', message: 'API key invalid' });
    for (const key of [KEY, RO_KEY, METRICS_KEY]) expect((await scrape(key)).size).toBeGreaterThan(10);
    // Not a REST route: not under the base path.
    expect((await s.api('/metrics')).status).toBe(404);
  });

  it('parses with a Prometheus text-format parser and its figures move with requests', async () => {
    const before = await scrape();
    const created = await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', parties: [{ name: 'A' }] } });
    expect(created.status).toBe(201);
    for (let i = 0; i < 3; i++) expect((await s.api(`/vcons/${created.body.uuid}`)).status).toBe(200);
    expect((await s.api('/vcons/not-a-uuid')).status).toBe(400);
    expect((await s.api('/vcons', { key: 'wrong' })).status).toBe(401);
    const after = await scrape();

    const moved = (labels: Record<string, string>) =>
      valueOf(after, 'vcon_http_requests_total', labels) - valueOf(before, 'vcon_http_requests_total', labels);
    expect(moved({ method: 'GET', route: '/vcons/:uuid', status: '200' })).toBe(3);
    expect(moved({ method: 'POST', route: '/vcons', status: '201' })).toBe(1);
    expect(moved({ method: 'GET', route: '/vcons/:uuid', status: '400' })).toBe(1);
    // The latency histogram counts the same requests.
    const timed = { method: 'GET', route: '/vcons/:uuid', status: '200' };
    expect(
      histogramCount(after, 'vcon_http_request_duration_seconds', timed) - histogramCount(before, 'vcon_http_request_duration_seconds', timed),
    ).toBe(3);
    expect(after.get('vcon_http_request_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(
      valueOf(after, 'vcon_http_errors_total', { code: 'invalid_parameter' }) -
        valueOf(before, 'vcon_http_errors_total', { code: 'invalid_parameter' }),
    ).toBe(1);
    expect(
      valueOf(after, 'vcon_http_errors_total', { code: 'unauthorized' }) - valueOf(before, 'vcon_http_errors_total', { code: 'unauthorized' }),
    ).toBe(1);

    // Pool, database, index, busy answers, process memory and event-loop delay.
    expect(valueOf(after, 'vcon_db_pool_size')).toBe(s.instance.config.db.pool.requests);
    expect(valueOf(after, 'vcon_db_pool_waiting')).toBe(0);
    expect(valueOf(after, 'vcon_database_up')).toBe(1);
    expect(valueOf(after, 'vcon_database_busy_total')).toBe(0);
    expect(after.has('vcon_index_queue_pending')).toBe(true);
    expect(after.has('vcon_index_queue_lag_seconds')).toBe(true);
    expect(valueOf(after, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(after.has('nodejs_eventloop_lag_p99_seconds')).toBe(true);
  });

  it('counts MCP sessions and change-feed streams and events', async () => {
    expect(valueOf(await scrape(), 'vcon_mcp_sessions', { scope: 'read' })).toBe(0);
    const mcp = await connectHttp(root, RO_KEY);
    try {
      expect(valueOf(await scrape(), 'vcon_mcp_sessions', { scope: 'read' })).toBe(1);
    } finally {
      await mcp.close();
    }

    const aborter = new AbortController();
    const stream = await fetch(`${s.base}/changes/stream`, { headers: { authorization: `Bearer ${KEY}` }, signal: aborter.signal });
    expect(stream.status).toBe(200);
    try {
      const open = await waitFor(async () => {
        const m = await scrape();
        return valueOf(m, 'vcon_change_streams_open') === 1 ? m : undefined;
      });
      const sent = valueOf(open, 'vcon_change_events_sent_total');
      expect((await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', parties: [{ name: 'B' }] } })).status).toBe(201);
      await waitFor(async () => valueOf(await scrape(), 'vcon_change_events_sent_total') > sent, 60_000, 50, 'the stream to be sent the new entry');
    } finally {
      aborter.abort();
    }
    await waitFor(async () => valueOf(await scrape(), 'vcon_change_streams_open') === 0, 60_000, 50, 'the stream to close');
  });
});
