import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

describe('smoke', () => {
  it('creates and reads a vCon', async () => {
    const c = await s.api('/vcons', { method: 'POST', json: { vcon: '0.3.0', subject: 'hello', parties: [{ name: 'A' }] } });
    expect(c.status).toBe(201);
    const g = await s.api(`/vcons/${c.body.uuid}`);
    expect(g.status).toBe(200);
    expect(g.body.vcon.subject).toBe('hello');
    const h = await s.api('/health', { key: null });
    expect(h.body).toMatchObject({ status: 'healthy', schema: s.schema });
  });
});
