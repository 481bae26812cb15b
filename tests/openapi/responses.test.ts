// Every route, each with its success and error statuses (the scenarios of tests/rest/*.test.ts),
// sent to a real instance; every response is validated against the instance's own OpenAPI
// document: status declared for the operation, content type declared, body matches the schema.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE_TYPES } from '../../src/domain/examples.js';
import { createResponseChecker, type ResponseChecker } from '../helpers/openapi-check.js';
import { RO_KEY, startTestServer, type ApiExchange, type TestServer } from '../helpers/server.js';

let s: TestServer;
let checker: ResponseChecker;
let problems: string[] = [];
let exchanges = 0;

/** Validates one response; responses outside any operation (405, unknown routes) as plain errors. */
function validate(x: ApiExchange) {
  exchanges++;
  const e = { method: x.method, path: x.path, status: x.status, contentType: x.headers.get('content-type'), body: x.body };
  const found = checker.findOperation(x.method, x.path);
  problems.push(...(found || ![404, 405].includes(x.status) ? checker.check(e) : checker.checkError(e)));
}

beforeAll(async () => {
  // The checker is built from the document this instance serves, before the first api() call.
  s = await startTestServer(
    // A webhook endpoint nothing listens on (port 1): its routes have an endpoint to answer about.
    {
      EMBEDDINGS_PROVIDER: 'hashing',
      REST_API_BODY_LIMIT: '1mb',
      WEBHOOK_URLS: HOOK,
      WEBHOOK_SECRET: `whsec_${'A'.repeat(32)}`,
      WEBHOOK_ALLOW_PRIVATE: 'true',
    },
    { onResponse: (x) => checker && validate(x) },
  );
  const doc = (await (await fetch(`${s.base}/openapi.json`)).json()) as Record<string, unknown>;
  checker = createResponseChecker(doc);
});
afterEach(() => {
  const found = problems;
  problems = [];
  expect(found).toEqual([]);
});
afterAll(async () => {
  await s?.close();
});

const HOOK = 'http://127.0.0.1:1/hook';
const q = (o: unknown) => encodeURIComponent(JSON.stringify(o));
const json = { 'content-type': 'application/json' };
const vcon = () => ({
  vcon: '0.3.0',
  subject: 'Refund for a damaged parcel',
  parties: [
    { tel: '+15550001', name: 'Ann' },
    { mailto: 'bob@example.com', name: 'Bob' },
  ],
  dialog: [{ type: 'text', start: '2025-01-01T10:00:00Z', parties: [0, 1], encoding: 'none', body: 'The parcel arrived damaged, I want a refund.' }],
  analysis: [{ type: 'summary', vendor: 'acme', body: 'Customer asks for a refund' }],
  attachments: [
    { purpose: 'invoice', encoding: 'json', body: { total: 10 } },
    { type: 'legacy_note', body: 'old style' },
  ],
});
const expectStatus = async (p: Promise<{ status: number; body: any }>, status: number) => {
  const r = await p;
  expect(r.status).toBe(status);
  return r;
};

describe('infrastructure', () => {
  it('health, version, schema, openapi.json and every example; 404 for an unknown example', async () => {
    await expectStatus(s.api('/health', { key: null }), 200);
    await expectStatus(s.api('/version', { key: null }), 200);
    await expectStatus(s.api('/schema', { key: null }), 200);
    await expectStatus(s.api('/openapi.json', { key: null }), 200);
    for (const type of EXAMPLE_TYPES) await expectStatus(s.api(`/examples/${type}`, { key: null }), 200);
    await expectStatus(s.api('/examples/fax', { key: null }), 404);
    await expectStatus(s.api('/livez', { key: null }), 200);
    await expectStatus(s.api('/readyz', { key: null }), 200);
  });
});

describe('vCons', () => {
  it('create 201/200/400, invalid JSON, 415, 413, 401, 403', async () => {
    const c = await expectStatus(s.api('/vcons', { method: 'POST', json: vcon() }), 201);
    await expectStatus(s.api('/vcons', { method: 'POST', json: { ...vcon(), uuid: c.body.uuid } }), 200);
    for (const body of EXAMPLE_TYPES) await s.api('/vcons', { method: 'POST', json: (await s.api(`/examples/${body}`, { key: null })).body.vcon });
    await expectStatus(s.api('/vcons', { method: 'POST', json: { dialog: [{ type: 'video' }], analysis: [{ type: 'x', body: {} }] } }), 400);
    await expectStatus(s.api('/vcons', { method: 'POST', json: [] }), 400);
    await expectStatus(s.api('/vcons', { method: 'POST', body: '{"subject":', headers: json }), 400);
    await expectStatus(s.api('/vcons', { method: 'POST', body: 'subject', headers: { 'content-type': 'text/plain' } }), 415);
    await expectStatus(s.api('/vcons', { method: 'POST', json: { subject: 'x'.repeat(1_100_000) } }), 413);
    await expectStatus(s.api('/vcons', { method: 'POST', json: vcon(), key: null }), 401);
    await expectStatus(s.api('/vcons', { method: 'POST', json: vcon(), key: 'wrong' }), 401);
    await expectStatus(s.api('/vcons', { method: 'POST', json: vcon(), key: RO_KEY }), 403);
    // The opaque signed and encrypted forms are stored and returned as they are.
    const signed = { payload: 'e30', signatures: [{ header: { uuid: randomUUID() }, signature: 'sig' }] };
    const sc = await expectStatus(s.api('/vcons', { method: 'POST', json: signed }), 201);
    await expectStatus(s.api(`/vcons/${sc.body.uuid}`), 200);
    const encrypted = { ciphertext: 'abc', recipients: [{}], unprotected: { uuid: randomUUID() } };
    await expectStatus(s.api('/vcons', { method: 'POST', json: encrypted }), 201);
  });

  it('batch 201, 207, 400 (none stored, not an array, empty, over 100)', async () => {
    const uuid = randomUUID();
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: [{ uuid, subject: 'b1' }, { subject: 'b2' }] }), 201);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: [{ uuid, subject: 'again' }, { dialog: [{ type: 'video' }] }, 'nope'] }), 207);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: [{ uuid: 'bad' }] }), 400);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: { subject: 'x' } }), 400);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: [] }), 400);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: Array.from({ length: 101 }, () => ({})) }), 400);
    await expectStatus(s.api('/vcons/batch', { method: 'POST', json: [{}], key: RO_KEY }), 403);
  });

  it('list in every format, with filters; 400 bad parameters and the tag paging cap', async () => {
    for (const qs of [
      '',
      'format=full&limit=100',
      'format=ids_only',
      'limit=200&offset=1',
      'subject=refund&party_name=ann&start_date=2020-01-01',
      `tags=${q({ k: 'v' })}`,
    ]) {
      await expectStatus(s.api(`/vcons?${qs}`), 200);
    }
    await expectStatus(s.api('/vcons', { key: RO_KEY }), 200);
    for (const qs of ['limit=0', 'offset=-1', 'format=xml', 'start_date=yesterday', 'tags=notjson']) await expectStatus(s.api(`/vcons?${qs}`), 400);
    await expectStatus(s.api(`/vcons?tags=${q({ k: 'v' })}&offset=99950&limit=100`), 400);
    await expectStatus(s.api('/vcons', { key: null }), 401);
  });

  it('get (full, metadata, summary), patch, delete with their 400 and 404', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: vcon() });
    for (const f of ['', '?format=full', '?format=metadata', '?format=summary']) await expectStatus(s.api(`/vcons/${body.uuid}${f}`), 200);
    await expectStatus(s.api(`/vcons/${body.uuid}?format=xml`), 400);
    await expectStatus(s.api('/vcons/not-a-uuid'), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}`), 404);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { subject: 'New', extensions: ['x'], must_support: ['y'] } }), 200);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { parties: [] } }), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}`, { method: 'PATCH', json: { subject: 'x' } }), 404);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { subject: 'x' }, key: RO_KEY }), 403);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'DELETE', key: RO_KEY }), 403);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'DELETE' }), 200);
    await expectStatus(s.api(`/vcons/${body.uuid}`, { method: 'DELETE' }), 404);
    await expectStatus(s.api('/vcons/nope', { method: 'DELETE' }), 400);
  });

  it('sub-resources: append and read dialog, analysis, attachments with 400 and 404', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: vcon() });
    const u = body.uuid;
    await expectStatus(s.api(`/vcons/${u}/dialog`, { method: 'POST', json: { type: 'text', parties: [1], body: 'late', encoding: 'none' } }), 201);
    await expectStatus(s.api(`/vcons/${u}/dialog`, { method: 'POST', json: { type: 'text', parties: [7] } }), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}/dialog`, { method: 'POST', json: { type: 'text' } }), 404);
    await expectStatus(s.api(`/vcons/${u}/analysis`, { method: 'POST', json: { type: 'topics', vendor: 'acme', body: 'shipping' } }), 201);
    await expectStatus(s.api(`/vcons/${u}/analysis`, { method: 'POST', json: { type: 'x', vendor: 'v', schema_version: '1' } }), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}/analysis`, { method: 'POST', json: { type: 'x', vendor: 'v' } }), 404);
    await expectStatus(s.api(`/vcons/${u}/attachments`, { method: 'POST', json: { purpose: 'receipt', body: 'r' } }), 201);
    await expectStatus(s.api(`/vcons/${u}/attachments`, { method: 'POST', json: { encoding: 'base64' } }), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}/attachments`, { method: 'POST', json: {} }), 404);
    await expectStatus(s.api(`/vcons/${u}/attachments`, { method: 'POST', json: {}, key: RO_KEY }), 403);
    for (const p of ['analysis', 'analysis?type=summary', 'attachments', 'attachments?purpose=invoice', 'attachments?type=legacy_note']) {
      await expectStatus(s.api(`/vcons/${u}/${p}`), 200);
    }
    await expectStatus(s.api(`/vcons/${randomUUID()}/analysis`), 404);
    await expectStatus(s.api(`/vcons/${randomUUID()}/attachments`), 404);
    await expectStatus(s.api('/vcons/bad/attachments'), 400);
  });
});

describe('tags and discovery', () => {
  it('tag routes with 200, 204, 400, 404', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: { subject: 'tags', attachments: [{ type: 'tags', body: { old: 'x' } }] } });
    const u = body.uuid;
    await expectStatus(s.api(`/vcons/${u}/tags/priority`, { method: 'PUT', json: { value: 3 } }), 200);
    await expectStatus(s.api(`/vcons/${u}/tags/a:b`, { method: 'PUT', json: { value: 'x' } }), 400);
    await expectStatus(s.api(`/vcons/${u}/tags/k`, { method: 'PUT', json: { other: 1 } }), 400);
    await expectStatus(s.api(`/vcons/${randomUUID()}/tags/k`, { method: 'PUT', json: { value: 'x' } }), 404);
    await expectStatus(s.api(`/vcons/${u}/tags`), 200);
    await expectStatus(s.api(`/vcons/${u}/tags?key=priority`), 200);
    await expectStatus(s.api(`/vcons/${u}/tags?key=absent`), 404);
    await expectStatus(s.api(`/vcons/${randomUUID()}/tags`), 404);
    await expectStatus(s.api('/tags'), 200);
    await expectStatus(s.api(`/tags/search?tags=${q({ priority: 3 })}&limit=1`), 200);
    for (const qs of ['', 'tags=notjson', `tags=${q(['a'])}`]) await expectStatus(s.api(`/tags/search?${qs}`), 400);
    await expectStatus(s.api(`/vcons/${u}/tags/old`, { method: 'DELETE' }), 204);
    await expectStatus(s.api(`/vcons/${u}/tags/old`, { method: 'DELETE', key: RO_KEY }), 403);
    await expectStatus(s.api(`/vcons/${u}/tags`, { method: 'DELETE' }), 204);
    await expectStatus(s.api(`/vcons/${randomUUID()}/tags`, { method: 'DELETE' }), 404);
    await expectStatus(s.api(`/vcons/${randomUUID()}/tags/k`, { method: 'DELETE' }), 404);
  });

  it('discovery with and without counts; 400 bad parameters', async () => {
    for (const p of ['/discovery/attachments/purposes', '/discovery/attachments/types', '/discovery/analysis/types']) {
      await expectStatus(s.api(p), 200);
      await expectStatus(s.api(`${p}?include_counts=false&min_count=1`), 200);
      await expectStatus(s.api(`${p}?min_count=0`), 400);
    }
  });
});

describe('search', () => {
  it('content, semantic and hybrid search with results; 400 bad parameters', async () => {
    await s.api('/vcons', { method: 'POST', json: vcon() });
    for (const kind of ['content', 'semantic', 'hybrid']) {
      const r = await expectStatus(s.api(`/vcons/search/${kind}?q=refund%20parcel&limit=5`), 200);
      expect(r.body.results.length).toBeGreaterThan(0);
      await expectStatus(s.api(`/vcons/search/${kind}?q=refund&tags=${q({ none: 'x' })}&start_date=2020-01-01`), 200);
      await expectStatus(s.api(`/vcons/search/${kind}`), 400);
      await expectStatus(s.api(`/vcons/search/${kind}?q=x&limit=0`), 400);
      await expectStatus(s.api(`/vcons/search/${kind}?q=refund`, { key: null }), 401);
    }
    await expectStatus(s.api('/vcons/search/semantic?q=refund&threshold=0.2'), 200);
    await expectStatus(s.api('/vcons/search/semantic?q=refund&threshold=2'), 400);
    await expectStatus(s.api('/vcons/search/hybrid?q=refund&offset=990&limit=50'), 400);
  });
});

describe('database and analytics', () => {
  it('introspection, analyze and analytics; 400 bad input, 403 analyze with a read-only key', async () => {
    for (const p of ['shape', 'stats', 'size', 'health']) await expectStatus(s.api(`/database/${p}`), 200);
    await expectStatus(s.api('/database/analyze', { method: 'POST', json: { query: 'select uuid from vcons limit 1' } }), 200);
    await expectStatus(s.api('/database/analyze', { method: 'POST', json: { query: 'delete from vcons' } }), 400);
    await expectStatus(s.api('/database/analyze', { method: 'POST', json: { query: 'select 1' }, key: RO_KEY }), 403);
    for (const p of ['', '/growth?granularity=week&months_back=3', '/content?start_date=2020-01-01', '/tags?limit=5', '/attachments']) {
      await expectStatus(s.api(`/analytics${p}`), 200);
    }
    await expectStatus(s.api('/analytics/growth?granularity=year'), 400);
    await expectStatus(s.api('/analytics/content?start_date=nope'), 400);
    await expectStatus(s.api('/analytics?months_back=0'), 400);
    await expectStatus(s.api('/analytics/tags?limit=1000'), 400);
  });
});

describe('changes', () => {
  it('GET /vcons/export: NDJSON, each line a stored vCon; 400 on a bad cursor', async () => {
    await expectStatus(s.api('/vcons/export'), 200);
    await expectStatus(s.api('/vcons/export?after=not-a-uuid'), 400);
  });

  it('GET /changes: a page, 400 on a bad cursor, 410 never here (nothing pruned)', async () => {
    await expectStatus(s.api('/vcons', { method: 'POST', json: vcon() }), 201);
    await expectStatus(s.api('/changes?limit=2', { key: RO_KEY }), 200);
    await expectStatus(s.api('/changes?after=x'), 400);
  });

  it('GET /changes/stream: the data of a change event is a ChangeEvent (the stream is read by hand: it does not end)', async () => {
    const aborter = new AbortController();
    const res = await fetch(`${s.base}/changes/stream?after=0`, { headers: { authorization: `Bearer ${RO_KEY}` }, signal: aborter.signal });
    let text = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (/\n\nid: \d+\ndata: .*\n\n/.test(text)) break;
    }
    aborter.abort();
    const data = JSON.parse(/\n\nid: \d+\ndata: (.*)\n\n/.exec(text)![1]);
    validate({ method: 'GET', path: '/changes/stream?after=0', status: res.status, headers: res.headers, body: data });
    await expectStatus(s.api('/changes/stream?kinds=x'), 400);
  });
});

describe('webhooks', () => {
  it('lists endpoints and failed deliveries, replays and enables; 400 on a bad id, 404 on an unknown one', async () => {
    await expectStatus(s.api('/health'), 200);
    const list = await s.api('/webhooks', { key: RO_KEY });
    expect(list.status).toBe(200);
    const endpoint = list.body.data[0].id as string;
    // A delivery whose attempts ran out, as the sender leaves one.
    const [{ cursor }] = await s.instance.sql<{ cursor: string }[]>`select coalesce(max(cursor), 0)::text as cursor from change_log`;
    await s.instance.sql`update webhook_endpoint set enqueued_through = greatest(enqueued_through, ${cursor}::bigint) where url = ${HOOK}`;
    const id = `msg_${randomUUID().replace(/-/g, '')}`;
    await s.instance
      .sql`insert into webhook_delivery (id, endpoint, cursor, uuid, kind, time, state, attempts, next_at, last_status, last_error, finished_at)
      values (${id}, ${HOOK}, 0, ${randomUUID()}, 'created', now(), 'failed', 10, now(), null, 'connection refused', now())`;
    await expectStatus(s.api(`/webhooks/failed?endpoint=${endpoint}`, { key: RO_KEY }), 200);
    await expectStatus(s.api('/webhooks/failed?endpoint=x'), 400);
    await expectStatus(s.api(`/webhooks/failed/${id}/replay`, { method: 'POST' }), 200);
    await expectStatus(s.api(`/webhooks/failed/${id}/replay`, { method: 'POST' }), 404);
    await expectStatus(s.api('/webhooks/failed/x/replay', { method: 'POST' }), 400);
    await expectStatus(s.api(`/webhooks/${endpoint}/replay`, { method: 'POST' }), 200);
    await expectStatus(s.api(`/webhooks/${endpoint}/enable`, { method: 'POST' }), 200);
    await expectStatus(s.api(`/webhooks/ep_${'0'.repeat(12)}/enable`, { method: 'POST' }), 404);
    await expectStatus(s.api('/webhooks/x/replay', { method: 'POST' }), 400);
  });
});

describe('outside the operations', () => {
  it('405 and unknown routes use the error format', async () => {
    await expectStatus(s.api('/vcons', { method: 'PUT', json: {} }), 405);
    await expectStatus(s.api('/tags', { method: 'DELETE' }), 405);
    await expectStatus(s.api('/nope'), 404);
  });

  it('503 auth_not_configured when no key exists', async () => {
    const none = await startTestServer({ API_KEYS: '', API_KEYS_READONLY: '' }, { onResponse: validate });
    try {
      await expectStatus(none.api('/vcons', { key: null }), 503);
      await expectStatus(none.api('/vcons', { method: 'POST', json: {}, key: null }), 503);
      await expectStatus(none.api('/health', { key: null }), 200);
    } finally {
      await none.close();
    }
  });
});

describe('coverage', () => {
  it('saw a validated success response for every operation of the document', () => {
    const seen = checker.seen();
    const missing = checker.operations().filter((op) => ![...(seen.get(op) ?? [])].some((st) => st < 300));
    expect(missing).toEqual([]);
    const pairs = [...seen.values()].reduce((n, set) => n + set.size, 0);
    console.info(
      `openapi: ${checker.validated()} responses validated (${exchanges} requests), ${seen.size} operations, ${pairs} operation/status pairs`,
    );
    expect(checker.validated()).toBe(exchanges);
  });
});
