import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Call = { plugin: string; name: string; value?: string };
const calls = () => ((globalThis as any).__hookCalls ??= []) as Call[];

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({
    VCON_PLUGINS_PATH: './tests/fixtures/plugins/recorder.mjs, ./tests/fixtures/plugins/second.mjs, ./scripts/plugins/redact-phones.mjs',
  });
});
afterAll(() => s?.close());
beforeEach(() => {
  calls().length = 0;
});

/** Stores a vCon whose caller has the phone number +15551234567; answers the create's body. */
async function createCaller(subject: string, extra: Record<string, unknown>) {
  const r = await s.api('/vcons', { method: 'POST', json: { subject, parties: [{ tel: '+15551234567', name: 'Caller' }], ...extra } });
  expect(r.status).toBe(201);
  return r.body as { uuid: string };
}

describe('plugin hooks', () => {
  it("runs every plugin's before-hook in order and after-hooks around create", async () => {
    const r = await s.api('/vcons', { method: 'POST', json: { subject: 'plain' } });
    expect(r.status).toBe(201);
    expect(calls().map((c) => `${c.plugin}.${c.name}`)).toEqual(['recorder.beforeCreate', 'second.beforeCreate', 'recorder.afterCreate']);
  });

  it('lets a before-hook transform the input', async () => {
    const r = await s.api('/vcons', { method: 'POST', json: { subject: 'stamp me' } });
    const g = await s.api(`/vcons/${r.body.uuid}`);
    expect(g.body.vcon.subject).toBe('stamped by recorder');
  });

  it("turns a before-hook veto into a 403 with the plugin's message, writing nothing", async () => {
    const r = await s.api('/vcons', { method: 'POST', json: { uuid: '00000000-0000-4000-8000-0000000000f0', subject: 'forbidden' } });
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({ success: false, error: 'forbidden' });
    expect(r.body.message).toMatch(/recorder: subject "forbidden" is not allowed/);
    expect((await s.api('/vcons/00000000-0000-4000-8000-0000000000f0')).status).toBe(404);
    const created = await s.api('/vcons', { method: 'POST', json: { uuid: '00000000-0000-4000-8000-00000000dead', subject: 'held' } });
    expect(created.status).toBe(201);
    const del = await s.api('/vcons/00000000-0000-4000-8000-00000000dead', { method: 'DELETE' });
    expect(del.status).toBe(403);
    expect((await s.api('/vcons/00000000-0000-4000-8000-00000000dead')).status).toBe(200);
  });

  it('redacts on every read path (get, list full, sub-resources) without changing what is stored', async () => {
    const body = await createCaller('Call from +1 555 123 4567', {
      analysis: [{ type: 'summary', vendor: 'v', body: 'Call back on +1 (555) 123-4567' }],
    });
    const g = await s.api(`/vcons/${body.uuid}`);
    expect(g.body.vcon.parties[0].tel).toBe('+•••••••••67');
    // Identifiers and timestamps are not phone numbers.
    expect(g.body.vcon.uuid).toBe(body.uuid);
    expect(g.body.vcon.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(g.body.vcon.subject).not.toMatch(/555 123 4567/);
    expect(g.body.vcon.read_by).toBe('second');
    const list = await s.api('/vcons?format=full&limit=100');
    const mine = list.body.data.find((v: any) => v.uuid === body.uuid);
    expect(mine.parties[0].tel).toBe('+•••••••••67');
    const analysis = await s.api(`/vcons/${body.uuid}/analysis`);
    expect(analysis.body.analysis[0].body).not.toMatch(/123-4567/);
    // The order of after-hooks: recorder, second, then the redactor.
    const [stored] = await s.instance.sql<{ doc: any }[]>`select doc from vcons where uuid = ${body.uuid}`;
    expect(stored.doc.parties[0].tel).toBe('+15551234567');
    const reads = calls()
      .filter((c) => c.name === 'afterRead')
      .map((c) => c.plugin);
    expect(reads.slice(0, 2)).toEqual(['recorder', 'second']);
  });

  it('redacts lists and search results too (subjects and snippets), leaving uuids alone', async () => {
    const body = await createCaller('Callback wanted on +1 555 123 4567', {
      dialog: [{ type: 'text', encoding: 'none', body: 'please ring me on +1 555 123 4567 about the zeppelin' }],
    });
    // The only digits a reader may see in a subject or snippet of this vCon are the number's last two.
    const visibleDigits = (r: any) => Math.max(...[r.subject, ...r.matches.map((m: any) => m.snippet)].map((t) => (t.match(/\d/g) ?? []).length));
    const list = await s.api('/vcons?limit=100');
    expect(list.body.data.find((v: any) => v.uuid === body.uuid).subject).toBe('Callback wanted on +• ••• ••• ••67');
    const ids = await s.api('/vcons?format=ids_only&limit=100');
    expect(ids.body.data).toContain(body.uuid);
    for (const q of ['zeppelin', '4567']) {
      for (const kind of ['content', 'semantic', 'hybrid']) {
        const r = await s.api(`/vcons/search/${kind}?q=${q}`);
        const mine = r.body.results.find((x: any) => x.uuid === body.uuid);
        if (kind !== 'semantic' || q === 'zeppelin') expect(mine, `${kind} ${q}`).toBeDefined();
        if (mine) expect(visibleDigits(mine), `${kind} ${q}: ${JSON.stringify(mine)}`).toBeLessThanOrEqual(2);
      }
    }
  });

  it('runs read, update, search and delete hooks', async () => {
    const { body } = await s.api('/vcons', { method: 'POST', json: { subject: 'hooks' } });
    calls().length = 0;
    await s.api(`/vcons/${body.uuid}`);
    await s.api(`/vcons/${body.uuid}`, { method: 'PATCH', json: { subject: 'hooks 2' } });
    await s.api(`/vcons/${body.uuid}/dialog`, { method: 'POST', json: { type: 'text', body: 'hi', encoding: 'none' } });
    await s.api('/vcons');
    await s.api(`/vcons/${body.uuid}`, { method: 'DELETE' });
    const names = calls()
      .filter((c) => c.plugin === 'recorder')
      .map((c) => c.name);
    expect(names).toEqual([
      'beforeRead',
      'afterRead',
      'beforeUpdate',
      'afterUpdate',
      'afterRead', // PATCH answers with the document as readers see it
      'beforeUpdate',
      'afterUpdate',
      'beforeSearch',
      'afterSearch',
      'beforeDelete',
      'afterDelete',
    ]);
  });

  it('refuses to start when a plugin cannot be loaded', async () => {
    await expect(startTestServer({ VCON_PLUGINS_PATH: './tests/fixtures/plugins/missing.mjs' })).rejects.toThrow(/cannot load plugin/);
  });
});
