import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
const uuids: string[] = []; // newest first
beforeAll(async () => {
  s = await startTestServer();
  const items = Array.from({ length: 25 }, (_, i) => ({
    uuid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    created_at: new Date(Date.UTC(2025, 0, 1 + i, 12)).toISOString(),
    subject: i % 2 ? `Refund request ${i}` : `Delivery issue ${i}`,
    parties: [{ name: i < 5 ? 'Zoë Ünicode' : `Person ${i}`, mailto: `p${i}@example.com`, tel: `+1555000${String(i).padStart(2, '0')}` }],
  }));
  const r = await s.api('/vcons/batch', { method: 'POST', json: items });
  expect(r.status).toBe(201);
  uuids.push(...items.map((i) => i.uuid).reverse());
});
afterAll(() => s?.close());

const page = async (qs: string) => (await s.api(`/vcons?${qs}`)).body;

describe('GET /vcons', () => {
  it('orders newest first and pages with limit/offset (offset=10&limit=10 is rows 11 to 20)', async () => {
    const p = await page('offset=10&limit=10&format=ids_only');
    expect(p.data).toEqual(uuids.slice(10, 20));
    expect(p.pagination).toEqual({ limit: 10, offset: 10, has_more: true });
  });

  it('reports has_more false on an exactly full last page', async () => {
    const p = await page('offset=15&limit=10&format=ids_only');
    expect(p.data).toHaveLength(10);
    expect(p.pagination.has_more).toBe(false);
    const beyond = await page('offset=25&limit=10&format=ids_only');
    expect(beyond.data).toEqual([]);
    expect(beyond.pagination).toEqual({ limit: 10, offset: 25, has_more: false });
  });

  it('defaults to 10 and caps limit at 100, reporting the limit used', async () => {
    expect((await page('')).pagination).toEqual({ limit: 10, offset: 0, has_more: true });
    const big = await page('limit=200');
    expect(big.pagination.limit).toBe(100);
    expect(big.data).toHaveLength(25);
  });

  it('rejects bad paging with 400 invalid_parameter naming the parameter', async () => {
    for (const qs of [
      'limit=0',
      'limit=abc',
      'limit=-1',
      'offset=-5',
      'offset=1.5',
      'format=xml',
      'start_date=yesterday',
      'end_date=2025-02-30',
      'tags=notjson',
      'tags=[1]',
    ]) {
      const r = await s.api(`/vcons?${qs}`);
      expect(r.status, qs).toBe(400);
      expect(r.body.error).toBe('invalid_parameter');
      expect(r.body.message).toContain(qs.split('=')[0]);
    }
  });

  it('returns metadata by default and whole vCons with format=full', async () => {
    const meta = await page('limit=1');
    expect(meta.data[0]).toEqual({
      uuid: uuids[0],
      subject: 'Delivery issue 24',
      created_at: '2025-01-25T12:00:00.000Z',
      updated_at: null,
      parties_count: 1,
      dialog_count: 0,
      analysis_count: 0,
      attachments_count: 0,
    });
    const full = await page('limit=1&format=full');
    expect(full.data[0].parties[0].mailto).toBe('p24@example.com');
  });

  it('filters by subject, party name, email and phone (substring, case-insensitive)', async () => {
    expect((await page('subject=REFUND&limit=100')).data).toHaveLength(12);
    expect((await page('party_name=zoë&limit=100')).data).toHaveLength(5);
    expect((await page('party_email=P7@EXAMPLE&limit=100&format=ids_only')).data).toEqual([uuids[24 - 7]]);
    expect((await page('party_tel=55500012&limit=100&format=ids_only')).data).toEqual([uuids[24 - 12]]);
    expect((await page('subject=%25&limit=100')).data).toHaveLength(0); // LIKE metacharacters are literal
  });

  it('filters by date, a date alone covering its whole day', async () => {
    const day = await page('start_date=2025-01-03&end_date=2025-01-03&format=ids_only');
    expect(day.data).toEqual([uuids[24 - 2]]);
    const range = await page('start_date=2025-01-03T00:00:00Z&end_date=2025-01-05&format=ids_only&limit=100');
    expect(range.data).toEqual([uuids[24 - 4], uuids[24 - 3], uuids[24 - 2]]);
  });

  it('orders by the latest tag change with tags=, and caps deep paging at 100,000', async () => {
    // One after the other: each change's tags_updated_at (a microsecond transaction time) is later.
    for (const i of [3, 1, 2]) await s.api(`/vcons/${uuids[i]}/tags/queue`, { method: 'PUT', json: { value: 'vip' } });
    const tagged = await page(`tags=${encodeURIComponent('{"queue":"vip"}')}&format=ids_only`);
    expect(tagged.data).toEqual([uuids[2], uuids[1], uuids[3]]);
    const paged = await page(`tags=${encodeURIComponent('{"queue":"vip"}')}&format=ids_only&limit=2&offset=1`);
    expect(paged.data).toEqual([uuids[1], uuids[3]]);
    expect(paged.pagination.has_more).toBe(false);
    const deep = await s.api(`/vcons?tags=${encodeURIComponent('{"queue":"vip"}')}&offset=99950&limit=100`);
    expect(deep.status).toBe(400);
    expect(deep.body.error).toBe('paging_cap_exceeded');
  });
});
