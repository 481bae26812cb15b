import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl } from '../helpers/db.js';
import { proxyDatabase, type startTcpProxy } from '../helpers/tcp-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';

let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let s: TestServer;

beforeAll(async () => {
  const db = await proxyDatabase(databaseUrl());
  proxy = db.proxy;
  s = await startTestServer({ DATABASE_URL: db.url, VCON_INSTANCE_LABEL: 'Health Group' });
});
afterAll(async () => {
  await proxy.restore().catch(() => undefined);
  await s?.close();
  await proxy?.close();
});

describe('/health', () => {
  it('answers 200 with schema, label and version, without a key', async () => {
    const r = await s.api('/health', { key: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, status: 'healthy', database: 'connected', schema: s.schema, instance: 'Health Group' });
    expect(r.body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(JSON.stringify(r.body)).not.toMatch(/PostgreSQL \d|127\.0\.0\.1|password/);
  });

  // How soon the answer comes is the health check's own timeout, tested with a fake clock in tests/unit/health.test.ts.
  it('answers 503 when the database is unreachable, and 200 again when it returns', async () => {
    await proxy.cut();
    const down = await s.api('/health', { key: null });
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ success: false, status: 'unhealthy', database: 'error', schema: s.schema, instance: 'Health Group' });
    // A data route during the outage is a 503 in the error format, not a 500 or a hang.
    const read = await s.api('/vcons');
    expect(read.status).toBe(503);
    expect(read.body).toMatchObject({ success: false, error: 'database_unavailable' });

    await proxy.restore();
    await waitFor(async () => (await s.api('/health', { key: null })).status === 200, 60_000, 100, '/health to answer 200 again');
    expect((await s.api('/vcons')).status).toBe(200);
  });
});
