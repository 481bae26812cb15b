// The index thread within the group's connection budget: its one connection is
// part of DB_POOL_MAX, and it exists only while there is work, so an idle group holds no
// connection and no thread (never started when idle, retired after INDEX_THREAD_IDLE_S), while
// rows a crash left queued are still indexed at the next start without a request.
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_INDEX_THREAD_NICE } from '../../src/config.js';
import { applicationNameOf } from '../../src/db/server-limits.js';
import { adminSql, testSchemaName } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const POOL = 3;

describe('the index thread', () => {
  let s: TestServer;
  const admin = adminSql();
  const connections = async () => {
    const [r] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where application_name = ${applicationNameOf(`label-${s.schema}`, s.schema)}`;
    return r.n;
  };

  // The thread gone (as /health says), then no connection (counted without /health, which needs one).
  const retired = async (what: string) => {
    await waitFor(async () => (await s.api('/health')).body.index.thread === false, 60_000, 100, `the index thread to be retired${what}`);
    await waitFor(async () => (await connections()) === 0, 60_000, 100, `the group to hold no connection${what}`);
  };

  beforeAll(async () => {
    s = await startTestServer({ DB_POOL_MAX: String(POOL), DB_IDLE_TIMEOUT_S: '1', INDEX_THREAD_IDLE_S: '1', DB_QUEUE_TIMEOUT_MS: '30000' });
  });
  afterAll(async () => {
    await s?.close();
    await admin.end();
  });

  it('never takes the group past DB_POOL_MAX connections, indexing included', async () => {
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) most = Math.max(most, await connections());
    })();
    const writes = Array.from({ length: 40 }, (_, i) =>
      s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: `budget probe ${i} harbour ferry`, parties: [{ name: 'A' }] } }),
    );
    const searches = Array.from({ length: 10 }, () => s.api('/vcons/search/hybrid?q=harbour+ferry'));
    const answers = await Promise.all([...writes, ...searches]);
    // Indexing drains after the writes: keep sampling until the search sees all 40.
    await waitFor(async () => (await s.api('/vcons/search/content?q=probe&limit=100')).body.results?.length === 40, 60_000);
    sampling = false;
    await sampler;
    expect(answers.map((a) => a.status).filter((st) => st !== 201 && st !== 200)).toEqual([]);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(POOL);
  });

  it('is retired when idle, giving its connection back, and comes back with the next write', async () => {
    // Idle: the thread stops after INDEX_THREAD_IDLE_S, the pool's connections after DB_IDLE_TIMEOUT_S.
    await retired('');
    const r = await s.api('/vcons?wait_for=search', {
      method: 'POST',
      json: { vcon: '0.3.0', subject: 'after the retirement lighthouse', parties: [{ name: 'B' }] },
    });
    expect(r.status).toBe(201);
    expect((await s.api('/health')).body.index.thread).toBe(true);
    // More writes a while apart: the thread reports idle between them, and is still retired after
    // the last (an idle report from before a wake once kept it for good).
    for (let i = 0; i < 4; i++) {
      const w = await s.api('/vcons?wait_for=search', {
        method: 'POST',
        json: { vcon: '0.3.0', subject: `later write ${i}`, parties: [{ name: 'B' }] },
      });
      expect(w.status).toBe(201);
    }
    const found = await s.api('/vcons/search/content?q=lighthouse');
    expect(found.body.results.map((x: { vcon_uuid?: string; uuid?: string }) => x.vcon_uuid ?? x.uuid)).toContain(r.body.uuid);
    // And it goes again.
    await retired(' again');
  });

  it.runIf(process.platform === 'linux')('runs at a lower CPU priority than the request thread (nice 10, that thread only)', async () => {
    await retired(' before the write');
    // The OS thread ends a moment after the worker reports its end (its bounded heap torn down first).
    await waitFor(() => nicedThreads().length === 0, 60_000, 50, 'no index thread before the write');
    const w = await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: 'priority probe', parties: [{ name: 'N' }] } });
    expect(w.status).toBe(201);
    await waitFor(async () => nicedThreads().length > 0, 60_000, 50, 'the index thread to lower its priority');
    // One thread of this process is reniced (the index thread), not the process: the thread that
    // serves requests (this test's, tid = pid) keeps its priority.
    expect(nicedThreads()).toEqual([DEFAULT_INDEX_THREAD_NICE]);
    expect(niceOf(process.pid)).toBe(0);
    await retired(' after the write');
    await waitFor(() => nicedThreads().length === 0, 60_000, 50, 'the index thread to be gone after the write');
  });
});

describe('INDEX_THREAD_NICE', () => {
  // The thread stays while the test looks at it (retired after 1 s idle, a loaded machine's poll could miss it).
  const server = (nice: string) => startTestServer({ INDEX_THREAD_NICE: nice, DB_POOL_MAX: '3', INDEX_THREAD_IDLE_S: '600' });
  const threadRuns = async (s: TestServer) => {
    const w = await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: 'nice probe', parties: [{ name: 'N' }] } });
    expect(w.status).toBe(201);
    await waitFor(async () => (await s.api('/health')).body.index.thread === true, 60_000, 50, 'the index thread to start');
  };

  it.runIf(process.platform === 'linux')('sets the index thread to the configured nice value', async () => {
    const s = await server('4');
    try {
      await threadRuns(s);
      await waitFor(async () => nicedThreads().includes(4), 60_000, 50, 'the index thread at nice 4');
      expect(niceOf(process.pid)).toBe(0);
    } finally {
      await s.close();
    }
  });

  it.runIf(process.platform === 'linux')('leaves it at the process priority with 0', async () => {
    const s = await server('0');
    try {
      await threadRuns(s);
      // Indexed with no search asking (nothing but the thread indexes then): the thread has loaded
      // and would have reniced itself before its first round.
      await waitFor(async () => (await s.api('/health')).body.index.pending === 0, 60_000, 50, 'the thread to index the write');
      expect(nicedThreads()).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

/** A thread's nice value: field 19 of /proc/<pid>/task/<tid>/stat (counted after the command name). */
function niceOf(tid: number): number {
  const stat = readFileSync(`/proc/${process.pid}/task/${tid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/** The nice values of this process's threads that are not at nice 0. */
function nicedThreads(): number[] {
  const out: number[] = [];
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    try {
      const nice = niceOf(Number(tid));
      if (nice !== 0) out.push(nice);
    } catch {
      // the thread ended while we looked
    }
  }
  return out;
}

describe('an idle group', () => {
  const admin = adminSql();
  afterAll(() => admin.end());
  const env = { DB_POOL_MAX: '3', INDEX_THREAD_IDLE_S: '1' };

  it('starts no index thread (an empty queue, no writes)', async () => {
    const s = await startTestServer(env);
    try {
      // Every /health answer (and the start's look at the queue before it) finds no thread.
      for (let i = 0; i < 20; i++) {
        const h = await s.api('/health');
        expect(h.body.index).toMatchObject({ pending: 0, thread: false });
      }
      // A search over the empty index needs none either.
      expect((await s.api('/vcons/search/content?q=anything')).status).toBe(200);
      expect((await s.api('/health')).body.index.thread).toBe(false);
    } finally {
      await s.close();
    }
  });

  it('keeps its thread while queued rows wait for a retry (an embedding endpoint down)', async () => {
    const s = await startTestServer({
      ...env,
      EMBEDDINGS_PROVIDER: 'openai',
      EMBEDDINGS_URL: 'http://127.0.0.1:9/v1',
      EMBEDDINGS_MODEL: 'never-answers',
    });
    try {
      const w = await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: 'embedding endpoint down', parties: [{ name: 'D' }] } });
      expect(w.status).toBe(201);
      await waitFor(async () => (await s.api('/health')).body.index.failing === 1, 60_000, 100, 'the embedding to fail');
      // Well past INDEX_THREAD_IDLE_S (1 s) and the retirement check: the retries still have a thread.
      // The 4 s are the condition (time for the check to run), not a wait for an event: a slow
      // machine can only make the check run fewer times, never make this fail.
      const until = Date.now() + 4_000;
      while (Date.now() < until) expect((await s.api('/health')).body.index).toMatchObject({ pending: 1, thread: true });
    } finally {
      await s.close();
    }
  });

  it('indexes rows a crash left queued as soon as it starts, without any request', async () => {
    const schema = testSchemaName('idx');
    const first = await startTestServer({ ...env, SUPABASE_DB_SCHEMA: schema });
    const uuids: string[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const r = await first.api('/vcons?wait_for=search', {
          method: 'POST',
          json: { vcon: '0.3.0', subject: `left queued ${i} orchard`, parties: [{ name: 'C' }] },
        });
        expect(r.status).toBe(201);
        uuids.push(r.body.uuid);
      }
    } finally {
      await first.instance.stop();
    }
    // What a SIGKILL between a write's commit and its indexing leaves: queued rows, nothing running.
    await admin.unsafe(`insert into "${schema}".index_queue (vcon_uuid) select uuid from "${schema}".vcons`);
    await admin.unsafe(`delete from "${schema}".vcon_search`);
    const queued = async () => (await admin.unsafe(`select count(*)::int as n from "${schema}".index_queue`))[0].n as number;
    expect(await queued()).toBe(3);
    const next = await startTestServer({ ...env, SUPABASE_DB_SCHEMA: schema });
    try {
      // Watched from outside: no request reaches the instance until the queue is empty.
      await waitFor(async () => (await queued()) === 0, 60_000, 100, 'the queue left by the crash to drain');
      const found = await next.api('/vcons/search/content?q=orchard&limit=10');
      expect(found.body.results.map((x: { vcon_uuid?: string; uuid?: string }) => x.vcon_uuid ?? x.uuid).sort()).toEqual([...uuids].sort());
    } finally {
      await next.instance.stop();
      await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    }
  });
});

// The index thread's heap is bounded (its share of VCON_MEMORY_LIMIT; INDEX_THREAD_HEAP_MB here):
// a batch that does not fit ends the thread, and a new one indexes the queue one vCon a round.
describe('the index thread at its heap limit', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ INDEX_THREAD_HEAP_MB: '28', REST_API_BODY_LIMIT: '64mb', BODY_IN_FLIGHT_LIMIT: '128mb', LOG_LEVEL: 'silent' });
  });
  afterAll(() => s?.close());

  it('is ended by V8, replaced, and indexing goes on to the last vCon; /health counts it', async () => {
    // 24 vCons of ~1.4 MB of text each, queued by one request: one round takes them all.
    const words = Array.from({ length: 200_000 }, (_, i) => `w${i % 5000}x`).join(' ');
    const batch = Array.from({ length: 24 }, (_, i) => ({
      vcon: '0.3.0',
      subject: `heap probe ${i}`,
      dialog: [{ type: 'text', encoding: 'none', body: `kestrelword ${words}` }],
    }));
    const r = await s.api('/vcons/batch', { method: 'POST', json: batch });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(201);
    await waitFor(async () => (await s.api('/health')).body.index.pending === 0, 240_000, 250, 'the queue to drain');
    const index = (await s.api('/health')).body.index;
    expect(index.thread_out_of_heap).toBeGreaterThanOrEqual(1);
    expect(index.thread_failed).toBe(false);
    const found = await s.api('/vcons/search/content?q=kestrelword&limit=100');
    expect(found.body.results.length).toBe(24);
  }, 300_000);
});
