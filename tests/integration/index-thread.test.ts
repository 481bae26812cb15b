// The index thread within the group's connection budget (issues 15 and 17): its one connection is
// part of DB_POOL_MAX, and it exists only while there is work, so an idle group holds no
// connection and no thread.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applicationNameOf } from '../../src/db/server-limits.js';
import { adminSql } from '../helpers/db.js';
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
    await waitFor(async () => (await s.api('/vcons/search/content?q=probe&limit=100')).body.results?.length === 40, 30_000);
    sampling = false;
    await sampler;
    expect(answers.map((a) => a.status).filter((st) => st !== 201 && st !== 200)).toEqual([]);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(POOL);
  });

  it('is retired when idle, giving its connection back, and comes back with the next write', async () => {
    // Idle: the thread stops after INDEX_THREAD_IDLE_S, the pool's connections after DB_IDLE_TIMEOUT_S.
    await waitFor(async () => (await connections()) === 0, 20_000, 100, 'the group to hold no connection');
    const r = await s.api('/vcons?wait_for=search', {
      method: 'POST',
      json: { vcon: '0.3.0', subject: 'after the retirement lighthouse', parties: [{ name: 'B' }] },
    });
    expect(r.status).toBe(201);
    const found = await s.api('/vcons/search/content?q=lighthouse');
    expect(found.body.results.map((x: { vcon_uuid?: string; uuid?: string }) => x.vcon_uuid ?? x.uuid)).toContain(r.body.uuid);
    // And it goes again.
    await waitFor(async () => (await connections()) === 0, 20_000, 100, 'the group to hold no connection again');
  });
});
