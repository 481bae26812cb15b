import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseUrl } from '../helpers/db.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let s: TestServer;

beforeAll(async () => {
  const u = new URL(databaseUrl());
  proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
  u.host = `127.0.0.1:${proxy.port}`;
  s = await startTestServer({ DATABASE_URL: u.toString(), VCON_INSTANCE_LABEL: 'Health Group' });
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

  it('answers 503 within 2 s when the database is unreachable, and 200 again when it returns', async () => {
    await proxy.cut();
    const t0 = Date.now();
    const down = await s.api('/health', { key: null });
    const elapsed = Date.now() - t0;
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ success: false, status: 'unhealthy', database: 'error', schema: s.schema, instance: 'Health Group' });
    expect(elapsed).toBeLessThan(2000);
    // A data route during the outage is a 503 in the error format, not a 500 or a hang.
    const read = await s.api('/vcons');
    expect(read.status).toBe(503);
    expect(read.body).toMatchObject({ success: false, error: 'database_unavailable' });

    await proxy.restore();
    let back = 0;
    for (let i = 0; i < 50 && back !== 200; i++) {
      back = (await s.api('/health', { key: null })).status;
      if (back !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(back).toBe(200);
    expect((await s.api('/vcons')).status).toBe(200);
  });
});
