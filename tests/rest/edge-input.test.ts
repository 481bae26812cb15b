// Inputs that are valid JSON but hard on the database: never a 500, never a half-written record.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

describe('edge input', () => {
  // NUL characters and lone surrogates are refused at validation: tests/security/bad-input.test.ts.

  it('rejects year 0000 dates with 400', async () => {
    const r = await s.api('/vcons', { method: 'POST', json: { created_at: '0000-01-01T00:00:00Z' } });
    expect(r.status).toBe(400);
    expect(r.body.details[0].path).toBe('created_at');
  });

  it('accepts very long classification values and tag values without a 500', async () => {
    const long = 'x'.repeat(10_000);
    const c = await s.api('/vcons', {
      method: 'POST',
      json: {
        analysis: [{ type: long, vendor: long, body: 'b' }],
        attachments: [
          { purpose: long, type: long },
          { purpose: 'tags', body: [`big:${long}`, 'small:ok'] },
        ],
      },
    });
    expect(c.status).toBe(201);
    expect((await s.api(`/vcons/${c.body.uuid}`)).body.vcon.analysis[0].type).toBe(long);
    const tags = await s.api(`/tags/search?tags=${encodeURIComponent('{"small":"ok"}')}`);
    expect(tags.body.uuids).toContain(c.body.uuid);
    const put = await s.api(`/vcons/${c.body.uuid}/tags/big2`, { method: 'PUT', json: { value: long } });
    expect(put.status).toBe(400);
    expect(put.body.message).toMatch(/at most 1000/);
  });

  it('answers deeply nested documents with 400 validation_failed, not a crash', async () => {
    // Deep enough to break naive recursion (structuredClone, JSON.stringify) in the write path.
    const nested = '{"subject":"deep","meta":' + '{"d":'.repeat(5000) + '1' + '}'.repeat(5000) + '}';
    const r = await s.api('/vcons', { method: 'POST', body: nested, headers: { 'content-type': 'application/json' } });
    const tooDeep = {
      success: false,
      error: 'validation_failed',
      message: 'Invalid vCon: nested deeper than 100 levels',
      details: [{ path: '(root)', message: 'must not nest deeper than 100 levels' }],
    };
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject(tooDeep);
    const deeper = '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000);
    const r2 = await s.api('/vcons', { method: 'POST', body: deeper, headers: { 'content-type': 'application/json' } });
    expect(r2.status).toBe(400);
    expect(r2.body).toMatchObject(tooDeep);
    expect((await s.api('/health', { key: null })).status).toBe(200);
  });
});
