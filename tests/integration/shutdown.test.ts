import { describe, expect, it } from 'vitest';
import { adminSql } from '../helpers/db.js';
import { startTestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';

const state = () => ((globalThis as any).__slowPlugin ??= { arrived: 0 }) as { arrived: number };

describe('graceful shutdown', () => {
  it('finishes in-flight requests, then refuses new ones and closes the pool', async () => {
    // A pool as large as the burst: every request is admitted at once (more would queue for a turn).
    const s = await startTestServer({ VCON_PLUGINS_PATH: './tests/fixtures/plugins/slow.mjs', DB_POOL_MAX: '20' });
    const schema = s.schema;
    state().arrived = 0;
    const N = 20;
    const creates = Array.from({ length: N }, (_, i) => s.api('/vcons', { method: 'POST', json: { subject: `inflight ${i}` } }));
    // Wait until every request is inside the server (held by the slow plugin), then stop.
    await waitFor(() => state().arrived === N, 60_000, 10, `all ${N} creates inside the server`);
    await s.instance.stop();
    const results = await Promise.all(creates);
    expect(results.map((r) => r.status)).toEqual(Array(N).fill(201));
    await expect(fetch(`${s.base}/health`)).rejects.toThrow();
    await expect(s.instance.sql`select 1`).rejects.toThrow();

    // Every acknowledged create is stored, whole.
    const admin = adminSql();
    try {
      const rows = await admin.unsafe(
        `select uuid::text, subject,
           (select count(*) from "${schema}".search_units u where u.vcon_uuid = v.uuid)::int as units,
           (select count(*) from "${schema}".index_queue q where q.vcon_uuid = v.uuid)::int as queued
         from "${schema}".vcons v`,
      );
      const byId = new Map(rows.map((r: any) => [r.uuid, r]));
      // Indexed, or still queued for the indexer of the next start (never neither).
      for (const r of results) {
        expect(byId.get(r.body.uuid)?.units + byId.get(r.body.uuid)?.queued).toBe(1);
      }
    } finally {
      await admin.unsafe(`drop schema if exists "${schema}" cascade`);
      await admin.end();
    }
  });
});
