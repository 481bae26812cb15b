// The three search routes through HTTP on a real instance with the default (GloVe) provider.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { waitFor } from '../helpers/poll.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { buildVcon } from './builders.js';

let srv: TestServer;

const search = (kind: 'content' | 'semantic' | 'hybrid', params: Record<string, string | number | undefined>) =>
  srv.api(`/vcons/search/${kind}?${new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]))}`);

const KINDS = ['content', 'semantic', 'hybrid'] as const;

const sources = buildVcon({
  subject: 'Zephyrine warranty question',
  parties: [{ name: 'Quillon Marbury', mailto: 'quillon@example.org', tel: '+15550001111' }, { name: 'Agent Smith' }],
  turns: ['My xylophonist neighbour recommended your store.', 'Happy to help with that.'],
  analysis: [
    { type: 'summary', body: 'Customer asked about barnacle removal service.', encoding: 'none' },
    { type: 'transcript', body: JSON.stringify({ transcript: 'we discussed the marmalade shipment' }), encoding: 'json' },
  ],
  attachments: [
    { purpose: 'notes', mediatype: 'text/plain', encoding: 'none', body: 'Gazebo delivery scheduled for Monday.' },
    // A payload: base64 of "platypus platypus platypus ..." must never be indexed.
    { purpose: 'recording', mediatype: 'audio/wav', encoding: 'base64url', body: Buffer.from('platypus '.repeat(40)).toString('base64url') },
  ],
  dialog: [
    {
      type: 'text',
      start: '2025-03-14T15:10:00Z',
      parties: [0],
      mediatype: 'text/plain',
      encoding: 'base64url',
      body: Buffer.from('okapi okapi okapi').toString('base64url'),
    },
  ],
});

const refund = buildVcon({
  subject: 'Order 1182',
  created_at: '2024-06-01T10:00:00Z',
  turns: [
    'The blender I ordered arrived with a cracked jar and the motor will not start.',
    'I am sorry about that. I have issued a full reimbursement to your Visa card.',
  ],
});

const password = buildVcon({
  subject: 'Login trouble',
  created_at: '2025-01-10T10:00:00Z',
  turns: ['I forgot my password and cannot sign in to my account.', 'I have emailed you a reset link.'],
});

beforeAll(async () => {
  srv = await startTestServer();
  // wait_for=search: indexed before the tests search (a search's own catch-up is best effort, bounded).
  for (const v of [sources, refund, password]) {
    const r = await srv.api('/vcons?wait_for=search', { method: 'POST', json: v });
    expect(r.status).toBe(201);
  }
});
afterAll(() => srv?.close());

describe('keyword search', () => {
  test.each([
    ['Zephyrine', 'subject', 0],
    ['Marbury', 'party', 0],
    ['quillon@example.org', 'party', 0],
    ['xylophonist', 'dialog', 0],
    ['barnacle', 'analysis', 0],
    ['marmalade', 'analysis', 1],
    ['gazebo', 'attachment', 0],
  ])('finds %s in its %s', async (q, source, index) => {
    const r = await search('content', { q });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(r.body.results.map((x: any) => x.uuid)).toEqual([sources.uuid]);
    const hit = r.body.results[0];
    expect(hit.subject).toBe('Zephyrine warranty question');
    expect(hit.created_at).toBe('2025-03-14T15:09:26Z');
    expect(hit.matches).toContainEqual(expect.objectContaining({ source, index }));
    expect(r.body.pagination).toEqual({ limit: 10, offset: 0, has_more: false });
  });

  test('base64 payloads are not indexed; base64url text is indexed as its decoded text', async () => {
    for (const q of ['platypus', (sources.attachments as any[])[1].body.slice(0, 20)]) {
      const r = await search('content', { q });
      expect(r.body.results).toEqual([]);
    }
    const r = await search('content', { q: 'okapi' });
    expect(r.body.results.map((x: any) => x.uuid)).toEqual([sources.uuid]);
    expect(r.body.results[0].matches).toContainEqual(
      expect.objectContaining({ source: 'dialog', index: 2, snippet: expect.stringContaining('**okapi**') }),
    );
  });

  test('one result per vCon with several matches, snippets ≤ 300 characters', async () => {
    const long = buildVcon({
      subject: 'Kumquat crate',
      turns: [
        `${'filler words about nothing in particular '.repeat(60)} the kumquat was bruised ${'more filler text here '.repeat(60)}`,
        'Another kumquat remark.',
      ],
      analysis: [{ type: 'summary', body: 'kumquat kumquat', encoding: 'none' }],
    });
    await srv.api('/vcons?wait_for=search', { method: 'POST', json: long });
    const r = await search('content', { q: 'kumquat' });
    expect(r.body.count).toBe(1);
    expect(r.body.results).toHaveLength(1);
    const matches = r.body.results[0].matches;
    expect(matches.length).toBeGreaterThan(1);
    for (const m of matches) {
      expect(m.snippet.length).toBeLessThanOrEqual(300);
      expect(m.snippet.toLowerCase()).toContain('kumquat');
    }
    // The subject (weight A) outranks the dialog and the analysis.
    expect(matches[0].source).toBe('subject');
  });

  test('web search syntax: quotes, OR, -word', async () => {
    const ids = async (q: string) => (await search('content', { q })).body.results.map((x: any) => x.uuid).sort();
    expect(await ids('blender OR password')).toEqual([refund.uuid, password.uuid].sort());
    expect(await ids('"reset link"')).toEqual([password.uuid]);
    expect(await ids('"link reset"')).toEqual([]);
    expect(await ids('account -password')).toEqual([]);
  });
});

describe('semantic and hybrid', () => {
  test('a synonym finds its conversation where keywords do not', async () => {
    const r = await search('semantic', { q: 'blender refund' });
    expect(r.status).toBe(200);
    expect(r.body.results[0].uuid).toBe(refund.uuid);
    expect(r.body.results[0].matches.length).toBeGreaterThan(0);
    // The conversation says "reimbursement", never "refund": keyword search can't find it by that word.
    expect((await search('content', { q: 'refund' })).body.results.map((x: any) => x.uuid)).not.toContain(refund.uuid);
  });

  test('a typo still finds its conversation', async () => {
    const r = await search('semantic', { q: 'pasword resett' });
    expect(r.body.results[0].uuid).toBe(password.uuid);
  });

  test('hybrid fuses both rankings and reports each rank', async () => {
    const r = await search('hybrid', { q: 'cracked blender' });
    expect(r.status).toBe(200);
    const top = r.body.results[0];
    expect(top.uuid).toBe(refund.uuid);
    expect(top.keyword_rank).toBe(1);
    expect(top.semantic_rank).toBe(1);
    const others = r.body.results.slice(1);
    for (const o of others) {
      expect(o.keyword_rank).toBeNull();
      expect(typeof o.semantic_rank).toBe('number');
    }
    // First on both sides: the full fused score.
    expect(top.score).toBeCloseTo(1, 6);
  });

  test('threshold is honoured, 0 included', async () => {
    const all = await search('semantic', { q: 'blender refund', threshold: 0, limit: 100 });
    expect(all.body.results.length).toBeGreaterThanOrEqual(3);
    expect(all.body.results.every((x: any) => x.score >= 0)).toBe(true);
    const strict = await search('semantic', { q: 'blender refund', threshold: 0.99 });
    expect(strict.body.results).toEqual([]);
  });
});

describe('parameters, filters and paging', () => {
  test.each(KINDS)('%s: q is required, 1 to 1000 characters', async (kind) => {
    for (const params of [{}, { q: '' }, { q: '   ' }, { q: 'x'.repeat(1001) }] as Record<string, string>[]) {
      const r = await search(kind, params);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('invalid_parameter');
    }
    expect((await search(kind, { q: 'x'.repeat(1000) })).status).toBe(200);
    expect((await search(kind, { q: 'blender', limit: 0 })).status).toBe(400);
    expect((await search(kind, { q: 'blender', start_date: 'yesterday' })).status).toBe(400);
    expect((await search(kind, { q: 'blender', tags: '[1]' })).status).toBe(400);
  });

  test('threshold outside 0..1 is refused', async () => {
    for (const threshold of ['-0.1', '1.5', 'high']) {
      const r = await search('semantic', { q: 'blender', threshold });
      expect(r.status).toBe(400);
      expect(r.body.error).toBe('invalid_parameter');
    }
  });

  test.each(KINDS)('%s: date and tag filters', async (kind) => {
    const q = 'password OR blender';
    const ids = async (extra: Record<string, string>) => (await search(kind, { q, ...extra })).body.results.map((x: any) => x.uuid);
    expect(await ids({ end_date: '2024-12-31' })).toEqual([refund.uuid]);
    expect(await ids({ start_date: '2025-01-01', end_date: '2025-01-10' })).toEqual([password.uuid]);
    expect(await ids({ tags: JSON.stringify({ team: 'billing' }) })).toEqual([]);
  });

  test.each(KINDS)('%s: paging with limit, offset and has_more', async (kind) => {
    const q = 'kiwifruit complaint';
    const batch = Array.from({ length: 5 }, (_, i) =>
      buildVcon({ subject: `Kiwifruit complaint ${i}`, turns: [`kiwifruit complaint number ${i} ${'about kiwifruit '.repeat(i)}`] }),
    );
    if (kind === 'content') {
      const r = await srv.api('/vcons/batch?wait_for=search', { method: 'POST', json: batch });
      expect(r.status).toBe(201);
    }
    const p1 = await search(kind, { q, limit: 2, offset: 0, threshold: 0.3 });
    const p2 = await search(kind, { q, limit: 2, offset: 2, threshold: 0.3 });
    const p3 = await search(kind, { q, limit: 2, offset: 4, threshold: 0.3 });
    expect(p1.body.pagination).toEqual({ limit: 2, offset: 0, has_more: true });
    expect(p2.body.pagination).toEqual({ limit: 2, offset: 2, has_more: true });
    expect(p3.body.pagination.has_more).toBe(false);
    const seen = [...p1.body.results, ...p2.body.results, ...p3.body.results].map((x: any) => x.uuid);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBe(5);
    expect(p3.body.count).toBe(1);
  });
});

describe('read-your-writes and deletion', () => {
  // A search's own catch-up with writes before it is best effort for 2 s (tests/search/index-queue
  // tests it on the service, where it is deterministic): here each kind is polled until it finds the write.
  const found = (kind: (typeof KINDS)[number], params: Record<string, string>, ok: (r: any) => boolean) =>
    waitFor(
      async () => {
        const r = await search(kind, params);
        return ok(r) ? r : undefined;
      },
      60_000,
      50,
      `${kind} search for ${JSON.stringify(params)}`,
    );

  test('create, append and tag writes reach all three searches; delete removes', async () => {
    const v = buildVcon({ subject: 'Quokka habitat', turns: ['Tell me about the quokka enclosure.'] });
    await srv.api('/vcons?wait_for=search', { method: 'POST', json: v });
    for (const kind of KINDS) {
      expect((await search(kind, { q: 'quokka' })).body.results[0]?.uuid).toBe(v.uuid);
    }
    const appended = await srv.api(`/vcons/${v.uuid}/dialog`, {
      method: 'POST',
      json: {
        type: 'text',
        start: '2025-03-14T15:20:00Z',
        parties: [1],
        mediatype: 'text/plain',
        encoding: 'none',
        body: 'The wombat burrow is next door.',
      },
    });
    expect(appended.status).toBe(201);
    for (const kind of KINDS) {
      const r = await found(kind, { q: 'wombat burrow' }, (x) => x.body.results[0]?.uuid === v.uuid);
      expect(r.body.results[0].matches).toContainEqual(expect.objectContaining({ source: 'dialog', index: 1 }));
    }
    expect((await srv.api(`/vcons/${v.uuid}/tags/zone`, { method: 'PUT', json: { value: 'outback' } })).status).toBe(200);
    for (const kind of KINDS) {
      const r = await found(kind, { q: 'quokka', tags: JSON.stringify({ zone: 'outback' }) }, (x) => x.body.results.length > 0);
      expect(r.body.results.map((x: any) => x.uuid)).toEqual([v.uuid]);
    }
    expect((await srv.api(`/vcons/${v.uuid}`, { method: 'DELETE' })).status).toBe(200);
    for (const kind of KINDS) {
      const r = await search(kind, { q: 'quokka wombat' });
      expect(r.body.results.map((x: any) => x.uuid)).not.toContain(v.uuid);
    }
  });

  test('a read-only key may search; no key is refused', async () => {
    expect((await srv.api('/vcons/search/content?q=blender', { key: 'test-key-ro' })).status).toBe(200);
    expect((await srv.api('/vcons/search/content?q=blender', { key: null })).status).toBe(401);
  });
});
