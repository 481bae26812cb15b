import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

const create = async (attachments: unknown[], extra: Record<string, unknown> = {}) => {
  const r = await s.api('/vcons', { method: 'POST', json: { subject: 'tags', attachments, ...extra } });
  expect(r.status).toBe(201);
  return r.body.uuid as string;
};
const q = (o: unknown) => encodeURIComponent(JSON.stringify(o));

describe('tag body forms and spellings', () => {
  const forms: [string, Record<string, unknown>, string][] = [
    ['purpose + array', { purpose: 'tags', encoding: 'json', body: ['form:a', 'url:http://x.example/a:b'] }, 'a'],
    ['type + array', { type: 'tags', body: ['form:b', 'url:http://x.example/a:b'] }, 'b'],
    ['purpose + object', { purpose: 'tags', body: { form: 'c', url: 'http://x.example/a:b' } }, 'c'],
    ['type + JSON string of array', { type: 'tags', encoding: 'json', body: JSON.stringify(['form:d', 'url:http://x.example/a:b']) }, 'd'],
    ['purpose + JSON string of object', { purpose: 'tags', body: JSON.stringify({ form: 'e', url: 'http://x.example/a:b' }) }, 'e'],
  ];

  for (const [name, attachment, form] of forms) {
    it(`reads ${name} on every read path`, async () => {
      const uuid = await create([attachment]);
      const tags = await s.api(`/vcons/${uuid}/tags`);
      expect(tags.body.tags).toEqual({ form, url: 'http://x.example/a:b' });
      const one = await s.api(`/vcons/${uuid}/tags?key=url`);
      expect(one.body).toEqual({ success: true, uuid, key: 'url', value: 'http://x.example/a:b' });
      const search = await s.api(`/tags/search?tags=${q({ form })}`);
      expect(search.body.uuids).toEqual([uuid]);
      const list = await s.api(`/vcons?tags=${q({ form, url: 'http://x.example/a:b' })}&format=ids_only`);
      expect(list.body.data).toEqual([uuid]);
      const unique = await s.api('/tags');
      expect(unique.body.keys.find((k: any) => k.key === 'form').values).toContainEqual({ value: form, count: 1 });
      const byPurpose = await s.api(`/vcons/${uuid}/attachments?purpose=tags`);
      const byType = await s.api(`/vcons/${uuid}/attachments?type=tags`);
      expect(byPurpose.body.count).toBe(1);
      expect(byType.body.count).toBe(1);
    });
  }

  it('reads any other body as no tags, without failing', async () => {
    for (const body of [42, 'not json', { nested: { x: 1 } }, null, ['no-colon', ':empty-key']]) {
      const uuid = await create([{ purpose: 'tags', body }]);
      const r = await s.api(`/vcons/${uuid}/tags`);
      expect(r.status).toBe(200);
      expect(r.body.tags).toEqual({});
    }
  });

  it('reads by ?key= a key written elsewhere past the 200 characters a PUT allows', async () => {
    const key = 'k'.repeat(250);
    const uuid = await create([{ purpose: 'tags', encoding: 'json', body: [`${key}:long`] }]);
    expect((await s.api(`/vcons/${uuid}/tags`)).body.tags).toEqual({ [key]: 'long' });
    const one = await s.api(`/vcons/${uuid}/tags?key=${key}`);
    expect(one.status).toBe(200);
    expect(one.body.value).toBe('long');
  });
});

describe('tag routes', () => {
  it('sets, reads, removes one and removes all, writing the canonical attachment', async () => {
    const uuid = await create([
      { type: 'tags', body: { old: 'x' } },
      { purpose: 'other', body: 'keep' },
    ]);
    const put = await s.api(`/vcons/${uuid}/tags/priority`, { method: 'PUT', json: { value: 3 } });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ success: true, uuid, key: 'priority', value: '3' });
    await s.api(`/vcons/${uuid}/tags/flag`, { method: 'PUT', json: { value: true } });
    await s.api(`/vcons/${uuid}/tags/link`, { method: 'PUT', json: { value: 'a:b:c' } });
    const doc = (await s.api(`/vcons/${uuid}`)).body.vcon;
    expect(doc.attachments[0]).toEqual({ type: 'tags', body: ['old:x', 'priority:3', 'flag:true', 'link:a:b:c'], purpose: 'tags', encoding: 'json' });
    expect(doc.attachments[1]).toEqual({ purpose: 'other', body: 'keep' });
    expect((await s.api(`/vcons/${uuid}/tags?key=link`)).body.value).toBe('a:b:c');
    expect((await s.api(`/vcons/${uuid}/tags/old`, { method: 'DELETE' })).status).toBe(204);
    expect((await s.api(`/vcons/${uuid}/tags/never-there`, { method: 'DELETE' })).status).toBe(204);
    const missing = await s.api(`/vcons/${uuid}/tags?key=old`);
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('tag_not_found');
    // A key no tag can have is the request's fault: 400 naming the parameter, not a 404.
    for (const [key, problem] of [
      ['', 'must not be empty'],
      ['a:b', 'must not contain ":"'],
    ]) {
      const bad = await s.api(`/vcons/${uuid}/tags?key=${encodeURIComponent(key)}`);
      expect(bad.status, key).toBe(400);
      expect(bad.body.details[0].path).toBe('key');
      expect(bad.body.details[0].message).toContain(problem);
    }
    expect((await s.api(`/vcons/${uuid}/tags`, { method: 'DELETE' })).status).toBe(204);
    expect((await s.api(`/vcons/${uuid}/tags`)).body.tags).toEqual({});
    expect((await s.api(`/tags/search?tags=${q({ priority: '3' })}`)).body.uuids).not.toContain(uuid);
    // No empty tags attachment is left behind: only the other producer's attachment remains.
    expect((await s.api(`/vcons/${uuid}`)).body.vcon.attachments).toEqual([{ purpose: 'other', body: 'keep' }]);
  });

  it('removing the last tag removes the tags attachment, so attachments_count is back to 0', async () => {
    const subject = `tagged ${randomUUID()}`;
    const uuid = await create([], { subject });
    const count = async () => (await s.api(`/vcons?subject=${encodeURIComponent(subject)}`)).body.data[0].attachments_count;
    await s.api(`/vcons/${uuid}/tags/a`, { method: 'PUT', json: { value: '1' } });
    await s.api(`/vcons/${uuid}/tags/b`, { method: 'PUT', json: { value: '2' } });
    expect(await count()).toBe(1);
    await s.api(`/vcons/${uuid}/tags/a`, { method: 'DELETE' });
    expect(await count()).toBe(1);
    await s.api(`/vcons/${uuid}/tags/b`, { method: 'DELETE' });
    expect(await count()).toBe(0);
    await s.api(`/vcons/${uuid}/tags/c`, { method: 'PUT', json: { value: '3' } });
    expect((await s.api(`/vcons/${uuid}/tags`, { method: 'DELETE' })).status).toBe(204);
    expect(await count()).toBe(0);
    expect((await s.api(`/vcons/${uuid}`)).body.vcon.attachments).toEqual([]);
  });

  it('refuses a tag filter naming "__proto__" instead of dropping the pair and matching every vCon', async () => {
    const uuid = await create([]);
    await s.api(`/vcons/${uuid}/tags/__proto__`, { method: 'PUT', json: { value: 'pv' } });
    // Written as text: an object literal's __proto__ would set its prototype, not a member.
    const filter = encodeURIComponent('{"__proto__":"pv"}');
    for (const path of [`/vcons?tags=${filter}`, `/tags/search?tags=${filter}`, `/vcons/search/content?q=tags&tags=${filter}`]) {
      const r = await s.api(path);
      expect(r.status, path).toBe(400);
      expect(r.body).toMatchObject({ error: 'invalid_parameter', details: [{ path: 'tags.__proto__' }] });
    }
  });

  it('keeps every one of 20 concurrent PUTs of different keys', async () => {
    const uuid = await create([]);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => s.api(`/vcons/${uuid}/tags/k${i}`, { method: 'PUT', json: { value: `v${i}` } })),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    const tags = (await s.api(`/vcons/${uuid}/tags`)).body.tags;
    expect(Object.keys(tags)).toHaveLength(20);
    const [{ n }] = await s.instance.sql<{ n: number }[]>`select count(*)::int as n from vcon_tags where vcon_uuid = ${uuid}`;
    expect(n).toBe(20);
  });

  it('answers bad input with a clear 400 and unknown vCons with 404', async () => {
    const uuid = await create([]);
    const cases: [string, string, unknown, string][] = [
      ['PUT', `/vcons/${uuid}/tags/a:b`, { value: 'x' }, 'must not contain ":"'],
      ['PUT', `/vcons/${uuid}/tags/k`, { value: { nested: 1 } }, 'string, number or boolean'],
      ['PUT', `/vcons/${uuid}/tags/k`, { value: null }, 'string, number or boolean'],
      ['PUT', `/vcons/${uuid}/tags/k`, { other: 1 }, 'value'],
      ['GET', '/tags/search', undefined, 'tags'],
      ['GET', '/tags/search?tags=notjson', undefined, 'JSON'],
      ['GET', `/tags/search?tags=${q(['a'])}`, undefined, 'object'],
      ['GET', `/tags/search?tags=${q({ '': 'x' })}`, undefined, 'empty'],
      ['GET', `/tags/search?tags=${q({ k: { o: 1 } })}`, undefined, 'string, number or boolean'],
    ];
    for (const [method, path, json, msg] of cases) {
      const r = await s.api(path, { method, json });
      expect(r.status, `${method} ${path}`).toBe(400);
      expect(r.body.message).toContain(msg);
    }
    expect((await s.api(`/vcons/${randomUUID()}/tags/k`, { method: 'PUT', json: { value: 'x' } })).status).toBe(404);
    expect((await s.api(`/vcons/${randomUUID()}/tags`)).status).toBe(404);
  });

  it('keeps a tag value too large for the tag index in the document only, and the PUT refuses it with a 400', async () => {
    // 1,000 characters of CJK are 3,000 bytes: over the btree entry limit (2,704), the create was a 500.
    const cjk = (n: number, from = 0) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + (((from + i) * 7919) % 20000))).join('');
    const big = cjk(1000);
    // At the bound: a key of 200 CJK characters (600 bytes) and a value of 2,000 bytes, indexed.
    const key = cjk(200, 5);
    const edge = `${cjk(666)}ab`;
    const uuid = await create([{ purpose: 'tags', body: [`big:${big}`, `${key}:${edge}`] }]);
    expect((await s.api(`/vcons/${uuid}/tags`)).body.tags).toEqual({ big, [key]: edge });
    expect((await s.api(`/tags/search?tags=${q({ [key]: edge })}`)).body.uuids).toEqual([uuid]);
    expect((await s.api(`/tags/search?tags=${q({ big })}`)).body.uuids).toEqual([]);
    const put = await s.api(`/vcons/${uuid}/tags/other`, { method: 'PUT', json: { value: big } });
    expect(put.status).toBe(400);
    expect(put.body).toMatchObject({ error: 'validation_failed', details: [{ path: 'value', message: 'must be at most 2000 bytes of UTF-8' }] });
    expect((await s.api(`/vcons/${uuid}/tags/other`, { method: 'PUT', json: { value: edge } })).status).toBe(200);
  });

  it('pages tag search newest change first with has_more', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const uuid = await create([]);
      await s.api(`/vcons/${uuid}/tags/batch`, { method: 'PUT', json: { value: 'p' } });
      ids.unshift(uuid);
    }
    const first = await s.api(`/tags/search?tags=${q({ batch: 'p' })}&limit=2`);
    expect(first.body).toMatchObject({ success: true, count: 2, uuids: ids.slice(0, 2), pagination: { limit: 2, offset: 0, has_more: true } });
    const last = await s.api(`/tags/search?tags=${q({ batch: 'p' })}&limit=2&offset=3`);
    expect(last.body.uuids).toEqual(ids.slice(3));
    expect(last.body.pagination.has_more).toBe(false);
  });
});

describe('discovery', () => {
  it('counts vCons per value from the derived tables, fresh after creates, appends, replaces and deletes', async () => {
    const d = await startTestServer();
    try {
      const get = async (path: string) => (await d.api(path)).body;
      const a = (
        await d.api('/vcons', {
          method: 'POST',
          json: { attachments: [{ purpose: 'invoice' }, { purpose: 'invoice' }, { type: 'legacy' }], analysis: [{ type: 'summary', vendor: 'v' }] },
        })
      ).body.uuid;
      await d.api('/vcons', {
        method: 'POST',
        json: {
          attachments: [{ purpose: 'invoice' }],
          analysis: [
            { type: 'summary', vendor: 'v' },
            { type: 'topics', vendor: 'v' },
          ],
        },
      });
      expect(await get('/discovery/attachments/purposes')).toEqual({
        success: true,
        total_vcons: 2,
        count: 1,
        values: [{ value: 'invoice', count: 2 }],
      });
      expect((await get('/discovery/attachments/types')).values).toEqual([{ value: 'legacy', count: 1 }]);
      expect((await get('/discovery/analysis/types')).values).toEqual([
        { value: 'summary', count: 2 },
        { value: 'topics', count: 1 },
      ]);

      await d.api(`/vcons/${a}/analysis`, { method: 'POST', json: { type: 'topics', vendor: 'v' } });
      expect((await get('/discovery/analysis/types')).values).toEqual([
        { value: 'summary', count: 2 },
        { value: 'topics', count: 2 },
      ]);
      await d.api(`/vcons/${a}/tags/x`, { method: 'PUT', json: { value: 'y' } });
      expect((await get('/discovery/attachments/purposes')).values).toEqual([
        { value: 'invoice', count: 2 },
        { value: 'tags', count: 1 },
      ]);

      await d.api('/vcons', { method: 'POST', json: { uuid: a, attachments: [{ purpose: 'receipt' }] } });
      expect((await get('/discovery/attachments/purposes')).values).toEqual([
        { value: 'invoice', count: 1 },
        { value: 'receipt', count: 1 },
      ]);
      expect((await get('/discovery/attachments/types')).values).toEqual([]);

      expect((await get('/discovery/analysis/types?min_count=2')).values).toEqual([]);
      expect((await get('/discovery/attachments/purposes?include_counts=false')).values).toEqual([{ value: 'invoice' }, { value: 'receipt' }]);
      await d.api(`/vcons/${a}`, { method: 'DELETE' });
      expect(await get('/discovery/attachments/purposes')).toEqual({
        success: true,
        total_vcons: 1,
        count: 1,
        values: [{ value: 'invoice', count: 1 }],
      });

      for (const qs of ['min_count=0', 'min_count=abc', 'include_counts=maybe']) {
        const r = await d.api(`/discovery/analysis/types?${qs}`);
        expect(r.status, qs).toBe(400);
        expect(r.body.error).toBe('invalid_parameter');
      }
    } finally {
      await d.close();
    }
  });
});
