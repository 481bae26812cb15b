import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBuildInfo } from '../../src/version.js';
import { TOOLS } from '../../src/mcp/tools.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { connectHttp, PLUGIN_PATH, textOf, type HttpSession } from './helpers.js';

type HookCall = { name: string; transport?: string; scope?: string; keyId: string | null };
/** The digest id the key resolver gives a key (src/transport/auth.ts). */
const keyIdOf = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 16);
const hookCalls = () => ((globalThis as any).__mcpHookCalls ??= []) as HookCall[];

const READ_TOOLS = TOOLS.filter((t) => t.scope === 'read')
  .map((t) => t.name)
  .sort();
const ALL_TOOLS = TOOLS.map((t) => t.name).sort();

let s: TestServer;
let rw: HttpSession;
let ro: HttpSession;

beforeAll(async () => {
  s = await startTestServer({ VCON_PLUGINS_PATH: PLUGIN_PATH });
  [rw, ro] = await Promise.all([connectHttp(s.instance.url!, KEY), connectHttp(s.instance.url!, RO_KEY)]);
});
afterAll(async () => {
  await Promise.all([rw?.close(), ro?.close()]);
  await s?.close();
});

const sample = (subject: string) => ({
  vcon: '0.3.0',
  subject,
  parties: [
    { name: 'Alice Caller', tel: '+15550001111' },
    { name: 'Bob Agent', mailto: 'bob@example.com' },
  ],
  dialog: [{ type: 'text', start: '2025-01-02T10:00:00Z', parties: [0, 1], body: 'I would like a refund for my broken kettle', encoding: 'none' }],
});

/** POSTs a raw JSON-RPC message to /mcp. */
async function rawPost(headers: Record<string, string>, body: unknown) {
  const res = await fetch(`${s.instance.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, headers: res.headers, body: json };
}

describe('MCP over Streamable HTTP', () => {
  it('advertises the package version and offers tools by scope', async () => {
    expect(rw.client.getServerVersion()).toMatchObject({ name: 'vcon-launch', version: getBuildInfo().version });
    const write = (await rw.client.listTools()).tools;
    const read = (await ro.client.listTools()).tools;
    expect(
      write
        .map((t) => t.name)
        .filter((n) => n !== 'plugin_whoami')
        .sort(),
    ).toEqual(ALL_TOOLS);
    expect(write.map((t) => t.name)).toContain('plugin_whoami');
    expect(read.map((t) => t.name).sort()).toEqual(READ_TOOLS);
    expect(read.map((t) => t.name)).not.toContain('plugin_whoami');
    expect(read.map((t) => t.name)).not.toContain('create_vcon');
    // The plugin's attempt to take a core name is ignored: get_vcon is the core tool.
    expect(write.filter((t) => t.name === 'get_vcon')).toHaveLength(1);
    const create = write.find((t) => t.name === 'create_vcon')!;
    expect(create.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(create.inputSchema.required).toEqual(['vcon']);
    // The input schema is the domain schema's JSON Schema (dialog types from src/domain/vcon.ts).
    expect(JSON.stringify(create.inputSchema)).toContain('recording-set');
    const del = write.find((t) => t.name === 'delete_vcon')!;
    expect(del.annotations).toMatchObject({ destructiveHint: true });
    for (const t of read) expect(t.annotations?.readOnlyHint, t.name).toBe(true);
    for (const t of write) expect(t.description?.length ?? 0, t.name).toBeGreaterThan(40);
  });

  it('calls every tool once on real data', async () => {
    const timings: number[] = [];
    const ok = async (name: string, args: Record<string, unknown> = {}) => {
      const t0 = performance.now();
      const r = await rw.call(name, args);
      timings.push(performance.now() - t0);
      expect(r.isError, `${name}: ${textOf(r)}`).toBeFalsy();
      expect(JSON.parse(textOf(r))).toEqual(r.structuredContent);
      return r.structuredContent;
    };
    const called = new Set<string>();
    const tool = async (name: string, args: Record<string, unknown> = {}) => {
      called.add(name);
      return ok(name, args);
    };

    // wait_for: the searches below find it however long indexing takes on a loaded machine (a
    // search's own catch-up is bounded); the later writes leave its index rows until re-indexed.
    const created = await tool('create_vcon', { vcon: sample('Kettle refund request'), wait_for: 'search' });
    expect(created).toMatchObject({ created: true });
    const uuid = created.uuid as string;
    expect((await tool('get_vcon', { uuid })).vcon.subject).toBe('Kettle refund request');
    expect((await tool('get_vcon', { uuid, format: 'metadata' })).vcon.dialog).toBeUndefined();
    expect((await tool('list_vcons', { limit: 5 })).data.map((v: any) => v.uuid)).toContain(uuid);
    expect(await tool('list_changes', { limit: 5, kinds: 'created' })).toMatchObject({
      data: expect.any(Array),
      next_cursor: expect.stringMatching(/^\d+$/),
    });
    expect((await tool('search_vcons', { subject: 'kettle', party_name: 'alice' })).data.map((v: any) => v.uuid)).toEqual([uuid]);
    expect((await tool('update_vcon', { uuid, updates: { subject: 'Kettle refund (updated)' } })).vcon.subject).toBe('Kettle refund (updated)');
    expect(await tool('add_dialog', { uuid, dialog: { type: 'text', parties: [1], body: 'Refund approved', encoding: 'none' } })).toMatchObject({
      index: 1,
    });
    expect(await tool('add_analysis', { uuid, analysis: { type: 'summary', vendor: 'tests', body: 'Customer asked for a refund' } })).toMatchObject({
      index: 0,
    });
    expect(await tool('add_attachment', { uuid, attachment: { purpose: 'invoice', encoding: 'none', body: 'INV-1' } })).toMatchObject({ index: 0 });
    expect((await tool('get_analysis', { uuid, type: 'summary' })).count).toBe(1);
    expect((await tool('get_attachments', { uuid, purpose: 'invoice' })).attachments[0].body).toBe('INV-1');
    expect((await tool('discover_attachment_purposes')).values).toContainEqual({ value: 'invoice', count: 1 });
    expect(await tool('discover_attachment_types', { include_counts: false })).toMatchObject({ count: 0 });
    expect((await tool('discover_analysis_types', { min_count: 1 })).values).toContainEqual({ value: 'summary', count: 1 });
    expect(await tool('manage_tag', { uuid, action: 'set', key: 'status', value: 'open' })).toMatchObject({ key: 'status', value: 'open' });
    await tool('manage_tag', { uuid, action: 'set', key: 'priority', value: 2 });
    expect((await tool('get_tags', { uuid })).tags).toEqual({ status: 'open', priority: '2' });
    expect(await tool('get_tags', { uuid, key: 'status' })).toMatchObject({ value: 'open' });
    expect((await tool('get_unique_tags')).keys.map((k: any) => k.key).sort()).toEqual(['priority', 'status']);
    expect((await tool('search_by_tags', { tags: { status: 'open' } })).uuids).toEqual([uuid]);
    expect((await tool('search_vcons', { tags: { status: 'open' } })).data.map((v: any) => v.uuid)).toEqual([uuid]);
    expect((await tool('search_vcons_content', { q: 'refund' })).results[0].uuid).toBe(uuid);
    expect((await tool('search_vcons_semantic', { q: 'reimbursement for a kettle', threshold: 0 })).results.map((r: any) => r.uuid)).toContain(uuid);
    expect((await tool('search_vcons_hybrid', { q: 'refund kettle' })).results[0].uuid).toBe(uuid);
    expect((await tool('get_database_shape')).data).toBeTypeOf('object');
    expect((await tool('get_database_stats')).data).toBeTypeOf('object');
    expect((await tool('get_database_size')).data).toBeTypeOf('object');
    expect((await tool('get_database_health')).data).toBeTypeOf('object');
    expect((await tool('analyze_query', { query: 'select uuid from vcons limit 1' })).data.plan).toBeDefined();
    expect((await tool('get_analytics', { granularity: 'day', months_back: 1 })).data).toBeTypeOf('object');
    expect((await tool('get_growth_analytics', { granularity: 'week' })).data).toBeTypeOf('object');
    expect((await tool('get_content_analytics')).data).toBeTypeOf('object');
    expect((await tool('get_tag_analytics', { limit: 5 })).data).toBeTypeOf('object');
    expect((await tool('get_attachment_analytics')).data).toBeTypeOf('object');
    expect((await tool('get_schema')).title).toBe('vCon');
    expect((await tool('get_examples', { type: 'phone_call' })).vcon.subject).toBe('Billing question');
    expect(await tool('get_version')).toMatchObject({ version: getBuildInfo().version, api_base_path: '/api/v1' });
    expect(await tool('get_health')).toMatchObject({ status: 'healthy', schema: s.schema });
    expect(await tool('manage_tag', { uuid, action: 'remove', key: 'priority' })).toMatchObject({ action: 'remove' });
    expect(await tool('remove_all_tags', { uuid })).toMatchObject({ removed_all: true });
    expect((await ok('get_tags', { uuid })).tags).toEqual({});
    expect(await tool('delete_vcon', { uuid })).toMatchObject({ uuid, deleted: true });

    expect([...called].sort()).toEqual(ALL_TOOLS);
    const sorted = [...timings].sort((a, b) => a - b);
    // Reported figure: median and worst tool call latency over HTTP on this machine.
    console.info(`MCP HTTP tool calls: n=${timings.length} median=${sorted[sorted.length >> 1].toFixed(1)}ms max=${sorted.at(-1)!.toFixed(1)}ms`);
  });

  it('reads vcon://v1/ resources through the services', async () => {
    const { structuredContent: c } = await rw.call('create_vcon', {
      vcon: { ...sample('Resource read'), analysis: [{ type: 'summary', vendor: 't', body: 'x' }], attachments: [{ purpose: 'note', body: 'n' }] },
    });
    await rw.call('manage_tag', { uuid: c.uuid, action: 'set', key: 'team', value: 'red' });
    const read = async (uri: string) => {
      const r = await ro.client.readResource({ uri });
      expect(r.contents[0]).toMatchObject({ uri, mimeType: 'application/json' });
      return JSON.parse((r.contents[0] as { text: string }).text);
    };
    expect((await read(`vcon://v1/vcons/${c.uuid}`)).subject).toBe('Resource read');
    expect(await read(`vcon://v1/vcons/${c.uuid}/dialog`)).toHaveLength(1);
    expect((await read(`vcon://v1/vcons/${c.uuid}/analysis`))[0].type).toBe('summary');
    expect((await read(`vcon://v1/vcons/${c.uuid}/attachments`)).map((a: any) => a.purpose)).toEqual(['note', 'tags']);
    expect(await read(`vcon://v1/vcons/${c.uuid}/tags`)).toEqual({ team: 'red' });
    expect((await read('vcon://v1/vcons/recent')).data.map((v: any) => v.uuid)).toContain(c.uuid);
    expect((await read('vcon://v1/discovery/attachments/purposes')).values.map((v: any) => v.value)).toContain('note');
    expect((await read('vcon://v1/discovery/attachments/types')).values).toBeInstanceOf(Array);
    expect((await read('vcon://v1/discovery/analysis/types')).values.map((v: any) => v.value)).toContain('summary');
    expect((await read('vcon://v1/tags')).keys.map((k: any) => k.key)).toContain('team');

    const templates = (await ro.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    expect(templates).toEqual(expect.arrayContaining(['vcon://v1/vcons/{uuid}', 'vcon://v1/vcons/{uuid}/dialog', 'vcon://v1/vcons/{uuid}/tags']));
    const listed = (await ro.client.listResources()).resources.map((r) => r.uri);
    expect(listed).toEqual(expect.arrayContaining(['vcon://v1/vcons/recent', `vcon://v1/vcons/${c.uuid}`]));

    const missing = ro.client.readResource({ uri: 'vcon://v1/vcons/00000000-0000-4000-8000-00000000abcd' });
    await expect(missing).rejects.toMatchObject({ code: -32002, data: { error: 'vcon_not_found' } });
    await expect(missing).rejects.toThrow(/vcon_not_found: vCon 00000000-0000-4000-8000-00000000abcd not found/);
  });

  it('refuses writes to a read-only session: write tools are absent and a forced call fails', async () => {
    const r = await ro.call('create_vcon', { vcon: sample('should not exist') });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toMatch(/create_vcon not found/);
    const forced = await ro.call('plugin_whoami', {});
    expect(forced.isError).toBe(true);
    const list = await ro.call('list_vcons', { limit: 100, format: 'full' });
    expect(list.structuredContent.data.map((v: any) => v.subject)).not.toContain('should not exist');
    expect((await ro.call('get_unique_tags')).isError).toBeFalsy();
  });

  it('returns failures as isError results with the REST error codes', async () => {
    const missing = await rw.call('get_vcon', { uuid: '00000000-0000-4000-8000-0000000000aa' });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toBe('vcon_not_found: vCon 00000000-0000-4000-8000-0000000000aa not found');
    expect(missing.structuredContent).toEqual({ error: 'vcon_not_found', message: 'vCon 00000000-0000-4000-8000-0000000000aa not found' });

    const badUuid = await rw.call('get_vcon', { uuid: 'not-a-uuid' });
    expect(badUuid.structuredContent).toMatchObject({ error: 'invalid_parameter', details: [{ path: 'uuid' }] });

    const { structuredContent: c } = await rw.call('create_vcon', { vcon: sample('errors') });
    const badDialog = await rw.call('add_dialog', { uuid: c.uuid, dialog: { type: 'fax' } });
    expect(badDialog.isError).toBe(true);
    expect(badDialog.structuredContent).toMatchObject({ error: 'validation_failed', details: [{ path: 'type' }] });
    expect(textOf(badDialog)).toMatch(/^validation_failed: Invalid dialog: type: must be one of recording/);

    const badVcon = await rw.call('create_vcon', { vcon: { dialog: [{ type: 'text', parties: [5] }] } });
    expect(badVcon.structuredContent).toMatchObject({ error: 'validation_failed', details: [{ path: 'dialog[0].parties' }] });
    const noVcon = await rw.call('create_vcon', {});
    expect(noVcon.structuredContent).toMatchObject({ error: 'validation_failed', details: [{ path: 'vcon' }] });
    // A missing document argument is named, not reported as "(root)" of a document nobody sent.
    for (const [tool, arg] of [
      ['update_vcon', 'updates'],
      ['add_dialog', 'dialog'],
      ['add_analysis', 'analysis'],
      ['add_attachment', 'attachment'],
    ]) {
      const r = await rw.call(tool, { uuid: c.uuid });
      expect(r.structuredContent, tool).toEqual({
        error: 'validation_failed',
        message: expect.stringMatching(new RegExp(`^${arg}: is required`)),
        details: [{ path: arg, message: expect.stringMatching(/^is required/) }],
      });
    }
    const noTag = await rw.call('get_tags', { uuid: c.uuid, key: 'absent' });
    expect(noTag.structuredContent).toMatchObject({ error: 'tag_not_found' });
    const badLimit = await rw.call('list_vcons', { limit: 'lots' });
    expect(badLimit.structuredContent).toMatchObject({ error: 'invalid_parameter', details: [{ path: 'limit' }] });
    const badPatch = await rw.call('update_vcon', { uuid: c.uuid, updates: { dialog: [] } });
    expect(badPatch.structuredContent).toMatchObject({ error: 'validation_failed' });
    const badAction = await rw.call('manage_tag', { uuid: c.uuid, action: 'toggle', key: 'k' });
    expect(badAction.structuredContent).toMatchObject({ error: 'invalid_parameter', details: [{ path: 'action' }] });
    const badQuery = await rw.call('analyze_query', { query: 'delete from vcons' });
    expect(badQuery.structuredContent).toMatchObject({ error: 'validation_failed' });
    const badExample = await rw.call('get_examples', { type: 'nope' });
    expect(badExample.structuredContent).toMatchObject({ error: 'example_not_found' });
    const badPluginArgs = await rw.call('plugin_whoami', { note: 'x'.repeat(50) });
    expect(badPluginArgs.structuredContent).toMatchObject({ error: 'validation_failed', details: [{ path: 'note' }] });
  });

  it('runs plugin hooks on tool calls with the session context, and plugin tools with it too', async () => {
    hookCalls().length = 0;
    const { structuredContent: c } = await rw.call('create_vcon', { vcon: sample('SECRET-SUBJECT') });
    expect(hookCalls().filter((h) => h.name === 'beforeCreate')).toEqual([
      { name: 'beforeCreate', transport: 'mcp', scope: 'write', keyId: keyIdOf(KEY) },
    ]);
    // afterRead redacts on every read path of the read-only session too.
    expect((await ro.call('get_vcon', { uuid: c.uuid })).structuredContent.vcon.subject).toBe('[redacted by mcp-plugin]');
    const res = await ro.client.readResource({ uri: `vcon://v1/vcons/${c.uuid}` });
    expect(JSON.parse((res.contents[0] as { text: string }).text).subject).toBe('[redacted by mcp-plugin]');
    expect(hookCalls()).toContainEqual({ name: 'afterRead', transport: 'mcp', scope: 'read', keyId: keyIdOf(RO_KEY) });
    hookCalls().length = 0;
    await ro.call('search_vcons', { subject: 'secret' });
    expect(hookCalls().map((h) => h.name)).toEqual(['beforeSearch', 'afterSearch']);

    const veto = await rw.call('create_vcon', { vcon: sample('veto me') });
    expect(veto.isError).toBe(true);
    expect(textOf(veto)).toMatch(/^forbidden: mcp-plugin: subject "veto me" is refused/);

    const who = await rw.call('plugin_whoami', { note: 'hi' });
    expect(who.structuredContent).toEqual({ note: 'hi', transport: 'mcp', scope: 'write', keyId: keyIdOf(KEY) });
  });
});

describe('MCP HTTP sessions', () => {
  it('authenticates like REST, in the REST error format: a missing key is 401 with a Bearer challenge, an invalid key 403 without one', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    const none = await rawPost({}, init);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(none.body).toMatchObject({ success: false, error: 'unauthorized', message: 'API key missing' });
    const bad = await rawPost({ authorization: 'Bearer nope' }, init);
    expect(bad.status).toBe(403);
    expect(bad.headers.get('www-authenticate')).toBeNull();
    expect(bad.body).toMatchObject({ error: 'unauthorized', message: 'API key invalid' });
    // The SDK's client shows the key problem, not an OAuth failure.
    await expect(connectHttp(s.instance.url!, 'nope')).rejects.toThrow(/API key invalid/);
    const noSession = await rawPost({ authorization: `Bearer ${KEY}` }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
    expect(noSession.status).toBe(400);
    const unknown = await rawPost(
      { authorization: `Bearer ${KEY}`, 'mcp-session-id': 'no-such-session' },
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
    );
    expect(unknown.status).toBe(404);
  });

  it('answers a body only a broken JSON-RPC client would send in JSON-RPC, as the SDK transport does', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    const notJson = await rawPost(auth, '{"jsonrpc": "2.0", "id": 1, "method": ');
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    // An initialize sent as text/plain: a 415 that says so, not "no Mcp-Session-Id".
    const plain = await rawPost({ ...auth, 'content-type': 'text/plain' }, init);
    expect(plain.status).toBe(415);
    expect(plain.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });
    expect(plain.body.error.message).toMatch(/Content-Type must be application\/json/);
    const latin1 = await rawPost({ ...auth, 'content-type': 'application/json; charset=latin1' }, init);
    expect(latin1.status).toBe(415);
    expect(latin1.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 } });
    const brokenGzip = await rawPost({ ...auth, 'content-encoding': 'gzip' }, 'not gzip at all');
    expect(brokenGzip.status).toBe(400);
    expect(brokenGzip.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32700 } });
    // The key is checked first all the same.
    expect((await rawPost({ 'content-type': 'text/plain' }, init)).status).toBe(401);
    expect((await rawPost({ authorization: 'Bearer nope', 'content-type': 'text/plain' }, init)).status).toBe(403);
  });

  it('binds a session to the key that opened it: another key gets 403', async () => {
    const sid = rw.transport.sessionId!;
    const list = { jsonrpc: '2.0', id: 9, method: 'tools/list' };
    const other = await rawPost({ authorization: `Bearer ${RO_KEY}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' }, list);
    expect(other.status).toBe(403);
    expect(other.body).toMatchObject({ success: false, error: 'forbidden', message: 'This MCP session belongs to another API key' });
    const same = await rawPost({ authorization: `Bearer ${KEY}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' }, list);
    expect(same.status).toBe(200);
    const del = await fetch(`${s.instance.url}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${RO_KEY}`, 'mcp-session-id': sid } });
    expect(del.status).toBe(403);
    expect((await rw.client.listTools()).tools.length).toBeGreaterThan(30);
  });

  it('serves concurrent sessions with different keys independently', async () => {
    const extra = await Promise.all(Array.from({ length: 10 }, (_, i) => connectHttp(s.instance.url!, i % 2 ? RO_KEY : KEY)));
    try {
      expect(s.instance.mcp!.stats()).toMatchObject({ sessions: 12, read: 6, write: 6 });
      const t0 = performance.now();
      const results = await Promise.all(
        extra.flatMap((sess, i) => [
          sess.client.listTools().then((r) => ({ i, kind: 'list', n: r.tools.length, ok: true })),
          sess.call('create_vcon', { vcon: sample(`concurrent ${i}`) }).then((r) => ({ i, kind: 'create', n: 0, ok: !r.isError })),
          sess.call('get_health').then((r) => ({ i, kind: 'health', n: 0, ok: !r.isError })),
        ]),
      );
      const ms = performance.now() - t0;
      for (const r of results) {
        const readOnly = r.i % 2 === 1;
        if (r.kind === 'list') expect(r.n).toBe(readOnly ? READ_TOOLS.length : ALL_TOOLS.length + 1);
        if (r.kind === 'create') expect(r.ok).toBe(!readOnly);
        if (r.kind === 'health') expect(r.ok).toBe(true);
      }
      console.info(`MCP HTTP: 12 open sessions, ${results.length} concurrent requests over 10 of them in ${ms.toFixed(0)}ms`);
    } finally {
      await Promise.all(extra.map((e) => e.close()));
    }
    expect(s.instance.mcp!.stats().sessions).toBe(2);
  });
});

describe('MCP HTTP with other auth settings, and shutdown', () => {
  it('reads the key from API_KEY_HEADER and closes every session when the instance stops', async () => {
    const other = await startTestServer({ API_KEY_HEADER: 'x-api-key' });
    const sessions = await Promise.all([connectHttp(other.instance.url!, KEY, 'x-api-key'), connectHttp(other.instance.url!, RO_KEY, 'x-api-key')]);
    expect((await sessions[1].client.listTools()).tools.map((t) => t.name)).not.toContain('create_vcon');
    await expect(connectHttp(other.instance.url!, KEY)).rejects.toThrow();
    // Both clients hold their standalone SSE stream (GET /mcp) open: stopping must end those too.
    await Promise.all(sessions.map((x) => x.sseOpen));
    expect(other.instance.mcp!.stats()).toMatchObject({ sessions: 2, read: 1, write: 1 });
    await other.close();
    expect(other.instance.mcp!.stats().sessions).toBe(0);
    await Promise.all(sessions.map((x) => x.client.close()));
  });

  it('answers 503 auth_not_configured when auth is required and no key exists', async () => {
    const bare = await startTestServer({ API_KEYS: '', API_KEYS_READONLY: '' });
    try {
      const res = await fetch(`${bare.instance.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }),
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ success: false, error: 'auth_not_configured' });
    } finally {
      await bare.close();
    }
  });
});
