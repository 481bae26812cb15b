import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startTestServer, KEY, RO_KEY, type TestServer } from '../helpers/server.js';

let s: TestServer;
const COUNT = 450; // more than two pages of the export
const uuids: string[] = [];

beforeAll(async () => {
  s = await startTestServer();
  for (let i = 0; i < COUNT; i += 100) {
    const batch = Array.from({ length: Math.min(100, COUNT - i) }, (_, j) => {
      const uuid = randomUUID();
      uuids.push(uuid);
      return {
        vcon: '0.3.0',
        uuid,
        created_at: '2026-01-02T03:04:05.000Z',
        subject: `export ${i + j}`,
        parties: [{ name: `P ${i + j}`, tel: '+15550100' }],
      };
    });
    expect((await s.api('/vcons/batch', { method: 'POST', json: batch })).status).toBe(201);
  }
  uuids.sort();
});
afterAll(async () => {
  await s?.close();
});

async function exportLines(query = '', key = RO_KEY): Promise<{ status: number; type: string | null; lines: string[] }> {
  const r = await fetch(`${s.base}/vcons/export${query}`, { headers: { authorization: `Bearer ${key}` } });
  const text = await r.text();
  return { status: r.status, type: r.headers.get('content-type'), lines: text === '' ? [] : text.split('\n') };
}

describe('GET /vcons/export', () => {
  it('streams every vCon as NDJSON in uuid order, each exactly as GET returns it, to a read-only key', async () => {
    const r = await exportLines();
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/x-ndjson/);
    expect(r.lines.at(-1)).toBe(''); // every line ends with a newline
    const docs = r.lines.slice(0, -1);
    expect(docs).toHaveLength(COUNT);
    expect(docs.map((l) => JSON.parse(l).uuid)).toEqual(uuids);
    const one = await fetch(`${s.base}/vcons/${uuids[7]}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(`{"success":true,"vcon":${docs[7]}}`).toBe(await one.text());
  });

  it('resumes after a uuid', async () => {
    const r = await exportLines(`?after=${uuids[COUNT - 3]}`);
    expect(r.lines.slice(0, -1).map((l) => JSON.parse(l).uuid)).toEqual(uuids.slice(COUNT - 2));
    expect((await exportLines(`?after=${uuids[COUNT - 1]}`)).lines).toEqual([]);
  });

  it('refuses a bad cursor with 400 naming the parameter, and other methods with 405', async () => {
    const bad = await s.api('/vcons/export?after=nope');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'invalid_parameter', details: [{ path: 'after' }] });
    expect((await s.api('/vcons/export', { method: 'POST', json: {} })).status).toBe(405);
    expect((await s.api('/vcons/export', { key: null })).status).toBe(401);
  });
});
