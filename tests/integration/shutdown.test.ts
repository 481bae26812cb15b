import { describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';

describe('graceful shutdown', () => {
  it('finishes in-flight requests, then refuses new ones and closes the pool', async () => {
    const s = await startTestServer();
    const schema = s.schema;
    // Start 40 creates, then stop while they are in flight.
    const creates = Array.from({ length: 40 }, (_, i) => s.api('/vcons', { method: 'POST', json: { subject: `inflight ${i}` } }).catch((e) => e));
    await new Promise((r) => setTimeout(r, 5));
    const stopped = s.instance.stop();
    const results = await Promise.all(creates);
    await stopped;
    const answered = results.filter((r) => !(r instanceof Error));
    expect(answered.length).toBeGreaterThan(0);
    // Every request that got an answer succeeded; none was cut off half-way with a 5xx.
    for (const r of answered) expect(r.status).toBe(201);
    await expect(fetch(`${s.base}/health`)).rejects.toThrow();
    await expect(s.instance.sql`select 1`).rejects.toThrow();

    // What was acknowledged is stored.
    const again = await startTestServer({ SUPABASE_DB_SCHEMA: schema });
    try {
      const list = await again.api('/vcons?limit=100&format=ids_only');
      const ids = new Set(list.body.data);
      for (const r of answered) expect(ids.has(r.body.uuid)).toBe(true);
    } finally {
      await again.close();
      const { adminSql } = await import('../helpers/db.js');
      const admin = adminSql();
      await admin.unsafe(`drop schema if exists "${schema}" cascade`);
      await admin.end();
    }
  });
});
