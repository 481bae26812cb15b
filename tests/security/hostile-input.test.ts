// A generated suite of malformed and hostile requests across every route: every answer is a 4xx
// in the one error format (or a 2xx for a read whose hostile parameter is simply a value that
// matches nothing), never a 5xx, never a crash, and the stored data is unchanged afterwards.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/poll.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
const UUID = '0195a1c2-0000-4000-8000-00000000abcd';
beforeAll(async () => {
  s = await startTestServer({ REST_API_BODY_LIMIT: '256kb' });
  const seed = await s.api('/vcons?wait_for=search', {
    method: 'POST',
    json: {
      uuid: UUID,
      subject: 'seed',
      parties: [{ name: 'Seed', tel: '+15550100' }],
      dialog: [{ type: 'text', encoding: 'none', body: 'hello there' }],
      analysis: [{ type: 'summary', vendor: 'v', body: 'greeting' }],
      attachments: [{ purpose: 'tags', encoding: 'json', body: ['k:v'] }],
    },
  });
  expect(seed.status).toBe(201);
});
afterAll(() => s?.close());

const INJECTIONS = [
  "' OR 1=1 --",
  "'; drop table vcons; --",
  '" OR ""="',
  '1; select pg_sleep(5)',
  '$(rm -rf /)',
  '`id`',
  '../../etc/passwd',
  '..%2f..%2fetc%2fpasswd',
  '%00',
  '\u0000',
  '{{7*7}}',
  '${7*7}',
  '<script>alert(1)</script>',
  'public.vcons',
  'pg_catalog.pg_user',
  '\\',
  '%',
  '_',
  "'",
  '"',
  'NaN',
  'Infinity',
  '-0',
  '1e309',
  '9'.repeat(40),
  '\ud800',
  '\udfff',
  '👍🏽',
  '\u202e',
  'ǅ',
  ' '.repeat(3),
  '\n\r\t',
  'a'.repeat(5000),
];
const hostile = fc.oneof(
  fc.constantFrom(...INJECTIONS),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer().map(String),
);

type Req = { method: string; path: string; body?: string; headers?: Record<string, string>; kind: 'read' | 'write' };
const enc = encodeURIComponent;

const readPaths = (h: string): string[] => [
  `/vcons?limit=${enc(h)}`,
  `/vcons?offset=${enc(h)}`,
  `/vcons?format=${enc(h)}`,
  `/vcons?subject=${enc(h)}`,
  `/vcons?party_name=${enc(h)}`,
  `/vcons?party_email=${enc(h)}`,
  `/vcons?party_tel=${enc(h)}`,
  `/vcons?start_date=${enc(h)}`,
  `/vcons?end_date=${enc(h)}`,
  `/vcons?tags=${enc(h)}`,
  `/vcons/${enc(h)}`,
  `/vcons/${UUID}?format=${enc(h)}`,
  `/vcons/${enc(h)}/analysis`,
  `/vcons/${UUID}/analysis?type=${enc(h)}`,
  `/vcons/${UUID}/attachments?purpose=${enc(h)}`,
  `/vcons/${UUID}/attachments?type=${enc(h)}`,
  `/vcons/${UUID}/tags?key=${enc(h)}`,
  `/tags/search?tags=${enc(h)}`,
  `/tags/search?tags=${enc(JSON.stringify({ [h]: h }))}&limit=${enc(h)}`,
  `/discovery/attachments/purposes?min_count=${enc(h)}`,
  `/discovery/analysis/types?include_counts=${enc(h)}`,
  `/vcons/search/content?q=${enc(h)}`,
  `/vcons/search/semantic?q=${enc(h)}&threshold=${enc(h)}`,
  `/vcons/search/hybrid?q=${enc(h)}&limit=${enc(h)}`,
  `/analytics/growth?months_back=${enc(h)}`,
  `/analytics/growth?granularity=${enc(h)}`,
  `/analytics/content?start_date=${enc(h)}`,
  `/examples/${enc(h)}`,
];

/** Bodies that are never a valid document: malformed JSON, wrong top-level types, wrong field types. */
const badBodies = (h: string): string[] => [
  `{"subject": ${h.length}`,
  '{',
  '[',
  'nul',
  `"${'x'.repeat(10)}`,
  JSON.stringify(h),
  JSON.stringify([h]),
  '12',
  'true',
  'null',
  JSON.stringify({ uuid: h + '-not-uuid' }),
  JSON.stringify({ created_at: h + 'not a date' }),
  JSON.stringify({ parties: h }),
  JSON.stringify({ dialog: [{ type: h + '-x' }] }),
  JSON.stringify({ analysis: [{ type: 'x', vendor: h, body: { o: h } }] }),
  JSON.stringify({ dialog: [{ type: 'text', parties: [1e9] }] }),
  JSON.stringify({ subject: 5, extensions: h }),
  JSON.stringify({ attachments: [{ encoding: h + '-enc' }] }),
  '{"a":'.repeat(300) + '1' + '}'.repeat(300),
];

const writeReqs = (h: string): Req[] => {
  const json = { 'content-type': 'application/json' };
  const out: Req[] = [];
  for (const body of badBodies(h)) {
    out.push({ method: 'POST', path: '/vcons', body, headers: json, kind: 'write' });
    out.push({ method: 'POST', path: `/vcons/${UUID}/dialog`, body, headers: json, kind: 'write' });
    out.push({ method: 'POST', path: `/vcons/${UUID}/analysis`, body, headers: json, kind: 'write' });
  }
  out.push(
    { method: 'POST', path: '/vcons/batch', body: JSON.stringify(h), headers: json, kind: 'write' },
    { method: 'POST', path: '/vcons/batch', body: JSON.stringify([{ uuid: h + 'x' }]), headers: json, kind: 'write' },
    { method: 'PATCH', path: `/vcons/${UUID}`, body: JSON.stringify({ [h + '_x']: 1 }), headers: json, kind: 'write' },
    { method: 'PATCH', path: `/vcons/${UUID}`, body: JSON.stringify({ subject: { h } }), headers: json, kind: 'write' },
    { method: 'PUT', path: `/vcons/${UUID}/tags/${enc(h + ':x')}`, body: JSON.stringify({ value: 'v' }), headers: json, kind: 'write' },
    { method: 'PUT', path: `/vcons/${UUID}/tags/k`, body: JSON.stringify({ value: { h } }), headers: json, kind: 'write' },
    { method: 'PUT', path: `/vcons/${enc(h)}/tags/k`, body: JSON.stringify({ value: 'v' }), headers: json, kind: 'write' },
    { method: 'DELETE', path: `/vcons/${enc(h)}x`, kind: 'write' },
    { method: 'DELETE', path: `/vcons/${enc(h)}x/tags/k`, kind: 'write' },
    { method: 'POST', path: '/vcons', body: `subject=${enc(h)}`, headers: { 'content-type': 'application/x-www-form-urlencoded' }, kind: 'write' },
    { method: 'POST', path: '/vcons', body: '{}', headers: { 'content-type': `text/${h.replace(/[^a-z]/g, '') || 'plain'}` }, kind: 'write' },
    { method: 'POST', path: '/vcons', body: JSON.stringify({ subject: 'x'.repeat(300 * 1024) }), headers: json, kind: 'write' },
    { method: 'POST', path: '/vcons', body: 'not gzip at all', headers: { ...json, 'content-encoding': 'gzip' }, kind: 'write' },
    { method: 'POST', path: '/vcons', body: '{}', headers: { ...json, 'content-encoding': 'compress' }, kind: 'write' },
    { method: 'POST', path: '/database/analyze', body: JSON.stringify({ query: `${h}; delete from vcons` }), headers: json, kind: 'write' },
  );
  return out;
};

async function snapshot() {
  const sql = s.instance.sql;
  // Background indexing of what was written before changes search_units: compare settled states.
  await waitFor(
    async () => (await sql<{ n: number }[]>`select count(*)::int as n from index_queue`)[0].n === 0,
    120_000,
    50,
    'the index queue to drain',
  );
  const [v] = await sql<
    { h: string; n: number }[]
  >`select md5(string_agg(uuid::text || doc::text, ',' order by uuid)) as h, count(*)::int as n from vcons`;
  const derived: Record<string, number> = {};
  for (const t of ['vcon_parties', 'vcon_dialogs', 'vcon_analyses', 'vcon_attachments', 'vcon_tags', 'search_units']) {
    derived[t] = (await sql<{ n: number }[]>`select count(*)::int as n from ${sql(t)}`)[0].n;
  }
  return { ...v, derived };
}

describe('hostile input', () => {
  it('answers at least 1,000 generated malformed requests without a 5xx and changes nothing', async () => {
    const before = await snapshot();
    const samples = fc.sample(hostile, { numRuns: 40, seed: 20261122 });
    const reqs: Req[] = samples.flatMap((h) => [...readPaths(h).map((path) => ({ method: 'GET', path, kind: 'read' as const })), ...writeReqs(h)]);
    expect(reqs.length).toBeGreaterThanOrEqual(1000);
    const failures: string[] = [];
    let i = 0;
    const worker = async () => {
      while (i < reqs.length) {
        const r = reqs[i++];
        const res = await fetch(`${s.base}${r.path}`, {
          method: r.method,
          body: r.body,
          headers: { authorization: 'Bearer test-key-rw', ...r.headers },
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        const where = `${r.method} ${r.path.slice(0, 120)} → ${res.status} ${text.slice(0, 200)}`;
        if (res.status >= 500) failures.push(where);
        else if (res.status >= 400) {
          if (!(body && body.success === false && typeof body.error === 'string' && typeof body.message === 'string'))
            failures.push(`format: ${where}`);
        } else if (r.kind === 'write') failures.push(`accepted: ${where}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expect(failures, failures.slice(0, 10).join('\n')).toEqual([]);
    expect(await snapshot()).toEqual(before);
    expect((await s.api('/health', { key: null })).status).toBe(200);
    // A fixed seed and count (40 samples, over 1,000 requests): minutes beside a second full run on
    // 2 cores. A ceiling for a hang, not a speed bound.
  }, 600_000);
});
