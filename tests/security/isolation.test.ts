// Isolation probes: two groups (two instances, two schemas, one database) hold a vCon with the same
// uuid and different content. Every REST route, MCP tool and MCP resource is called with the other
// group's keys (401) and with the group's own key (no marker, uuid, schema or table name of the
// other group anywhere in the raw answer, and the group's own figures). Writes through one group
// leave the other's copy of the shared uuid untouched, and neither instance logs document content
// or keys.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOLS } from '../../src/mcp/tools.js';
import { adminSql } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';
import { connectHttp } from '../mcp/helpers.js';
import { contentMarkers, documentFor, leaksIn, startGroup, stopGroup, type Group } from './groups.js';

const SHARED = randomUUID();
let a: Group;
let b: Group;

beforeAll(async () => {
  // Different sizes on purpose: every figure of one group differs from the other's.
  [a, b] = await Promise.all([startGroup('a', SHARED, 2, 0), startGroup('b', SHARED, 4, 2)]);
});
afterAll(async () => {
  await Promise.all([stopGroup(a), stopGroup(b)]);
});

interface Probe {
  method: string;
  path: string;
  json?: unknown;
  /** Expected status with the group's own read-write key. */
  status: number;
}

/** Every authenticated read route of the REST API, as the group `self` calls them. */
function readProbes(self: Group, other: Group): Probe[] {
  const m = self.markers;
  const o = other.markers;
  const tags = (t: Record<string, string>) => encodeURIComponent(JSON.stringify(t));
  return [
    { method: 'GET', path: '/vcons?limit=100', status: 200 },
    { method: 'GET', path: '/vcons?limit=100&format=full', status: 200 },
    { method: 'GET', path: '/vcons?limit=100&format=ids_only', status: 200 },
    { method: 'GET', path: `/vcons?subject=${o.subject}`, status: 200 },
    { method: 'GET', path: `/vcons?party_email=${encodeURIComponent(o.email)}`, status: 200 },
    { method: 'GET', path: `/vcons?tags=${tags({ status: o.status })}`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}?format=summary`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}?format=metadata`, status: 200 },
    { method: 'GET', path: `/vcons/${other.ownUuids[0]}`, status: 404 },
    { method: 'GET', path: `/vcons/${SHARED}/analysis`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}/analysis?type=${o.analysisType}`, status: 200 },
    { method: 'GET', path: `/vcons/${other.ownUuids[0]}/analysis`, status: 404 },
    { method: 'GET', path: `/vcons/${SHARED}/attachments`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}/attachments?purpose=${o.purpose}`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}/attachments?type=${o.legacyType}`, status: 200 },
    { method: 'GET', path: `/vcons/${other.ownUuids[0]}/attachments`, status: 404 },
    { method: 'GET', path: `/vcons/${SHARED}/tags`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}/tags?key=${m.tagKey}`, status: 200 },
    { method: 'GET', path: `/vcons/${SHARED}/tags?key=${o.tagKey}`, status: 404 },
    { method: 'GET', path: `/vcons/${other.ownUuids[0]}/tags`, status: 404 },
    { method: 'GET', path: '/tags', status: 200 },
    { method: 'GET', path: `/tags/search?tags=${tags({ status: m.status })}`, status: 200 },
    { method: 'GET', path: `/tags/search?tags=${tags({ status: o.status })}`, status: 200 },
    { method: 'GET', path: `/tags/search?tags=${tags({ [o.tagKey]: o.tagValue })}`, status: 200 },
    { method: 'GET', path: '/discovery/attachments/purposes', status: 200 },
    { method: 'GET', path: '/discovery/attachments/types', status: 200 },
    { method: 'GET', path: '/discovery/analysis/types', status: 200 },
    { method: 'GET', path: '/vcons/search/content?q=refund&limit=100', status: 200 },
    { method: 'GET', path: '/vcons/search/semantic?q=refund&limit=100', status: 200 },
    { method: 'GET', path: '/vcons/search/hybrid?q=refund&limit=100', status: 200 },
    { method: 'GET', path: `/vcons/search/content?q=${o.dialog}`, status: 200 },
    { method: 'GET', path: `/vcons/search/semantic?q=${o.summary}`, status: 200 },
    { method: 'GET', path: `/vcons/search/hybrid?q=${o.subject}`, status: 200 },
    { method: 'GET', path: '/database/shape', status: 200 },
    { method: 'GET', path: '/database/stats', status: 200 },
    { method: 'GET', path: '/database/size', status: 200 },
    { method: 'GET', path: '/database/health', status: 200 },
    { method: 'POST', path: '/database/analyze', json: { query: 'select * from vcons', analyze: true }, status: 200 },
    { method: 'POST', path: '/database/analyze', json: { query: `select * from "${other.schema}".vcons` }, status: 400 },
    // Exfiltration attempts: the other group's text in an error message or in the catalogs.
    {
      method: 'POST',
      path: '/database/analyze',
      json: { query: `select (select string_agg(subject, ',') from "${other.schema}".vcons)::int`, analyze: true },
      status: 400,
    },
    {
      method: 'POST',
      path: '/database/analyze',
      json: {
        query: `select (select string_agg(most_common_vals::text, ',') from pg_stats where schemaname = '${other.schema}')::int`,
        analyze: true,
      },
      status: 400,
    },
    {
      method: 'POST',
      path: '/database/analyze',
      json: {
        query:
          "select (select string_agg(nspname || '.' || relname, ',') from pg_class c join pg_namespace n on n.oid = c.relnamespace where relname like '%table%')::int",
        analyze: true,
      },
      status: 400,
    },
    { method: 'GET', path: '/analytics', status: 200 },
    { method: 'GET', path: '/analytics/growth?granularity=day&months_back=1', status: 200 },
    { method: 'GET', path: '/analytics/content', status: 200 },
    { method: 'GET', path: '/analytics/tags', status: 200 },
    { method: 'GET', path: '/analytics/attachments', status: 200 },
    // Unauthenticated infrastructure routes: they name only this group.
    { method: 'GET', path: '/health', status: 200 },
    { method: 'GET', path: '/version', status: 200 },
    { method: 'GET', path: '/schema', status: 200 },
    { method: 'GET', path: '/examples/full_featured', status: 200 },
  ];
}

/** Every authenticated write route, aimed at the shared uuid (for the 401 probes). */
const writeRoutes = (g: Group): Probe[] => [
  { method: 'POST', path: '/vcons', json: documentFor(g.markers, SHARED), status: 200 },
  { method: 'POST', path: '/vcons/batch', json: [documentFor(g.markers, SHARED)], status: 201 },
  { method: 'PATCH', path: `/vcons/${SHARED}`, json: { subject: 'patched' }, status: 200 },
  {
    method: 'POST',
    path: `/vcons/${SHARED}/dialog`,
    json: { type: 'text', start: new Date().toISOString(), parties: [0], body: 'appended', encoding: 'none' },
    status: 201,
  },
  { method: 'POST', path: `/vcons/${SHARED}/analysis`, json: { type: 'note', vendor: 'probe', body: 'appended', encoding: 'none' }, status: 201 },
  { method: 'POST', path: `/vcons/${SHARED}/attachments`, json: { purpose: 'probe', encoding: 'none', body: 'appended' }, status: 201 },
  { method: 'PUT', path: `/vcons/${SHARED}/tags/probe`, json: { value: 'x' }, status: 200 },
  { method: 'DELETE', path: `/vcons/${SHARED}/tags/probe`, status: 204 },
  { method: 'DELETE', path: `/vcons/${SHARED}/tags`, status: 204 },
  { method: 'DELETE', path: `/vcons/${SHARED}`, status: 200 },
];

const pairs = () =>
  [
    [a, b],
    [b, a],
  ] as const;

describe('keys are per group', () => {
  it("the other group's read-write and read-only keys get 401 on every authenticated REST route", async () => {
    let probes = 0;
    for (const [self, other] of pairs()) {
      for (const p of [...readProbes(self, other), ...writeRoutes(self)]) {
        if (['/health', '/version', '/schema'].includes(p.path) || p.path.startsWith('/examples/')) continue;
        for (const key of [other.rwKey, other.roKey]) {
          const r = await self.api(p.path, { method: p.method, json: p.json, key });
          expect(r.status, `${p.method} ${p.path} on ${self.name} with ${other.name}'s key`).toBe(401);
          expect(r.body).toMatchObject({ success: false, error: 'unauthorized' });
          expect(leaksIn(r.text, self), `${p.method} ${p.path}`).toEqual([]);
          probes++;
        }
      }
    }
    console.log(`[isolation] ${probes} REST requests with the other group's keys: all 401`);
    expect(probes).toBeGreaterThan(100);
    // Nothing was written by the refused writes.
    for (const g of [a, b]) {
      const r = await g.api(`/vcons/${SHARED}`);
      expect(r.body.vcon.subject).toContain(g.markers.subject);
    }
  });

  it("the other group's key cannot open an MCP session, and a session id of one instance means nothing to the other", async () => {
    for (const [self, other] of pairs()) {
      for (const key of [other.rwKey, other.roKey]) {
        const res = await fetch(`${self.url}/mcp`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
          }),
        });
        // Another group's key is an invalid key here: 403 without WWW-Authenticate on /mcp (so MCP
        // clients report the key instead of starting OAuth), never a session.
        expect(res.status).toBe(403);
        expect(res.headers.get('www-authenticate')).toBeNull();
        expect(await res.json()).toMatchObject({ success: false, error: 'unauthorized' });
      }
      await expect(connectHttp(self.url, other.rwKey)).rejects.toThrow();
      const own = await connectHttp(other.url, other.rwKey);
      try {
        const sessionId = own.transport.sessionId!;
        expect(sessionId).toBeTruthy();
        const res = await fetch(`${self.url}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${self.rwKey}`,
            'mcp-session-id': sessionId,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'get_vcon', arguments: { uuid: SHARED } } }),
        });
        expect(res.status).toBe(404);
        expect(leaksIn(await res.text(), other)).toEqual([]);
      } finally {
        await own.close();
      }
    }
  });
});

describe("REST with the group's own key", () => {
  it("every read route answers with this group's data only", async () => {
    let probes = 0;
    for (const [self, other] of pairs()) {
      for (const p of readProbes(self, other)) {
        probes++;
        const r = await self.api(p.path, { method: p.method, json: p.json });
        const what = `${p.method} ${p.path} on ${self.name}: ${r.text.slice(0, 300)}`;
        expect(r.status, what).toBe(p.status);
        expect(leaksIn(r.text, other, p.path + JSON.stringify(p.json ?? null)), what).toEqual([]);
      }
    }
    console.log(`[isolation] ${probes} REST reads with the group's own key: no trace of the other group`);
  });

  it("reads of the shared uuid return this group's document, and searches for the other's words find nothing", async () => {
    for (const [self, other] of pairs()) {
      const m = self.markers;
      const o = other.markers;
      const doc = (await self.api(`/vcons/${SHARED}`)).body.vcon;
      expect(doc.subject).toContain(m.subject);
      expect(doc.parties[0].mailto).toBe(`mailto:${m.email}`);
      expect((await self.api(`/vcons/${SHARED}/tags`)).body.tags).toEqual({ [m.tagKey]: m.tagValue, status: m.status });
      for (const q of [o.dialog, o.subject, o.party, o.analysis, o.summary, o.attachment]) {
        for (const kind of ['content', 'semantic', 'hybrid']) {
          const r = await self.api(`/vcons/search/${kind}?q=${q}&threshold=0.99`);
          const uuids = (r.body.results as { uuid: string }[]).map((x) => x.uuid);
          expect(
            uuids.filter((u) => other.ownUuids.includes(u)),
            `${kind} ${q}`,
          ).toEqual([]);
          if (kind === 'content') expect(r.body.count, `${kind} ${q} on ${self.name}`).toBe(0);
        }
      }
      for (const q of [m.dialog, m.subject]) {
        const r = await self.api(`/vcons/search/content?q=${q}&limit=100`);
        expect(r.body.count, q).toBe(self.total);
      }
      expect((await self.api(`/vcons?subject=${o.subject}`)).body.data).toEqual([]);
      expect((await self.api(`/vcons?party_email=${encodeURIComponent(o.email)}`)).body.data).toEqual([]);
      expect((await self.api(`/tags/search?tags=${encodeURIComponent(JSON.stringify({ status: o.status }))}`)).body.count).toBe(0);
    }
  });

  it("every count and figure is this group's own", async () => {
    for (const [self] of pairs()) {
      const list = (await self.api('/vcons?limit=100&format=ids_only')).body.data as string[];
      expect(list.sort()).toEqual([SHARED, ...self.ownUuids].sort());
      const content = (await self.api('/vcons/search/content?q=refund&limit=100')).body;
      expect(content.count).toBe(self.total);
      for (const kind of ['semantic', 'hybrid']) {
        const r = (await self.api(`/vcons/search/${kind}?q=refund&limit=100`)).body;
        expect(r.results.length, kind).toBeLessThanOrEqual(self.total);
      }
      const tags = (await self.api('/tags')).body;
      expect(tags.total_vcons_with_tags).toBe(self.tagged);
      expect(tags.keys.map((k: { key: string }) => k.key).sort()).toEqual([self.markers.tagKey, 'status'].sort());
      for (const d of ['attachments/purposes', 'attachments/types', 'analysis/types']) {
        const r = (await self.api(`/discovery/${d}`)).body;
        expect(r.total_vcons, d).toBe(self.total);
        for (const v of r.values) expect(v.count, `${d} ${v.value}`).toBeLessThanOrEqual(self.total);
      }
      const purposes = (await self.api('/discovery/attachments/purposes')).body.values;
      expect(purposes).toContainEqual({ value: self.markers.purpose, count: self.total });
      const analytics = JSON.stringify((await self.api('/analytics')).body);
      expect(analytics).toContain(self.markers.analysisType);
      const shape = JSON.stringify((await self.api('/database/shape')).body);
      expect(shape).toContain(self.markers.table);
      // The row counts the database routes report come from this schema's tables only.
      const admin = adminSql();
      const [{ n }] = await admin.unsafe(`select count(*)::int as n from "${self.schema}".vcons`);
      await admin.end();
      expect(n).toBe(self.total);
    }
  });
});

/** What the other group's copy of the shared uuid looks like: its document and its derived rows. */
async function snapshot(g: Group) {
  const admin = adminSql();
  try {
    // The group's own background indexing changes its index tables: compare settled states.
    const queued = async () => (await admin.unsafe(`select count(*)::int as n from "${g.schema}".index_queue`))[0].n as number;
    await waitFor(async () => (await queued()) === 0, 60_000, 50, `${g.schema}'s index queue to drain`);
    const tables = await admin<{ table_name: string }[]>`
      select table_name from information_schema.columns
      where table_schema = ${g.schema} and column_name = 'vcon_uuid' order by table_name`;
    const counts: Record<string, number> = {};
    for (const { table_name } of tables) {
      const [{ n }] = await admin.unsafe(`select count(*)::int as n from "${g.schema}"."${table_name}" where vcon_uuid = $1`, [SHARED]);
      counts[table_name] = n;
    }
    const [row] = await admin.unsafe(`select doc, updated_at, tags_updated_at from "${g.schema}".vcons where uuid = $1`, [SHARED]);
    return { counts, row, total: (await admin.unsafe(`select count(*)::int as n from "${g.schema}".vcons`))[0].n };
  } finally {
    await admin.end();
  }
}

describe('writes through one group', () => {
  it("leave the other group's copy of the shared uuid and its derived rows untouched", async () => {
    for (const [self, other] of pairs()) {
      const before = await snapshot(other);
      expect(Object.keys(before.counts).length).toBeGreaterThanOrEqual(5);
      expect(before.counts.search_units).toBeGreaterThan(0);
      for (const p of writeRoutes(self)) {
        const r = await self.api(p.path, { method: p.method, json: p.json });
        expect(r.status, `${p.method} ${p.path} on ${self.name}: ${r.text}`).toBe(p.status);
        expect(leaksIn(r.text, other)).toEqual([]);
      }
      expect(await snapshot(other)).toEqual(before);
      expect((await other.api(`/vcons/${SHARED}`)).body.vcon.subject).toContain(other.markers.subject);
      // Restore this group's copy for the next probes.
      const doc = documentFor(self.markers, SHARED);
      expect((await self.api('/vcons', { method: 'POST', json: doc })).status).toBe(201);
      for (const [k, v] of [
        [self.markers.tagKey, self.markers.tagValue],
        ['status', self.markers.status],
      ]) {
        expect((await self.api(`/vcons/${SHARED}/tags/${k}`, { method: 'PUT', json: { value: v } })).status).toBe(200);
      }
    }
  });
});

/** Arguments for every MCP tool; a tool missing here fails the test, so new tools get probed. */
function toolCalls(self: Group, other: Group): Record<string, Record<string, unknown>[]> {
  const m = self.markers;
  const o = other.markers;
  return {
    get_vcon: [{ uuid: SHARED }, { uuid: SHARED, format: 'summary' }, { uuid: other.ownUuids[0] }],
    list_vcons: [{ limit: 100, format: 'full' }],
    list_changes: [{ limit: 1000 }, { kinds: 'created,deleted' }],
    search_vcons: [{ subject: 'refund', limit: 100 }, { subject: o.subject }, { party_email: o.email }, { tags: { status: o.status } }],
    get_analysis: [{ uuid: SHARED }, { uuid: SHARED, type: o.analysisType }],
    get_attachments: [{ uuid: SHARED }, { uuid: SHARED, purpose: o.purpose }],
    discover_attachment_purposes: [{}],
    discover_attachment_types: [{}],
    discover_analysis_types: [{}],
    get_tags: [{ uuid: SHARED }, { uuid: SHARED, key: o.tagKey }],
    get_unique_tags: [{}],
    search_by_tags: [{ tags: { status: m.status } }, { tags: { status: o.status } }],
    search_vcons_content: [{ q: 'refund', limit: 100 }, { q: o.dialog }],
    search_vcons_semantic: [{ q: 'refund', limit: 100 }, { q: o.summary }],
    search_vcons_hybrid: [{ q: 'refund', limit: 100 }, { q: o.subject }],
    get_database_shape: [{}],
    get_database_stats: [{}],
    get_database_size: [{}],
    get_database_health: [{}],
    analyze_query: [{ query: 'select * from vcons', analyze: true }, { query: `select * from "${other.schema}".vcons` }],
    get_analytics: [{}],
    get_growth_analytics: [{}],
    get_content_analytics: [{}],
    get_tag_analytics: [{}],
    get_attachment_analytics: [{}],
    get_schema: [{}],
    get_examples: [{ type: 'minimal' }],
    get_version: [{}],
    get_health: [{}],
    // Writes last, on the shared uuid; the other group's copy is compared afterwards.
    create_vcon: [{ vcon: documentFor(m, SHARED) }],
    update_vcon: [{ uuid: SHARED, updates: { subject: 'patched by mcp' } }],
    add_dialog: [{ uuid: SHARED, dialog: { type: 'text', start: new Date().toISOString(), parties: [0], body: 'mcp', encoding: 'none' } }],
    add_analysis: [{ uuid: SHARED, analysis: { type: 'note', vendor: 'probe', body: 'mcp', encoding: 'none' } }],
    add_attachment: [{ uuid: SHARED, attachment: { purpose: 'probe', encoding: 'none', body: 'mcp' } }],
    manage_tag: [
      { uuid: SHARED, action: 'set', key: 'probe', value: 'x' },
      { uuid: SHARED, action: 'remove', key: 'probe' },
    ],
    remove_all_tags: [{ uuid: SHARED }],
    delete_vcon: [{ uuid: SHARED }],
  };
}

describe("MCP with the group's own key", () => {
  it("every tool and every resource answers with this group's data only", async () => {
    let calls = 0;
    for (const [self, other] of pairs()) {
      const session = await connectHttp(self.url, self.rwKey);
      try {
        const offered = (await session.client.listTools()).tools.map((t) => t.name).sort();
        expect(offered).toEqual(TOOLS.map((t) => t.name).sort());
        const table = toolCalls(self, other);
        expect(Object.keys(table).sort()).toEqual(offered);

        // Resources first (the writes below delete the shared uuid).
        const fixed = (await session.client.listResources()).resources;
        const templates = (await session.client.listResourceTemplates()).resourceTemplates;
        expect(fixed.length).toBeGreaterThan(0);
        expect(leaksIn(JSON.stringify(fixed), other)).toEqual([]);
        expect(fixed.map((r) => r.uri)).toContain(`vcon://v1/vcons/${SHARED}`);
        const uris = [
          ...fixed.map((r) => r.uri),
          ...templates.map((t) => t.uriTemplate.replace('{uuid}', SHARED)),
          ...templates.filter((t) => t.uriTemplate.includes('{uuid}')).map((t) => t.uriTemplate.replace('{uuid}', other.ownUuids[0])),
        ];
        expect(templates.length).toBeGreaterThanOrEqual(5);
        for (const uri of uris) {
          const text = await session.client.readResource({ uri }).then(
            (r) => JSON.stringify(r),
            (err: Error) => `error: ${err.message}`,
          );
          if (uri.includes(other.ownUuids[0])) expect(text, uri).toMatch(/^error: .*not.found/i);
          else expect(text, uri).not.toMatch(/^error/);
          expect(leaksIn(text, other, uri), `${uri} on ${self.name}`).toEqual([]);
          calls++;
        }
        const before = await snapshot(other);
        const order = [
          ...TOOLS.filter((t) => t.scope === 'read'),
          ...TOOLS.filter((t) => t.scope === 'write' && t.name !== 'delete_vcon'),
          TOOLS.find((t) => t.name === 'delete_vcon')!,
        ];
        for (const tool of order) {
          for (const args of table[tool.name]) {
            const r = await session.call(tool.name, args);
            const text = JSON.stringify(r);
            expect(leaksIn(text, other, JSON.stringify(args)), `${tool.name} ${JSON.stringify(args)} on ${self.name}: ${text.slice(0, 300)}`).toEqual(
              [],
            );
            calls++;
          }
        }
        const found = await session.call('search_vcons_content', { q: self.markers.dialog, limit: 100 });
        expect(found.structuredContent?.count ?? JSON.parse((found.content[0] as { text: string }).text).count).toBe(self.total - 1);
        expect(await snapshot(other)).toEqual(before);
      } finally {
        await session.close();
      }
      // Restore this group's copy.
      expect((await self.api('/vcons', { method: 'POST', json: documentFor(self.markers, SHARED) })).status).toBe(201);
    }
    console.log(`[isolation] ${calls} MCP tool calls and resource reads with the group's own key: no trace of the other group`);
    expect(calls).toBeGreaterThan(80);
  });
});

describe('logs', () => {
  it('carry no document content, no keys, no query strings and nothing of the other group', () => {
    for (const [self, other] of pairs()) {
      const all = self.logLines.join('');
      expect(all).toMatch(/request completed/);
      expect(all).toContain(self.schema);
      const forbidden = [...contentMarkers(self.markers), self.rwKey, self.roKey, other.rwKey, other.roKey];
      expect(forbidden.filter((s) => all.includes(s))).toEqual([]);
      // The other group's uuids do appear: the probes above asked for them by path on this instance.
      const others = [...Object.values(other.markers), other.schema];
      expect(others.filter((s) => all.toLowerCase().includes(s.toLowerCase()))).toEqual([]);
      // The requests above sent emails and words in query strings: none is logged.
      expect(all).not.toMatch(/corp\.example|q=refund|subject=|party_email=|\?/);
    }
  });
});
