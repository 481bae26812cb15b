// Groups started with VCON_VALIDATION=ietf and lenient, over real HTTP and the MCP SDK's client:
// every fixture (tests/fixtures/vcons, sources in SOURCES.md) a mode accepts reads back exactly as
// sent over REST and MCP, with warnings for what was tolerated; the rest is refused as strict
// refuses it. Strict's own verdicts are tests/rest/fixtures.test.ts.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BROKEN, loadFixtures, TOLERATED } from '../helpers/fixtures.js';
import { startTestServer, KEY, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';

const fixtures = loadFixtures();
const JSON_TYPE = { 'content-type': 'application/json' };

for (const mode of ['ietf', 'lenient'] as const) {
  describe(`VCON_VALIDATION=${mode}`, () => {
    let s: TestServer;
    let mcp: HttpSession;
    beforeAll(async () => {
      s = await startTestServer({ VCON_VALIDATION: mode });
      mcp = await connectHttp(s.instance.url!, KEY);
    });
    afterAll(async () => {
      await mcp?.close();
      await s?.close();
    });

    for (const f of fixtures) {
      const tolerated = TOLERATED[f.name];
      const refused = BROKEN[f.name] ?? (tolerated && mode === 'ietf' && tolerated.from === 'lenient' ? tolerated.paths[0] : undefined);
      if (refused) {
        it(`refuses ${f.name} at ${refused}`, async () => {
          const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: JSON_TYPE });
          expect(r.status).toBe(400);
          expect(r.body.details.map((d: any) => d.path)).toContain(refused);
        });
        continue;
      }
      it(`stores ${f.name} as sent${tolerated ? ', with warnings' : ''}; REST and MCP read it back equal`, async () => {
        const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: JSON_TYPE });
        expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
        expect((r.body.warnings ?? []).map((w: any) => w.path)).toEqual(tolerated?.paths ?? []);
        const got = (await s.api(`/vcons/${r.body.uuid}`)).body.vcon;
        const expected: Record<string, unknown> = { ...f.json };
        if (!('payload' in f.json || 'ciphertext' in f.json)) {
          // The service-set fields only: uuid, created_at (when missing) and updated_at on a replace.
          expected.uuid = got.uuid;
          expected.created_at = got.created_at;
          if (r.status === 200) expected.updated_at = got.updated_at;
        }
        expect(got).toEqual(expected);
        expect(Object.keys(got).filter((k) => k in f.json)).toEqual(Object.keys(f.json));
        const viaMcp = await mcp.call('get_vcon', { uuid: r.body.uuid });
        expect(viaMcp.isError).toBeFalsy();
        expect(JSON.stringify(viaMcp.structuredContent.vcon)).toBe(JSON.stringify(got));
      });
    }

    it('GET /schema describes the mode: the JSON Schema accepts what the mode accepts', async () => {
      const r = await s.api('/schema');
      expect(r.body['x-validation']).toBe(mode);
      const check = new Ajv2020({ strict: false, validateFormats: false }).compile(r.body);
      for (const f of fixtures.filter((x) => TOLERATED[x.name] && (mode === 'lenient' || TOLERATED[x.name].from === 'ietf'))) {
        expect(check(f.json), `${f.name}: ${JSON.stringify(check.errors)}`).toBe(true);
      }
    });

    it("MCP tools advertise the mode's schemas for their document arguments", async () => {
      const { tools } = await mcp.client.listTools();
      // The SDK labels tool schemas draft-07; their keywords mean the same in 2020-12.
      const schemaOf = (name: string) => {
        const { $schema: _, ...schema } = tools.find((t) => t.name === name)!.inputSchema as Record<string, unknown>;
        return schema;
      };
      const ajv = new Ajv2020({ strict: false, validateFormats: false });
      const create = ajv.compile(schemaOf('create_vcon'));
      for (const f of fixtures.filter((x) => TOLERATED[x.name] && (mode === 'lenient' || TOLERATED[x.name].from === 'ietf'))) {
        expect(create({ vcon: f.json }), `${f.name}: ${JSON.stringify(create.errors)}`).toBe(true);
      }
      const addAnalysis = ajv.compile(schemaOf('add_analysis'));
      const uuid = '0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
      expect(addAnalysis({ uuid, analysis: { type: 'transcript', vendor: 'v', encoding: 'json', body: { text: 'hi' } } })).toBe(true);
      // What the mode still refuses stays refused in the advertised schema too.
      expect(addAnalysis({ uuid, analysis: { type: 'transcript', vendor: 'v', encoding: 'json', body: 'x', dialog: -1 } })).toBe(false);
    });

    it('says what it tolerated in batch items and MCP create results', async () => {
      const objectBody = { analysis: [{ type: 'transcript', vendor: 'v', encoding: 'json', body: { text: 'hi' } }] };
      const b = await s.api('/vcons/batch', { method: 'POST', json: [objectBody, { subject: 'plain' }] });
      expect(b.status).toBe(201);
      expect(b.body.results[0].warnings).toEqual([{ path: 'analysis[0].body', message: expect.stringContaining('IETF vCon draft allows') }]);
      expect(b.body.results[1]).not.toHaveProperty('warnings');
      const c = await mcp.call('create_vcon', { vcon: objectBody });
      expect(c.structuredContent.warnings).toEqual(b.body.results[0].warnings);
      const uuid = c.structuredContent.uuid;
      expect((await mcp.call('get_vcon', { uuid })).structuredContent.vcon.analysis).toEqual(objectBody.analysis);
      const a = await s.api(`/vcons/${uuid}/analysis`, { method: 'POST', json: objectBody.analysis[0] });
      expect(a.status).toBe(201);
      expect(a.body.warnings).toEqual([{ path: 'body', message: expect.stringContaining('IETF vCon draft allows') }]);
    });
  });
}

describe('VCON_VALIDATION=lenient downstream', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ VCON_VALIDATION: 'lenient' });
  });
  afterAll(() => s?.close());

  it('lists, sorts and filters an RFC 2822 created_at as the instant it names', async () => {
    // Crafted: the same instant in both forms, and a later one.
    const older = await s.api('/vcons', { method: 'POST', json: { subject: 'rfc2822', created_at: 'Wed, 18 May 2022 23:05:05 -0000' } });
    const newer = await s.api('/vcons', { method: 'POST', json: { subject: 'iso', created_at: '2022-05-19T00:00:00Z' } });
    expect(older.body.warnings).toEqual([{ path: 'created_at', message: 'is an RFC 2822 date: read as 2022-05-18T23:05:05.000Z' }]);
    const list = await s.api('/vcons?start_date=2022-05-18&end_date=2022-05-19');
    expect(list.body.data.map((v: any) => v.uuid)).toEqual([newer.body.uuid, older.body.uuid]);
    expect(list.body.data[1].created_at).toBe('2022-05-18T23:05:05.000Z');
    const after = await s.api('/vcons?start_date=2022-05-18T23:05:06Z');
    expect(after.body.data.map((v: any) => v.uuid)).toEqual([newer.body.uuid]);
  });

  it('finds an object body sent with encoding none by its text, not by its keys', async () => {
    // Crafted: the conserver's shape (transcript object, encoding none).
    const doc = { analysis: [{ type: 'transcript', vendor: 'v', encoding: 'none', body: { transcript: 'the quokka ate my invoice' } }] };
    const r = await s.api('/vcons?wait_for=search', { method: 'POST', json: doc });
    expect(r.status).toBe(201);
    const hit = await s.api('/vcons/search/content?q=quokka');
    expect(hit.body.results.map((v: any) => v.vcon_uuid ?? v.uuid)).toContain(r.body.uuid);
    const key = await s.api('/vcons/search/content?q=transcript');
    expect(key.body.results.map((v: any) => v.vcon_uuid ?? v.uuid)).not.toContain(r.body.uuid);
  });
});
