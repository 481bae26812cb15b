// The public producers' vCons (tests/fixtures/producers: the IETF working group's examples and an
// earlier draft's, py-vcon, vcon-server, vcon-mcp, vcon-js, fake-vcons, ietf-meeting-vcons), POSTed
// one by one to a real server in each validation mode. Per file and mode the answer is the one
// verdicts.tsv writes down (accepted, accepted with warnings at those paths, refused naming those
// paths); an accepted document reads back byte-equal to the file (values and key order at every
// depth) apart from what the service sets (uuid when assigned, created_at when missing, updated_at
// on a replace), MCP get_vcon returns the very REST answer, and every response, the GET of a
// leniently stored vCon included, matches GET /openapi.json.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAgainstDocument } from '../helpers/openapi-check.js';
import { KEY, startTestServer, type ApiExchange, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';
import { asSent, loadProducers, MODES, type Verdict } from './table.js';

const files = loadProducers();
const JSON_TYPE = { 'content-type': 'application/json' };
const once = (paths: string[]) => paths.filter((p, i) => paths.indexOf(p) === i);
const says = (v: Verdict) =>
  v.kind === 'accepted'
    ? v.warnings.length
      ? `accepts with warnings at ${v.warnings.join(', ')}`
      : 'accepts'
    : v.kind === 'refused'
      ? `refuses at ${v.paths.join(', ')}`
      : 'refuses as not JSON';

it('the table covers every file once and reads each cell', () => {
  expect(files.length).toBeGreaterThanOrEqual(80);
  expect(new Set(files.map((f) => f.file)).size).toBe(files.length);
  // What a file is decides nothing here; the table is the expectation. Just no empty reasons.
  for (const f of files) expect(f.why.trim(), f.file).not.toBe('');
});

for (const mode of MODES) {
  describe(`VCON_VALIDATION=${mode}: every producer's file`, () => {
    let s: TestServer;
    let mcp: HttpSession;
    let checkOpenApi: ((x: ApiExchange) => void) | undefined;
    beforeAll(async () => {
      s = await startTestServer({ VCON_VALIDATION: mode }, { onResponse: (x) => checkOpenApi?.(x) });
      checkOpenApi = await checkAgainstDocument(s.base);
      mcp = await connectHttp(s.instance.url!, KEY);
    });
    afterAll(async () => {
      await mcp?.close();
      await s?.close();
    });

    // In table order, one after the other: files that share a uuid (the plain, signed and encrypted
    // forms of one call) replace each other, and each is read back right after its own POST.
    for (const f of files) {
      const v = f.verdict[mode];
      it(`${says(v)}: ${f.file}`, async () => {
        const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: JSON_TYPE });
        if (v.kind === 'unreadable') {
          expect(r.status).toBe(400);
          expect(r.body.error).toBe('invalid_json');
          return;
        }
        if (v.kind === 'refused') {
          expect(r.status, JSON.stringify(r.body)).toBe(400);
          expect(r.body.error).toBe('validation_failed');
          expect(once(r.body.details.map((d: any) => d.path))).toEqual(v.paths);
          for (const d of r.body.details) expect(d.message, d.path).toMatch(/\S/);
          return;
        }
        expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
        expect((r.body.warnings ?? []).map((w: any) => w.path)).toEqual(v.warnings);
        const got = await s.api(`/vcons/${r.body.uuid}`);
        expect(got.status).toBe(200);
        const stored = got.body.vcon;
        if ('payload' in f.json || 'ciphertext' in f.json) {
          expect(JSON.stringify(stored)).toBe(JSON.stringify(f.json)); // opaque: stored untouched
        } else {
          if ('uuid' in f.json) expect(stored.uuid).toBe(String(f.json.uuid).toLowerCase());
          expect(typeof stored.created_at).toBe('string');
          expect(JSON.stringify(asSent(stored, f.json, r.status === 200))).toBe(JSON.stringify(f.json));
        }
        const viaMcp = await mcp.call('get_vcon', { uuid: r.body.uuid });
        expect(viaMcp.isError, JSON.stringify(viaMcp.content)).toBeFalsy();
        expect(JSON.stringify(viaMcp.structuredContent.vcon)).toBe(JSON.stringify(stored));
      });
    }
  });
}
