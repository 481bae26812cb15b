// Analytics and discovery over what a lenient group stores of the public producers' files
// (tests/fixtures/producers): JSON analysis bodies sent with encoding "none" or none at all, dialogs
// of type "video", encoding "base64", an analysis without vendor, RFC 2822 dates. No answer fails or
// leaves its OpenAPI schema, MCP answers what REST answers, and every figure equals the same count
// made over the stored documents themselves (GET /vcons?format=full): a tolerated form is counted as
// written (its own dialog type, its own encoding, vendor null), never dropped or miscounted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkAgainstDocument } from '../helpers/openapi-check.js';
import { KEY, startTestServer, type ApiExchange, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';
import { loadProducers } from './table.js';

type Doc = Record<string, any>;
const JSON_TYPE = { 'content-type': 'application/json' };
const items = (d: Doc, k: string): Doc[] => (Array.isArray(d[k]) ? d[k] : []);
/** The items of one array of a vCon, each with its vCon's uuid as `vcon`. */
const ofVcon = (d: Doc, k: string): Doc[] => items(d, k).map((x) => ({ ...x, vcon: d.uuid }));
const bytesOf = (body: unknown) =>
  body === undefined || body === null ? 0 : Buffer.byteLength(typeof body === 'string' ? body : JSON.stringify(body));
const str = (v: unknown) => (typeof v === 'string' ? v : null);

/** value → count, as a map keyed by the value's JSON (null included). */
function tally<T>(xs: T[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of xs) m.set(JSON.stringify(x), (m.get(JSON.stringify(x)) ?? 0) + 1);
  return m;
}
const asTally = (rows: { count: number }[], key: string) => new Map(rows.map((r: any) => [JSON.stringify(r[key]), r.count]));

describe('lenient group: analytics and discovery over the producers’ tolerated forms', () => {
  let s: TestServer;
  let mcp: HttpSession;
  let docs: Doc[];
  let checkOpenApi: ((x: ApiExchange) => void) | undefined;
  const tolerated = new Set<string>();

  beforeAll(async () => {
    s = await startTestServer({ VCON_VALIDATION: 'lenient' }, { onResponse: (x) => checkOpenApi?.(x) });
    checkOpenApi = await checkAgainstDocument(s.base);
    mcp = await connectHttp(s.instance.url!, KEY);
    for (const f of loadProducers()) {
      const v = f.verdict.lenient;
      if (v.kind !== 'accepted') continue;
      const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: JSON_TYPE });
      expect([200, 201], f.file).toContain(r.status);
      for (const w of v.warnings) tolerated.add(w.replace(/\[\d+\]/g, '[]'));
    }
    const page = await s.api('/vcons?format=full&limit=100');
    expect(page.body.pagination.has_more).toBe(false);
    docs = page.body.data;
  });
  afterAll(async () => {
    await mcp?.close();
    await s?.close();
  });

  it('stores every tolerated form the brief names', () => {
    // The table's lenient warnings cover them all (else this test would prove less than it says).
    expect([...tolerated].sort()).toEqual(['analysis[].body', 'analysis[].vendor', 'dialog[].encoding', 'dialog[].start', 'dialog[].type']);
  });

  it('content analytics count dialogs, analyses and parties as the documents say', async () => {
    const r = await s.api('/analytics/content');
    expect(r.status).toBe(200);
    const c = r.body.data;
    const dialogs = docs.flatMap((d) => ofVcon(d, 'dialog'));
    const analyses = docs.flatMap((d) => ofVcon(d, 'analysis'));
    expect(c.conversations.vcons).toBe(docs.length);
    expect(c.dialogs.total).toBe(dialogs.length);
    expect(asTally(c.dialogs.by_type, 'type')).toEqual(tally(dialogs.map((x) => str(x.type))));
    const video = c.dialogs.by_type.find((t: any) => t.type === 'video');
    expect(video.count).toBeGreaterThanOrEqual(3);
    const videos = dialogs.filter((x) => x.type === 'video');
    expect(video.total_duration_s).toBe(videos.reduce((n, x) => n + x.duration, 0));
    expect(asTally(c.dialogs.encodings, 'value')).toEqual(tally(dialogs.map((x) => str(x.encoding))));
    expect(c.dialogs.encodings.find((e: any) => e.value === 'base64')?.count).toBe(1);

    expect(c.analyses.total).toBe(analyses.length);
    expect(asTally(c.analyses.by_vendor, 'vendor')).toEqual(tally(analyses.map((x) => str(x.vendor))));
    expect(c.analyses.by_vendor.find((v: any) => v.vendor === null)?.count).toBe(1);
    expect(asTally(c.analyses.encodings, 'value')).toEqual(tally(analyses.map((x) => str(x.encoding))));
    // A JSON body (an object sent with encoding "none" among them) weighs its compact JSON.
    for (const t of c.analyses.by_type) {
      const of = analyses.filter((x) => x.type === t.type);
      expect(t.bytes, t.type).toBe(of.reduce((n, x) => n + bytesOf(x.body), 0));
      expect(t.vcons, t.type).toBe(new Set(of.map((x) => x.vcon)).size);
    }
    expect(c.analyses.by_type.find((t: any) => t.type === 'transcript').bytes).toBeGreaterThan(200_000);
  });

  it('attachment analytics and discovery count every purpose, legacy type and analysis type', async () => {
    const attachments = docs.flatMap((d) => ofVcon(d, 'attachments'));
    const a = (await s.api('/analytics/attachments')).body.data;
    expect(a.total).toBe(attachments.length);
    expect(asTally(a.encodings, 'encoding')).toEqual(tally(attachments.map((x) => str(x.encoding))));
    expect(a.sizes.bytes).toBe(attachments.reduce((n, x) => n + bytesOf(x.body), 0));

    const distinctVcons = (xs: Doc[], k: string) => {
      const m = new Map<string, Set<string>>();
      for (const x of xs) if (typeof x[k] === 'string') m.set(x[k], (m.get(x[k]) ?? new Set()).add(x.vcon));
      return new Map([...m].map(([v, set]) => [v, set.size]));
    };
    const values = async (p: string) => new Map((await s.api(p)).body.values.map((v: any) => [v.value, v.count]));
    const analyses = docs.flatMap((d) => ofVcon(d, 'analysis'));
    expect(await values('/discovery/analysis/types')).toEqual(distinctVcons(analyses, 'type'));
    expect(await values('/discovery/attachments/purposes')).toEqual(distinctVcons(attachments, 'purpose'));
    expect(await values('/discovery/attachments/types')).toEqual(distinctVcons(attachments, 'type'));
  });

  it('the dashboard, growth and tags answer too, and MCP answers what REST answers', async () => {
    const all = await s.api('/analytics');
    expect(all.status).toBe(200);
    expect(all.body.data.summary).toMatchObject({ vcons: docs.length, analyses: docs.reduce((n, d) => n + items(d, 'analysis').length, 0) });
    expect((await s.api('/analytics/growth?granularity=month&months_back=60')).status).toBe(200);
    expect((await s.api('/analytics/tags')).status).toBe(200);
    const viaMcp = await mcp.call('get_analytics', {});
    expect(viaMcp.isError, JSON.stringify(viaMcp.content)).toBeFalsy();
    const { data } = viaMcp.structuredContent;
    // Only the clock-relative parts may differ between two reads.
    expect(data.content).toEqual(all.body.data.content);
    expect(data.attachments).toEqual(all.body.data.attachments);
    for (const [tool, p] of [
      ['discover_analysis_types', '/discovery/analysis/types'],
      ['discover_attachment_purposes', '/discovery/attachments/purposes'],
      ['discover_attachment_types', '/discovery/attachments/types'],
    ] as const) {
      const m = await mcp.call(tool, {});
      expect(m.isError, tool).toBeFalsy();
      expect(m.structuredContent.values, tool).toEqual((await s.api(p)).body.values);
    }
  });

  it('an RFC 2822 created_at counts in the analytics range of the instant it names', async () => {
    // Crafted: py-vcon 0.0.1 wrote such dates; no fetched file has one in created_at.
    const r = await s.api('/vcons', { method: 'POST', json: { subject: 'rfc 2822 created', created_at: 'Wed, 18 May 2022 23:05:05 -0000' } });
    expect(r.body.warnings.map((w: any) => w.path)).toEqual(['created_at']);
    const vconsIn = async (from: string, to: string) =>
      (await s.api(`/analytics/content?start_date=${from}&end_date=${to}`)).body.data.conversations.vcons as number;
    const day = await vconsIn('2022-05-18', '2022-05-18');
    const before = await vconsIn('2022-05-18', '2022-05-18T23:05:04Z');
    const after = await vconsIn('2022-05-18T23:05:06Z', '2022-05-18');
    expect(day - before - after).toBe(1);
    expect(await vconsIn('2022-05-18T23:05:05Z', '2022-05-18T23:05:05Z')).toBe(1);
  });
});
