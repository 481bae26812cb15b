// Bad input a security review sent, through REST and MCP, its requests kept as regression
// cases: text PostgreSQL can't hold is refused at validation naming the field (so no search, list
// or analytics path can fail on it afterwards), and every other bad input below answers a
// 4xx in the one error format, never a 500 and never HTML.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectHttp, textOf, type HttpSession } from '../mcp/helpers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let mcp: HttpSession;
const SEED = '0195a1c2-0000-4000-8000-0000000bad01';
const json = { 'content-type': 'application/json' };

beforeAll(async () => {
  s = await startTestServer({ VCON_PLUGINS_PATH: './tests/fixtures/plugins/throws.mjs' });
  mcp = await connectHttp(s.instance.url!, 'test-key-rw');
  // wait_for=search: the searches find it however long indexing takes on a loaded machine.
  const seed = await s.api('/vcons?wait_for=search', {
    method: 'POST',
    json: {
      uuid: SEED,
      subject: 'alpha seed',
      created_at: '2025-06-01T12:00:00Z',
      parties: [{ name: 'Alice', tel: '+15550100' }],
      dialog: [{ type: 'text', encoding: 'none', body: 'alpha refund question', duration: 30 }],
      analysis: [{ type: 'summary', vendor: 'v', body: 'alpha summary' }],
      attachments: [{ purpose: 'tags', encoding: 'json', body: ['team:alpha'] }],
    },
  });
  expect(seed.status).toBe(201);
});
afterAll(async () => {
  await mcp?.close();
  await s?.close();
});

/** A 4xx in the one error format of docs/api.md, with the given status and code. */
function expectError(r: { status: number; headers: Headers; body: any }, status: number, code: string, where = '') {
  expect([r.status, r.body?.error], `${where} ${JSON.stringify(r.body)}`).toEqual([status, code]);
  expect(r.headers.get('content-type'), where).toMatch(/^application\/json/);
  expect(r.body.success).toBe(false);
  expect(typeof r.body.message).toBe('string');
}

const paths = (r: { body: any }): string[] => (r.body.details ?? []).map((d: { path: string }) => d.path);

/** Every read that lists, searches or aggregates stored vCons: each must answer 200. */
const READS = [
  '/vcons',
  '/vcons?format=full',
  '/vcons?format=ids_only',
  '/vcons?subject=a',
  '/vcons?party_name=a',
  '/vcons/search/content?q=alpha',
  '/vcons/search/semantic?q=alpha',
  '/vcons/search/hybrid?q=alpha',
  `/tags/search?tags=${encodeURIComponent('{"team":"alpha"}')}`,
  '/tags',
  '/analytics',
  '/analytics/growth',
  '/analytics/content',
  '/analytics/tags',
  '/analytics/attachments',
  `/vcons/${SEED}`,
  `/vcons/${SEED}/analysis`,
  `/vcons/${SEED}/attachments`,
  `/vcons/${SEED}/tags`,
];

async function expectEveryReadWorks() {
  for (const path of READS) {
    const r = await s.api(path);
    expect(r.status, `${path}: ${JSON.stringify(r.body).slice(0, 300)}`).toBe(200);
  }
  const list = await s.api('/vcons?format=ids_only&limit=100');
  expect(list.body.data).toEqual([SEED]);
  const search = await s.api('/vcons/search/content?q=alpha');
  expect(search.body.results.map((x: { uuid: string }) => x.uuid)).toEqual([SEED]);
}

describe('text PostgreSQL cannot hold', () => {
  const NUL = 'a\u0000b';
  const LONE = 'half \ud800 pair';
  const cases: { name: string; doc: Record<string, unknown>; path: string }[] = [
    { name: "a NUL in the subject (the review's request)", doc: { subject: NUL }, path: 'subject' },
    { name: 'a NUL in a party name', doc: { parties: [{ name: NUL }] }, path: 'parties[0].name' },
    { name: 'a NUL in an unknown field', doc: { x_note: NUL }, path: 'x_note' },
    { name: 'a NUL in a dialog body', doc: { dialog: [{ type: 'text', encoding: 'none', body: NUL }] }, path: 'dialog[0].body' },
    { name: 'a NUL in a URL', doc: { dialog: [{ type: 'recording', url: `https://media.example.com/${NUL}` }] }, path: 'dialog[0].url' },
    { name: 'a NUL in an analysis body', doc: { analysis: [{ type: 'summary', vendor: 'v', body: NUL }] }, path: 'analysis[0].body' },
    { name: 'a NUL in a tag', doc: { attachments: [{ purpose: 'tags', encoding: 'json', body: [`k:${NUL}`] }] }, path: 'attachments[0].body[0]' },
    { name: 'a NUL deep in an unknown structure', doc: { meta: { list: ['ok', { deep: NUL }] } }, path: 'meta.list[1].deep' },
    { name: 'a NUL in a field name', doc: { meta: { [NUL]: 1 } }, path: `meta.${NUL}` },
    { name: 'a lone surrogate in the subject', doc: { subject: LONE }, path: 'subject' },
    { name: 'a lone low surrogate in a party name', doc: { parties: [{ name: 'x\udfffy' }] }, path: 'parties[0].name' },
    { name: "a NUL in a signed vCon's envelope", doc: { payload: NUL, signatures: [{ protected: 'x', signature: 'y' }] }, path: 'payload' },
  ];

  for (const c of cases) {
    it(`refuses ${c.name} with 400 naming the field (REST and MCP)`, async () => {
      const r = await s.api('/vcons', { method: 'POST', json: c.doc });
      expectError(r, 400, 'validation_failed', c.name);
      expect(paths(r)).toContain(c.path);
      expect(r.body.details.find((d: { path: string }) => d.path === c.path).message).toMatch(/NUL|surrogate/);
      const m = await mcp.call('create_vcon', { vcon: c.doc });
      expect(m.isError, textOf(m)).toBe(true);
      expect(m.structuredContent.error).toBe('validation_failed');
      expect(m.structuredContent.details.map((d: { path: string }) => d.path)).toContain(c.path);
    });
  }

  it('refuses them in a raw JSON body (escapes as sent on the wire)', async () => {
    for (const [body, path] of [
      ['{"subject":"a\\u0000b"}', 'subject'],
      ['{"subject":"half \\ud800 pair"}', 'subject'],
      ['{"parties":[{"name":"x\\udfffy"}]}', 'parties[0].name'],
    ]) {
      const r = await s.api('/vcons', { method: 'POST', body, headers: json });
      expectError(r, 400, 'validation_failed', body);
      expect(paths(r)).toEqual([path]);
    }
  });

  it('refuses them in a batch item, an append, a PATCH and a tag, leaving the stored vCon as it was', async () => {
    const before = await s.api(`/vcons/${SEED}`);
    const batch = await s.api('/vcons/batch', { method: 'POST', json: [{ subject: NUL }, { parties: [{ name: LONE }] }] });
    expect(batch.status).toBe(400);
    expect(batch.body.results.map((x: { status: number; details: { path: string }[] }) => [x.status, x.details[0].path])).toEqual([
      [400, 'subject'],
      [400, 'parties[0].name'],
    ]);
    for (const kind of ['dialog', 'analysis', 'attachments']) {
      const item =
        kind === 'dialog' ? { type: 'text', body: NUL } : kind === 'analysis' ? { type: 't', vendor: 'v', body: NUL } : { purpose: 'p', body: NUL };
      const r = await s.api(`/vcons/${SEED}/${kind}`, { method: 'POST', json: item });
      expectError(r, 400, 'validation_failed', kind);
      expect(paths(r)).toEqual(['body']);
    }
    const patch = await s.api(`/vcons/${SEED}`, { method: 'PATCH', json: { subject: LONE } });
    expectError(patch, 400, 'validation_failed', 'patch');
    expect(paths(patch)).toEqual(['subject']);
    const tagValue = await s.api(`/vcons/${SEED}/tags/k`, { method: 'PUT', json: { value: LONE } });
    expectError(tagValue, 400, 'validation_failed', 'tag value');
    expect(paths(tagValue)).toEqual(['value']);
    const tagKey = await s.api(`/vcons/${SEED}/tags/${encodeURIComponent(NUL)}`, { method: 'PUT', json: { value: 'v' } });
    expectError(tagKey, 400, 'invalid_parameter', 'tag key');
    const m = await mcp.call('add_dialog', { uuid: SEED, dialog: { type: 'text', body: NUL } });
    expect(m.structuredContent.error).toBe('validation_failed');
    expect((await s.api(`/vcons/${SEED}`)).body).toEqual(before.body);
  });

  it('refuses them in query parameters of lists and searches', async () => {
    for (const path of ['/vcons?subject=%00', '/vcons?party_name=a%00', '/vcons/search/content?q=%00x', '/vcons/search/hybrid?q=x%00']) {
      expectError(await s.api(path), 400, 'invalid_parameter', path);
    }
  });

  it('leaves every list, search and analytics path answering, with nothing of the attempts stored', async () => {
    await expectEveryReadWorks();
  });
});

describe('dates outside 0001-9999 after the offset', () => {
  const OUT_OF_RANGE = ['0001-01-01T00:00:00%2B14:00', '9999-12-31T23:59:59-14:00', '0000-06-01'];

  it("answers 400 naming the parameter on list, content and hybrid search, and analytics (the review's requests)", async () => {
    for (const v of OUT_OF_RANGE) {
      for (const [base, param] of [
        ['/vcons?', 'start_date'],
        ['/vcons?', 'end_date'],
        ['/vcons/search/content?q=alpha&', 'start_date'],
        ['/vcons/search/hybrid?q=alpha&', 'end_date'],
        ['/analytics?', 'start_date'],
        ['/analytics/content?', 'start_date'],
        ['/analytics/content?', 'end_date'],
      ]) {
        const r = await s.api(`${base}${param}=${v}`);
        expectError(r, 400, 'invalid_parameter', `${base}${param}=${v}`);
        expect(paths(r)).toEqual([param]);
        expect(r.body.message).toMatch(/0001-01-01.*9999-12-31/);
      }
    }
  });

  it('reads the ends of the range as dates: end_date=9999-12-31 covers everything, start_date=0001-01-01 too', async () => {
    const all = await s.api('/vcons?end_date=9999-12-31&format=ids_only');
    expect(all.status).toBe(200);
    expect(all.body.data).toEqual([SEED]);
    expect((await s.api('/vcons?start_date=0001-01-01&format=ids_only')).body.data).toEqual([SEED]);
    // Years below 100 are not 19xx: nothing was created before 0099-12-31.
    expect((await s.api('/vcons?end_date=0099-12-31&format=ids_only')).body.data).toEqual([]);
    for (const path of [
      '/vcons/search/content?q=alpha&end_date=9999-12-31',
      '/vcons/search/hybrid?q=alpha&end_date=9999-12-31T23:59:59.999Z',
      '/analytics?end_date=9999-12-31',
      '/analytics/content?start_date=0001-01-01&end_date=9999-12-31',
    ]) {
      expect((await s.api(path)).status, path).toBe(200);
    }
  });

  it('refuses a POSTed created_at outside the range after its offset (REST and MCP)', async () => {
    for (const created_at of ['0001-01-01T00:00:00+14:00', '9999-12-31T23:59:59-14:00']) {
      const r = await s.api('/vcons', { method: 'POST', json: { created_at } });
      expectError(r, 400, 'validation_failed', created_at);
      expect(r.body.details).toEqual([{ path: 'created_at', message: expect.stringMatching(/0001-01-01.*9999-12-31/) }]);
      const m = await mcp.call('create_vcon', { vcon: { created_at } });
      expect(m.structuredContent.details.map((d: { path: string }) => d.path)).toEqual(['created_at']);
    }
    const ok = await s.api('/vcons', {
      method: 'POST',
      json: { uuid: '0195a1c2-0000-4000-8000-0000000bad02', created_at: '0001-01-01T00:00:00-01:00' },
    });
    expect(ok.status).toBe(201);
    expect((await s.api('/vcons/0195a1c2-0000-4000-8000-0000000bad02', { method: 'DELETE' })).status).toBe(200);
  });

  it('answers MCP list, search and analytics tools with invalid_parameter', async () => {
    for (const [tool, args] of [
      ['search_vcons', { start_date: '0001-01-01T00:00:00+14:00' }],
      ['search_vcons_content', { q: 'alpha', end_date: '9999-12-31T23:59:59-14:00' }],
      ['search_vcons_hybrid', { q: 'alpha', start_date: '0001-01-01T00:00:00+14:00' }],
      ['get_content_analytics', { start_date: '0001-01-01T00:00:00+14:00' }],
      ['get_analytics', { end_date: '9999-12-31T23:59:59-14:00' }],
    ] as const) {
      const m = await mcp.call(tool, args);
      expect([m.isError, m.structuredContent?.error], `${tool} ${textOf(m)}`).toEqual([true, 'invalid_parameter']);
    }
  });
});

describe('absurd durations', () => {
  it('refuses dialog[0].duration = 1e308 at write time, so analytics keeps answering', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await s.api('/vcons', { method: 'POST', json: { dialog: [{ type: 'recording', duration: 1e308 }] } });
      expectError(r, 400, 'validation_failed', 'duration');
      expect(paths(r)).toEqual(['dialog[0].duration']);
    }
    const raw = await s.api('/vcons', { method: 'POST', body: '{"dialog":[{"type":"text","duration":1e400}]}', headers: json });
    expectError(raw, 400, 'validation_failed', '1e400');
    const append = await s.api(`/vcons/${SEED}/dialog`, { method: 'POST', json: { type: 'text', duration: 2e9 } });
    expectError(append, 400, 'validation_failed', 'append');
    const m = await mcp.call('add_dialog', { uuid: SEED, dialog: { type: 'text', duration: 1e308 } });
    expect(m.structuredContent.error).toBe('validation_failed');
    for (const path of ['/analytics', '/analytics/content']) expect((await s.api(path)).status, path).toBe(200);
  });
});

describe('example types that are Object.prototype members', () => {
  it("answers 404 example_not_found as JSON, without a key (the review's requests)", async () => {
    for (const type of ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf']) {
      const r = await s.api(`/examples/${type}`, { key: null });
      expectError(r, 404, 'example_not_found', type);
      expect(r.body.message).toContain('Known types: minimal');
      const m = await mcp.call('get_examples', { type });
      expect([m.isError, m.structuredContent?.error], type).toEqual([true, 'example_not_found']);
    }
    expect((await s.api('/examples/minimal', { key: null })).status).toBe(200);
  });

  it('answers tag_not_found for a tag key named like an Object.prototype member (MCP get_tags)', async () => {
    for (const key of ['constructor', 'toString', '__proto__']) {
      const m = await mcp.call('get_tags', { uuid: SEED, key });
      expect([m.isError, m.structuredContent?.error], key).toEqual([true, 'tag_not_found']);
    }
  });
});

describe('undecodable path parameters', () => {
  it("answers 400 invalid_parameter as JSON (the review's requests)", async () => {
    for (const path of ['/examples/%FF', '/vcons/%FF', '/vcons/%E0%A4%A/tags', `/vcons/${SEED}/tags/%C0`]) {
      const r = await s.api(path, { key: path.startsWith('/examples') ? null : undefined });
      expectError(r, 400, 'invalid_parameter', path);
      expect(paths(r)).toEqual(['path']);
    }
  });
});

describe('analyze errors of any SQLSTATE class', () => {
  it('answers 400, not 500, for XX000 from pg_describe_object (REST and MCP)', async () => {
    const r = await s.api('/database/analyze', { method: 'POST', json: { query: 'select pg_describe_object(1,1,1)', analyze: true } });
    expectError(r, 400, 'validation_failed', 'analyze');
    const m = await mcp.call('analyze_query', { query: 'select pg_describe_object(1,1,1)', analyze: true });
    expect([m.isError, m.structuredContent?.error]).toEqual([true, 'validation_failed']);
  });
});

describe('the MCP error mapping with every thrown shape', () => {
  it('answers each as an error result with a code, and the session keeps working', async () => {
    const { SHAPES } = (await import('../fixtures/plugins/throws.mjs' as string)) as { SHAPES: string[] };
    for (const shape of SHAPES) {
      const m = await mcp.call('throw_shape', { shape });
      expect(m.isError, shape).toBe(true);
      expect(m.structuredContent.error, shape).toBe(shape === 'unavailable' ? 'database_unavailable' : 'internal_error');
      expect(typeof m.structuredContent.message, shape).toBe('string');
    }
    expect((await mcp.call('get_vcon', { uuid: SEED })).isError).toBeFalsy();
  });
});
