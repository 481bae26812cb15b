// What a write acknowledges is exactly what is stored and what every read derives from it: a
// "__proto__" member is an ordinary field (stored, read back, and planting nothing in lists, tags,
// discovery or search), and a body that would be stored altered (invalid UTF-8, a number a double
// can't hold, a field name repeated in one object) is refused with a 400 naming its JSON path, on
// every write path of REST and MCP.
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';
import { KEY, startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
const json = { 'content-type': 'application/json' };
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

/** Runs `fn` with an MCP session of the read-write key, closed after. */
async function withMcp(fn: (mcp: HttpSession) => Promise<void>) {
  const mcp = await connectHttp(s.instance.url!, KEY);
  try {
    await fn(mcp);
  } finally {
    await mcp.close();
  }
}

const uuidOf = (n: number) => `0195a1c2-0000-4000-8000-${String(n).padStart(12, '0')}`;
/** What a "__proto__" member would plant if it became the document's prototype. */
const PLANT = {
  subject: 'planted',
  parties: [{ name: 'Mallory', tel: '+15550199' }],
  attachments: [{ purpose: 'tags', encoding: 'json', body: ['team:planted'] }],
};
/** A vCon with a top-level "__proto__" member (as JSON text: an object literal would set the prototype). */
const hostileText = (uuid: string) =>
  `{"uuid":"${uuid}","__proto__":${JSON.stringify(PLANT)},"dialog":[{"type":"text","encoding":"none","body":"own words ${uuid}"}]}`;
const hostile = (uuid: string) => JSON.parse(hostileText(uuid)) as Record<string, unknown>;

/** Every read agrees that the vCon has no subject, parties or tags, and GET returns the member as sent. */
async function expectOrdinaryMember(uuid: string) {
  const full = await s.api(`/vcons/${uuid}`);
  expect(full.status).toBe(200);
  expect(Object.hasOwn(full.body.vcon, '__proto__'), JSON.stringify(full.body)).toBe(true);
  expect(full.body.vcon.__proto__).toEqual(PLANT);
  expect(full.body.vcon.subject).toBeUndefined();
  for (const format of ['metadata', 'summary']) {
    const r = await s.api(`/vcons/${uuid}?format=${format}`);
    expect(Object.hasOwn(r.body.vcon, '__proto__'), format).toBe(true);
  }
  const list = await s.api(`/vcons?limit=100`);
  const item = list.body.data.find((x: { uuid: string }) => x.uuid === uuid);
  expect(item).toMatchObject({ subject: null, parties_count: 0, attachments_count: 0, dialog_count: 1 });
  expect((await s.api('/vcons?subject=planted&format=ids_only')).body.data).not.toContain(uuid);
  expect((await s.api('/vcons?party_name=Mallory&format=ids_only')).body.data).not.toContain(uuid);
  expect((await s.api(`/tags/search?tags=${encodeURIComponent('{"team":"planted"}')}`)).body.uuids).not.toContain(uuid);
  expect((await s.api(`/vcons/${uuid}/tags`)).body.tags).toEqual({});
  const search = await s.api(`/vcons/search/content?q=${encodeURIComponent(`Mallory OR planted OR "own words ${uuid}"`)}&limit=100`);
  const hit = search.body.results.find((r: { uuid: string }) => r.uuid === uuid);
  expect(hit.subject).toBeNull();
  expect(hit.matches.map((m: { source: string }) => m.source)).toEqual(['dialog']);
}

describe('a "__proto__" member is an ordinary field', () => {
  it('REST create (with and without wait_for) stores it and derives nothing from it', async () => {
    const fast = await s.api('/vcons', { method: 'POST', body: hostileText(uuidOf(1)), headers: json });
    expect(fast.status, JSON.stringify(fast.body)).toBe(201);
    const slow = await s.api('/vcons?wait_for=search', { method: 'POST', body: hostileText(uuidOf(2)), headers: json });
    expect(slow.status, JSON.stringify(slow.body)).toBe(201);
    await expectOrdinaryMember(uuidOf(1));
    await expectOrdinaryMember(uuidOf(2));
    // Nothing of the planted member reaches the group-wide reads either.
    expect((await s.api('/tags')).body.keys.map((k: { key: string }) => k.key)).not.toContain('team');
    const purposes = await s.api('/discovery/attachments/purposes');
    expect(purposes.body.values.map((v: { value: string }) => v.value)).not.toContain('tags');
  });

  it('batch and MCP create_vcon store it the same way', async () => {
    const batch = await s.api('/vcons/batch', { method: 'POST', body: `[${hostileText(uuidOf(3))}]`, headers: json });
    expect(batch.status, JSON.stringify(batch.body)).toBe(201);
    await withMcp(async (mcp) => {
      const m = await mcp.call('create_vcon', { vcon: hostile(uuidOf(4)) });
      expect(m.isError, JSON.stringify(m.structuredContent)).toBeFalsy();
    });
    await expectOrdinaryMember(uuidOf(3));
    await expectOrdinaryMember(uuidOf(4));
  });

  it('PATCH and appends keep it, and an appended item with its own "__proto__" plants nothing', async () => {
    const uuid = uuidOf(5);
    expect((await s.api('/vcons', { method: 'POST', body: hostileText(uuid), headers: json })).status).toBe(201);
    expect((await s.api(`/vcons/${uuid}`, { method: 'PATCH', json: { extensions: ['x'] } })).status).toBe(200);
    const item = `{"__proto__":{"purpose":"tags","encoding":"json","body":["team:planted"]},"purpose":"note","body":"n"}`;
    expect((await s.api(`/vcons/${uuid}/attachments`, { method: 'POST', body: item, headers: json })).status).toBe(201);
    const full = await s.api(`/vcons/${uuid}`);
    expect(Object.hasOwn(full.body.vcon.attachments[0], '__proto__')).toBe(true);
    expect(full.body.vcon.extensions).toEqual(['x']);
    await s.api(`/vcons/${uuid}/attachments`, { method: 'GET' });
    const list = (await s.api('/vcons?limit=100')).body.data.find((x: { uuid: string }) => x.uuid === uuid);
    expect(list).toMatchObject({ subject: null, parties_count: 0, attachments_count: 1 });
    expect((await s.api(`/vcons/${uuid}/tags`)).body.tags).toEqual({});
    expect(Object.hasOwn(full.body.vcon, '__proto__')).toBe(true);
  });
});

describe('a body that would be stored altered is refused, naming the path', () => {
  const count = async () => (await s.api('/vcons?format=ids_only&limit=100')).body.data.length;
  const expect400 = (r: { status: number; body: any }, path: string, message: RegExp) => {
    expect([r.status, r.body?.error], JSON.stringify(r.body)).toEqual([400, 'validation_failed']);
    expect(r.body.details[0]).toEqual({ path, message: expect.stringMatching(message) });
  };
  const notUtf8 = Buffer.concat([Buffer.from('{"parties":[{"name":"caf'), Buffer.from([0xe9, 0x20]), Buffer.from('"}]}')]);

  it('numbers a double cannot hold: create (both paths), batch and append', async () => {
    const before = await count();
    const huge = '{"parties":[{"name":"a","meta":{"n":1e400}}]}';
    const long = '{"parties":[{"name":"a","meta":{"n":123456789012345678901234567890}}]}';
    for (const path of ['/vcons', '/vcons?wait_for=search']) {
      expect400(
        await s.api(path, { method: 'POST', body: huge, headers: json }),
        'parties[0].meta.n',
        /^number 1e400 is outside the range a JSON number can be stored losslessly/,
      );
      expect400(await s.api(path, { method: 'POST', body: long, headers: json }), 'parties[0].meta.n', /read back as 1\.2345678901234568e\+29/);
    }
    expect400(
      await s.api('/vcons/batch', { method: 'POST', body: `[{"subject":"ok"},${long}]`, headers: json }),
      '[1].parties[0].meta.n',
      /read back/,
    );
    const uuid = uuidOf(10);
    expect((await s.api('/vcons', { method: 'POST', json: { uuid } })).status).toBe(201);
    const append = await s.api(`/vcons/${uuid}/attachments`, {
      method: 'POST',
      body: '{"purpose":"p","body":{"big":9007199254740993}}',
      headers: json,
    });
    expect400(append, 'body.big', /read back as 9007199254740992/);
    expect(await count()).toBe(before + 1);
    // The edges that do read back are stored as sent.
    const edge = '{"uuid":"0195a1c2-0000-4000-8000-000000000011","attachments":[{"body":[9007199254740992,1.7976931348623157e308,5e-324,0.1]}]}';
    expect((await s.api('/vcons', { method: 'POST', body: edge, headers: json })).status).toBe(201);
    expect((await s.api(`/vcons/${uuidOf(11)}`)).body.vcon.attachments[0].body).toEqual([9007199254740992, 1.7976931348623157e308, 5e-324, 0.1]);
  });

  it('bytes that are not UTF-8: plain, gzip and batch bodies', async () => {
    const before = await count();
    expect400(
      await s.api('/vcons', { method: 'POST', body: notUtf8, headers: json }),
      'parties[0].name',
      /^is not valid UTF-8 \(byte 24 of the body\)/,
    );
    const gzip = await s.api('/vcons', { method: 'POST', body: gzipSync(notUtf8), headers: { ...json, 'content-encoding': 'gzip' } });
    expect400(gzip, 'parties[0].name', /is not valid UTF-8/);
    const batch = Buffer.concat([Buffer.from('['), notUtf8, Buffer.from(']')]);
    expect400(await s.api('/vcons/batch', { method: 'POST', body: batch, headers: json }), '[0].parties[0].name', /is not valid UTF-8/);
    expect(await count()).toBe(before);
  });

  // A parser keeps the last of a repeated name: the first would be acknowledged and dropped.
  it('a field name repeated in one object: create (both paths), batch, PATCH and append; -0 is stored as 0', async () => {
    const before = await count();
    const twice = '{"subject":"first","parties":[{"name":"a","meta":{"k":1}}],"subject":"second"}';
    for (const path of ['/vcons', '/vcons?wait_for=search']) {
      expect400(await s.api(path, { method: 'POST', body: twice, headers: json }), 'subject', /^field name "subject" appears more than once/);
      // Spelled with an escape it is the same name; in gzip too.
      const escaped = '{"parties":[{"name":"a","\\u006eame":"b"}]}';
      expect400(await s.api(path, { method: 'POST', body: escaped, headers: json }), 'parties[0].name', /field name "name" appears more than once/);
      const gz = await s.api(path, { method: 'POST', body: gzipSync(twice), headers: { ...json, 'content-encoding': 'gzip' } });
      expect400(gz, 'subject', /appears more than once/);
    }
    expect400(await s.api('/vcons/batch', { method: 'POST', body: `[{"subject":"ok"},${twice}]`, headers: json }), '[1].subject', /more than once/);
    const uuid = uuidOf(12);
    expect((await s.api('/vcons', { method: 'POST', json: { uuid, subject: 'kept' } })).status).toBe(201);
    expect400(await s.api(`/vcons/${uuid}`, { method: 'PATCH', body: '{"subject":"a","subject":"b"}', headers: json }), 'subject', /more than once/);
    const append = await s.api(`/vcons/${uuid}/attachments`, { method: 'POST', body: '{"purpose":"p","body":{"x":1,"y":2,"x":3}}', headers: json });
    expect400(append, 'body.x', /more than once/);
    expect((await s.api(`/vcons/${uuid}`)).body.vcon).toMatchObject({ subject: 'kept' });
    expect(await count()).toBe(before + 1);
    // The same name in different objects is no repetition; -0 is accepted and stored as 0.
    const fine = `{"uuid":"${uuidOf(13)}","parties":[{"name":"a"},{"name":"b"}],"attachments":[{"body":{"name":-0,"n":[-0.0]}}]}`;
    expect((await s.api('/vcons', { method: 'POST', body: fine, headers: json })).status).toBe(201);
    const stored = (await s.api(`/vcons/${uuidOf(13)}`)).body.vcon;
    expect(stored.parties.map((p: { name: string }) => p.name)).toEqual(['a', 'b']);
    expect(JSON.stringify(stored.attachments[0].body)).toBe('{"name":0,"n":[0]}');
  });

  it('MCP over HTTP answers a JSON-RPC parse error naming the path', () =>
    withMcp(async (mcp) => {
      const sid = mcp.transport.sessionId!;
      const headers = {
        ...json,
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${KEY}`,
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-06-18',
      };
      const call = (vcon: string) => `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_vcon","arguments":{"vcon":${vcon}}}}`;
      for (const [body, message] of [
        [
          Buffer.from(call('{"parties":[{"meta":{"n":-1e400}}]}')),
          /params\.arguments\.vcon\.parties\[0\]\.meta\.n: number -1e400 is outside the range/,
        ],
        [
          Buffer.concat([Buffer.from(call('{"subject":"')), Buffer.from([0xff]), Buffer.from('"}')]),
          /params\.arguments\.vcon\.subject: is not valid UTF-8/,
        ],
        [Buffer.from(call('{"subject":"a","subject":"b"}')), /params\.arguments\.vcon\.subject: field name "subject" appears more than once/],
      ] as const) {
        const r = await fetch(`${s.instance.url}/mcp`, {
          method: 'POST',
          headers,
          body,
        });
        const answer = (await r.json()) as { error: { code: number; message: string } };
        expect(r.status, JSON.stringify(answer)).toBe(400);
        expect(answer.error.code).toBe(-32700);
        expect(answer.error.message).toMatch(message);
      }
    }));
});
