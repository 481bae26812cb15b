import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY, startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

const base = () => ({
  vcon: '0.3.0',
  subject: 'Order 42',
  parties: [
    { tel: '+15550001', name: 'Ann' },
    { mailto: 'bob@example.com', name: 'Bob' },
  ],
  dialog: [{ type: 'text', start: '2025-01-01T10:00:00Z', parties: [0, 1], encoding: 'none', body: 'Where is my order?' }],
  analysis: [
    { type: 'summary', vendor: 'acme', body: 'Customer asks about order 42' },
    { type: 'sentiment', vendor: 'acme', encoding: 'json', body: '{"score":0.1}' },
  ],
  attachments: [
    { purpose: 'invoice', encoding: 'json', body: { total: 10 } },
    { type: 'legacy_note', encoding: 'none', body: 'old style' },
  ],
});

describe('vCon CRUD', () => {
  it('creates with an assigned uuid and created_at, then replaces on re-post (200 created:false)', async () => {
    const c = await s.api('/vcons', { method: 'POST', json: base() });
    expect(c.status).toBe(201);
    expect(c.body).toEqual({ success: true, uuid: expect.stringMatching(/^[0-9a-f-]{36}$/), created: true });
    const g = await s.api(`/vcons/${c.body.uuid}`);
    expect(g.body.vcon.uuid).toBe(c.body.uuid);
    expect(Object.keys(g.body.vcon)[0]).toBe('uuid');
    expect(g.body.vcon.created_at).toBeTruthy();
    expect(g.body.vcon.updated_at).toBeUndefined();
    const again = await s.api('/vcons', { method: 'POST', json: { ...g.body.vcon, subject: 'Order 42 (replaced)' } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ success: true, uuid: c.body.uuid, created: false });
    const g2 = await s.api(`/vcons/${c.body.uuid}`);
    expect(g2.body.vcon.subject).toBe('Order 42 (replaced)');
    expect(g2.body.vcon.updated_at).toBeTruthy();
    expect(g2.body.vcon.created_at).toBe(g.body.vcon.created_at);
  });

  it('keeps the stored created_at when a replacement has none (single and batch, repeats too); one that carries it sets it', async () => {
    /** Waits until the clock has moved past a stored time, so a replacement stamped "now" would differ from it. */
    const after = (iso: string) => {
      while (Date.now() <= Date.parse(iso));
    };
    const doc = { ...base(), uuid: randomUUID() };
    const c = await s.api('/vcons', { method: 'POST', json: doc });
    expect(c.status).toBe(201);
    const first = (await s.api(`/vcons/${doc.uuid}`)).body.vcon.created_at as string;
    after(first);
    // The producer's file again, without created_at (the IETF examples have none).
    expect((await s.api('/vcons', { method: 'POST', json: { ...doc, subject: 'again' } })).status).toBe(200);
    const single = (await s.api(`/vcons/${doc.uuid}`)).body.vcon;
    expect(single.subject).toBe('again');
    expect(single.created_at).toBe(first);
    expect(single.updated_at).toBeTruthy();
    // A batch replacing it, and repeating it within the batch.
    const b = await s.api('/vcons/batch', {
      method: 'POST',
      json: [
        { ...doc, subject: 'batch 1' },
        { ...doc, subject: 'batch 2' },
      ],
    });
    expect(b.body.results.map((r: { status: number }) => r.status)).toEqual([200, 200]);
    const batched = (await s.api(`/vcons/${doc.uuid}`)).body.vcon;
    expect(batched.subject).toBe('batch 2');
    expect(batched.created_at).toBe(first);
    // One that carries created_at sets it; a later replacement without one keeps that.
    await s.api('/vcons', { method: 'POST', json: { ...doc, created_at: '2020-02-02T02:02:02Z' } });
    await s.api('/vcons/batch', { method: 'POST', json: [{ ...doc, subject: 'no date' }] });
    expect((await s.api(`/vcons/${doc.uuid}`)).body.vcon.created_at).toBe('2020-02-02T02:02:02Z');
    const listed = await s.api(`/vcons?start_date=2020-02-01T00:00:00Z&end_date=2020-02-03T00:00:00Z`);
    expect(listed.body.data.map((v: { uuid: string }) => v.uuid)).toContain(doc.uuid);
  });

  it('answers a GET with the stored text, its JSON type and exact byte length, and a HEAD with the headers alone', async () => {
    const c = await s.api('/vcons', { method: 'POST', json: { ...base(), subject: 'Grüße, 注文 ✓ — "quoted"' } });
    const url = `${s.base}/vcons/${c.body.uuid}`;
    const headers = { authorization: `Bearer ${KEY}` };
    const g = await fetch(url, { headers });
    const bytes = Buffer.from(await g.arrayBuffer());
    expect(g.status).toBe(200);
    expect(g.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(Number(g.headers.get('content-length'))).toBe(bytes.length);
    expect(g.headers.get('x-request-id')).toBeTruthy();
    const body = JSON.parse(bytes.toString('utf8'));
    expect(body).toMatchObject({ success: true, vcon: { uuid: c.body.uuid, subject: 'Grüße, 注文 ✓ — "quoted"' } });
    const h = await fetch(url, { method: 'HEAD', headers });
    expect(h.status).toBe(200);
    expect(h.headers.get('content-length')).toBe(String(bytes.length));
    expect((await h.arrayBuffer()).byteLength).toBe(0);
    expect((await fetch(url)).status).toBe(401);
  });

  it('keeps unknown fields, extension fields and key order', async () => {
    const doc = {
      zz_first: 1,
      uuid: randomUUID().toUpperCase(),
      vcon: '0.3.0',
      created_at: '2025-02-02T02:02:02+01:00',
      group: [{ uuid: randomUUID() }],
      redacted: {},
      amended: { uuid: randomUUID() },
      party_history: [{ x: 1 }],
      parties: [{ name: 'X', custom: { deep: [1, 2, { a: null }] } }],
      dialog: [{ type: 'transfer', transferee: 0, transferor: 0, transfer_target: 0, original: 0, target_dialog: 0 }],
      meta: { tenant: 't1' },
      number: 1.5,
      flag: false,
    };
    const c = await s.api('/vcons', { method: 'POST', json: doc });
    expect(c.status).toBe(201);
    expect(c.body.uuid).toBe(doc.uuid.toLowerCase());
    const g = await s.api(`/vcons/${c.body.uuid}`);
    expect(g.body.vcon).toEqual({ ...doc, uuid: doc.uuid.toLowerCase() });
    expect(Object.keys(g.body.vcon)).toEqual(Object.keys(doc));
  });

  it('serves format full, metadata and summary; other formats 400', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: base() });
    const meta = await s.api(`/vcons/${body.uuid}?format=metadata`);
    expect(meta.body.vcon.dialog).toBeUndefined();
    expect(meta.body.vcon.analysis).toBeUndefined();
    expect(meta.body.vcon.parties).toHaveLength(2);
    const summary = await s.api(`/vcons/${body.uuid}?format=summary`);
    expect(summary.body.vcon.analysis).toEqual([base().analysis[0]]);
    expect(summary.body.vcon.attachments).toBeUndefined();
    const bad = await s.api(`/vcons/${body.uuid}?format=xml`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'invalid_parameter' });
    expect(bad.body.message).toMatch(/format/);
  });

  it('answers 404 for an unknown uuid and 400 for a malformed one', async () => {
    const missing = await s.api(`/vcons/${randomUUID()}`);
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('vcon_not_found');
    const bad = await s.api('/vcons/not-a-uuid');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('invalid_parameter');
  });

  it('lists every validation problem with its path', async () => {
    const r = await s.api('/vcons', {
      method: 'POST',
      json: {
        created_at: 'Tue, 1 Jan 2025 10:00:00 GMT',
        parties: [{}],
        dialog: [{ type: 'video', parties: [3] }, { type: 'incomplete' }],
        analysis: [{ type: 'x', vendor: 'v', body: { a: 1 }, schema_version: '1' }],
        attachments: [{ encoding: 'base64' }],
      },
    });
    expect(r.status).toBe(400);
    const paths = r.body.details.map((d: any) => d.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'created_at',
        'dialog[0].type',
        'dialog[1].disposition',
        'analysis[0].body',
        'analysis[0].schema_version',
        'attachments[0].encoding',
      ]),
    );
    const sv = r.body.details.find((d: any) => d.path === 'analysis[0].schema_version');
    expect(sv.message).toMatch(/schema/);
    for (const bad of [[], 'text', 42, null]) {
      const x = await s.api('/vcons', { method: 'POST', json: bad });
      expect([400]).toContain(x.status);
    }
  });

  it('PATCHes subject, extensions, critical (must_support stored as critical); other fields 400', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: base() });
    const p = await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { subject: 'New', extensions: ['x'], must_support: ['y'] } });
    expect(p.status).toBe(200);
    expect(p.body.vcon).toMatchObject({ subject: 'New', extensions: ['x'], critical: ['y'] });
    expect(p.body.vcon.must_support).toBeUndefined();
    expect(p.body.vcon.updated_at).toBeTruthy();
    const bad = await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { subject: 'ok', parties: [] } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/subject, extensions and critical/);
    expect(bad.body.details[0].path).toBe('parties');
    const wrongType = await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { extensions: 'x' } });
    expect(wrongType.status).toBe(400);
    // Both names of one field: equal lists are one change, different ones would drop one unsaid.
    const both = await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { critical: ['a'], must_support: ['a'] } });
    expect(both.body.vcon.critical).toEqual(['a']);
    const conflict = await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { critical: ['b'], must_support: ['c'] } });
    expect(conflict.status).toBe(400);
    expect(conflict.body.details).toEqual([{ path: 'must_support', message: expect.stringContaining('critical') }]);
    expect((await s.api(`/vcons/${body.uuid}`)).body.vcon.critical).toEqual(['a']);
    expect((await s.api(`/vcons/${body.uuid}`)).body.vcon.subject).toBe('New');
    expect((await s.api(`/vcons/${randomUUID()}`, { method: 'PATCH', json: { subject: 'x' } })).status).toBe(404);
  });

  it('deletes with every derived row, and 404s the second time', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: base() });
    const d = await s.api(`/vcons/${body.uuid}`, { method: 'DELETE' });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ success: true, uuid: body.uuid, deleted: true });
    for (const table of ['vcon_parties', 'vcon_dialogs', 'vcon_analyses', 'vcon_attachments', 'vcon_tags', 'search_units']) {
      const [row] = await s.instance.sql<{ n: number }[]>`select count(*)::int as n from ${s.instance.sql(table)} where vcon_uuid = ${body.uuid}`;
      expect(row.n, table).toBe(0);
    }
    expect((await s.api(`/vcons/${body.uuid}`, { method: 'DELETE' })).status).toBe(404);
  });
  it('reads the first of a repeated query parameter and ignores parameters it does not name', async () => {
    for (let i = 0; i < 3; i++) expect((await s.api('/vcons', { method: 'POST', json: base() })).status).toBe(201);
    const first = await s.api('/vcons?limit=1&limit=3');
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(1);
    // A bracketed name is another parameter: the default limit holds, as it does for a cache-buster.
    const other = await s.api('/vcons?limit[]=1&_=12345');
    expect(other.status).toBe(200);
    expect(other.body.data.length).toBeGreaterThanOrEqual(3);
    // The first value is the one checked: a bad one is a 400 naming the parameter.
    const bad = await s.api('/vcons?limit=zero&limit=1');
    expect(bad.status).toBe(400);
    expect(bad.body.details?.[0]?.path ?? bad.body.message).toMatch(/limit/);
  });
});

describe('sub-resources', () => {
  it('appends dialog, analysis and attachments with their index; 400 invalid, 404 unknown', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: base() });
    const d = await s.api(`/vcons/${body.uuid}/dialog`, {
      method: 'POST',
      json: { type: 'text', parties: [1], body: 'It is late', encoding: 'none' },
    });
    expect(d.status).toBe(201);
    expect(d.body).toMatchObject({ success: true, uuid: body.uuid, index: 1, dialog: { type: 'text' } });
    const a = await s.api(`/vcons/${body.uuid}/analysis`, { method: 'POST', json: { type: 'topics', vendor: 'acme', body: 'shipping' } });
    expect(a.body).toMatchObject({ index: 2, analysis: { type: 'topics' } });
    const t = await s.api(`/vcons/${body.uuid}/attachments`, { method: 'POST', json: { purpose: 'receipt', body: 'r' } });
    expect(t.body).toMatchObject({ index: 2, attachment: { purpose: 'receipt' } });

    const badRef = await s.api(`/vcons/${body.uuid}/dialog`, { method: 'POST', json: { type: 'text', parties: [7] } });
    expect(badRef.status).toBe(400);
    expect(badRef.body.details[0]).toMatchObject({ path: 'parties' });
    const noVendor = await s.api(`/vcons/${body.uuid}/analysis`, { method: 'POST', json: { type: 'x', body: 'b' } });
    expect(noVendor.status).toBe(400);
    expect(noVendor.body.details.map((x: any) => x.path)).toContain('vendor');
    // A field present with the wrong type is not "required": the message says what it got.
    const wrongTypes = await s.api(`/vcons/${body.uuid}/analysis`, { method: 'POST', json: { type: 5, vendor: {} } });
    expect(wrongTypes.status).toBe(400);
    expect(wrongTypes.body.details).toEqual(
      expect.arrayContaining([
        { path: 'type', message: 'must be a string such as summary or transcript, not a number' },
        { path: 'vendor', message: 'must be a non-empty string, not an object' },
      ]),
    );
    const wrongUuid = await s.api('/vcons', { method: 'POST', json: { uuid: 5, parties: [3] } });
    expect(wrongUuid.body.details).toEqual(
      expect.arrayContaining([
        { path: 'uuid', message: 'must be a string, not a number' },
        { path: 'parties[0]', message: 'must be an object, not a number' },
      ]),
    );
    const objBody = await s.api(`/vcons/${body.uuid}/analysis`, { method: 'POST', json: { type: 'x', vendor: 'v', body: { a: 1 } } });
    expect(objBody.status).toBe(400);
    const sv = await s.api(`/vcons/${body.uuid}/analysis`, { method: 'POST', json: { type: 'x', vendor: 'v', schema_version: '1' } });
    expect(sv.body.message).toMatch(/use `schema`/);
    expect((await s.api(`/vcons/${randomUUID()}/dialog`, { method: 'POST', json: { type: 'text' } })).status).toBe(404);
    expect((await s.api(`/vcons/${randomUUID()}/analysis`)).status).toBe(404);

    const g = await s.api(`/vcons/${body.uuid}`);
    expect(g.body.vcon.dialog).toHaveLength(2);
    expect(g.body.vcon.analysis).toHaveLength(3);
    expect(g.body.vcon.attachments).toHaveLength(3);
  });

  it('filters analysis by type and attachments by purpose (legacy type fallback) and type', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: base() });
    const all = await s.api(`/vcons/${body.uuid}/analysis`);
    expect(all.body).toMatchObject({ success: true, uuid: body.uuid, count: 2 });
    const summary = await s.api(`/vcons/${body.uuid}/analysis?type=summary`);
    expect(summary.body.count).toBe(1);
    expect(summary.body.analysis[0].type).toBe('summary');
    const inv = await s.api(`/vcons/${body.uuid}/attachments?purpose=invoice`);
    expect(inv.body.attachments).toEqual([base().attachments[0]]);
    const legacyByPurpose = await s.api(`/vcons/${body.uuid}/attachments?purpose=legacy_note`);
    expect(legacyByPurpose.body.count).toBe(1);
    const legacyByType = await s.api(`/vcons/${body.uuid}/attachments?type=legacy_note`);
    expect(legacyByType.body.count).toBe(1);
    const both = await s.api(`/vcons/${body.uuid}/attachments?purpose=invoice&type=legacy_note`);
    expect(both.body.count).toBe(0);
  });

  it('keeps 20 concurrent appends to one vCon, each at the index its response named', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: { subject: 'concurrent' } });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        s.api(`/vcons/${body.uuid}/attachments`, { method: 'POST', json: { purpose: 'note', body: `note ${i}` } }),
      ),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const indexes = results.map((r) => r.body.index);
    expect(new Set(indexes).size).toBe(20);
    const g = await s.api(`/vcons/${body.uuid}`);
    expect(g.body.vcon.attachments).toHaveLength(20);
    for (const r of results) expect(g.body.vcon.attachments[r.body.index].body).toBe(r.body.attachment.body);
  });
});

describe('batch', () => {
  it('stores every valid item (201), reports mixed results in input order (207), and 400 when none', async () => {
    const uuid = randomUUID();
    const ok = await s.api('/vcons/batch', { method: 'POST', json: [{ uuid, subject: 'b1' }, { subject: 'b2' }] });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ success: true, total: 2, created: 2, updated: 0, failed: 0 });
    const mixed = await s.api('/vcons/batch', {
      method: 'POST',
      json: [{ uuid, subject: 'b1 again' }, { dialog: [{ type: 'video' }] }, { subject: 'b3' }, 'nope'],
    });
    expect(mixed.status).toBe(207);
    expect(mixed.body).toMatchObject({ success: false, total: 4, created: 1, updated: 1, failed: 2 });
    expect(mixed.body.results.map((r: any) => [r.index, r.status])).toEqual([
      [0, 200],
      [1, 400],
      [2, 201],
      [3, 400],
    ]);
    expect(mixed.body.results[1]).toMatchObject({ error: 'validation_failed', details: [{ path: 'dialog[0].type' }] });
    expect((await s.api(`/vcons/${uuid}`)).body.vcon.subject).toBe('b1 again');
    const none = await s.api('/vcons/batch', { method: 'POST', json: [{ uuid: 'bad' }] });
    expect(none.status).toBe(400);
    expect(none.body.failed).toBe(1);
  });

  it('replaces existing uuids and creates new ones in one batch, with the derived rows of what it stored', async () => {
    const [old, fresh] = [randomUUID(), randomUUID()];
    const tag = (v: string) => ({ purpose: 'tags', encoding: 'json', body: [`batchcase:${v}`] });
    const first = await s.api('/vcons/batch', {
      method: 'POST',
      json: [{ uuid: old, subject: 'before', parties: [{ name: 'Oldname Batchperson' }, { name: 'Other' }], attachments: [tag('before')] }],
    });
    expect(first.status).toBe(201);
    const r = await s.api('/vcons/batch', {
      method: 'POST',
      json: [
        { uuid: fresh, subject: 'new one', parties: [{ name: 'Freshname Batchperson' }] },
        { uuid: old, subject: 'after', parties: [{ name: 'Newname Batchperson' }], attachments: [tag('after')] },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ created: 1, updated: 1, failed: 0 });
    expect(r.body.results.map((x: any) => [x.uuid, x.status])).toEqual([
      [fresh, 201],
      [old, 200],
    ]);
    const replaced = (await s.api(`/vcons/${old}`)).body.vcon;
    const created = (await s.api(`/vcons/${fresh}`)).body.vcon;
    expect(Object.keys(replaced)).toEqual(['uuid', 'subject', 'parties', 'attachments', 'created_at', 'updated_at']);
    expect(Object.keys(created)).toEqual(['uuid', 'subject', 'parties', 'created_at']);
    const byParty = async (name: string) => (await s.api(`/vcons?party_name=${name}&format=ids_only`)).body.data;
    expect(await byParty('Oldname')).toEqual([]);
    expect(await byParty('Newname')).toEqual([old]);
    expect(await byParty('Freshname')).toEqual([fresh]);
    const meta = (await s.api(`/vcons?subject=after&format=metadata`)).body.data.find((m: any) => m.uuid === old);
    expect(meta).toMatchObject({ parties_count: 1, attachments_count: 1 });
    const tagged = async (v: string) => (await s.api(`/tags/search?tags=${encodeURIComponent(JSON.stringify({ batchcase: v }))}`)).body.uuids;
    expect(await tagged('before')).toEqual([]);
    expect(await tagged('after')).toEqual([old]);
  });

  it('rejects a non-array, an empty batch and more than 100 items', async () => {
    const notArray = await s.api('/vcons/batch', { method: 'POST', json: { subject: 'x' } });
    expect(notArray.status).toBe(400);
    expect(notArray.body).toMatchObject({ error: 'validation_failed', details: [{ path: '(root)', message: 'must be an array' }] });
    const empty = await s.api('/vcons/batch', { method: 'POST', json: [] });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ error: 'batch_empty', message: 'The batch is empty: send 1 to 100 vCons' });
    const big = await s.api('/vcons/batch', { method: 'POST', json: Array.from({ length: 101 }, () => ({})) });
    expect(big.status).toBe(400);
    expect(big.body).toMatchObject({ error: 'batch_too_large', message: 'The batch has 101 items; at most 100 are allowed' });
  });

  it('writes a uuid repeated within one batch in input order, the last replacing the earlier', async () => {
    const uuid = randomUUID();
    const existing = randomUUID();
    expect((await s.api('/vcons', { method: 'POST', json: { uuid: existing, subject: 'before' } })).status).toBe(201);
    const party = (name: string) => [{ name }];
    // Past the first insert chunk (32), so that repeats come from every part of the batch.
    const fillers = Array.from({ length: 40 }, (_, i) => ({ uuid: randomUUID(), subject: `filler ${i}` }));
    const json = [
      { uuid, subject: 'one', parties: party('Alice Repeat') },
      { uuid: existing, subject: 'existing one' },
      ...fillers,
      { uuid, subject: 'two', parties: party('Bob Repeat') },
      { uuid, dialog: [{ type: 'video' }] },
      { uuid: existing, subject: 'existing two' },
      { uuid, subject: 'three', parties: party('Carol Repeat') },
    ];
    const r = await s.api('/vcons/batch', { method: 'POST', json });
    expect(r.status).toBe(207);
    expect(r.body).toMatchObject({ total: 46, created: 41, updated: 4, failed: 1 });
    const statuses = r.body.results.map((x: { status: number }) => x.status);
    expect(statuses.slice(0, 2)).toEqual([201, 200]);
    expect(statuses.slice(42)).toEqual([200, 400, 200, 200]);
    expect(r.body.results[43]).toMatchObject({ index: 43, uuid, status: 400, error: 'validation_failed' });
    expect((await s.api(`/vcons/${uuid}`)).body.vcon.subject).toBe('three');
    expect((await s.api(`/vcons/${existing}`)).body.vcon.subject).toBe('existing two');
    // The derived rows are the last item's: list filters see Carol only.
    const byParty = async (name: string) => (await s.api(`/vcons?party_name=${encodeURIComponent(name)}&format=ids_only`)).body.data as string[];
    expect(await byParty('Carol Repeat')).toEqual([uuid]);
    expect(await byParty('Alice Repeat')).toEqual([]);
    expect(await byParty('Bob Repeat')).toEqual([]);
    // A whole batch of one uuid: the first creates it, every other replaces it, the last is stored.
    const one = randomUUID();
    const all = await s.api('/vcons/batch', {
      method: 'POST',
      json: Array.from({ length: 100 }, (_, i) => ({ uuid: one, subject: `version ${i}` })),
    });
    expect(all.status).toBe(201);
    expect(all.body).toMatchObject({ total: 100, created: 1, updated: 99, failed: 0 });
    expect((await s.api(`/vcons/${one}`)).body.vcon.subject).toBe('version 99');
  });
});

describe('schema and examples', () => {
  it('serves the JSON Schema without a key', async () => {
    const r = await fetch(`${s.base}/schema`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/application\/schema\+json/);
    const schema = (await r.json()) as any;
    expect(schema.$schema).toMatch(/2020-12/);
    expect(schema.properties.dialog.items.properties.type.enum).toEqual(['recording', 'recording-set', 'text', 'transfer', 'incomplete']);
  });

  it.each(['minimal', 'phone_call', 'chat', 'email', 'video', 'full_featured'])('serves example %s, which the service accepts', async (type) => {
    const r = await s.api(`/examples/${type}`, { key: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, type });
    const c = await s.api('/vcons', { method: 'POST', json: r.body.vcon });
    expect([200, 201]).toContain(c.status);
  });

  it('404s an unknown example type, listing the known ones', async () => {
    const r = await s.api('/examples/fax', { key: null });
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('example_not_found');
    expect(r.body.message).toMatch(/phone_call/);
  });
});
