// REST/MCP parity: every service operation is reachable from
// both surfaces, or is listed here as deliberately one-sided with the reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOLS } from '../../src/mcp/tools.js';
import { KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from './helpers.js';

type Entry = { rest: string[] } | { restOnly: string; rest: string[] } | { internal: string };

const U = '00000000-0000-4000-8000-0000000000f1';

/** Every operation of every service, with the REST routes that reach it. */
const PARITY: Record<string, Entry> = {
  'health.check': { rest: ['GET /health'] },
  version: { rest: ['GET /version'] },
  'vcons.create': { rest: ['POST /vcons'] },
  'vcons.batch': {
    restOnly: 'batch ingestion is REST-only by design (bulk loads go through REST and vcon-launch import)',
    rest: ['POST /vcons/batch'],
  },
  'vcons.get': { rest: [`GET /vcons/${U}`] },
  'vcons.list': { rest: ['GET /vcons'] },
  'vcons.exportPage': { restOnly: 'the NDJSON export stream; MCP reads vCons with list_vcons and get_vcon', rest: ['GET /vcons/export'] },
  'changes.page': { rest: ['GET /changes'] },
  'changes.openStream': { restOnly: 'the Server-Sent Events stream; MCP reads the log with list_changes', rest: ['GET /changes/stream?kinds=x'] },
  'changes.follow': { internal: 'the loop of an open stream, behind GET /changes/stream' },
  'changes.start': { internal: 'starts background pruning' },
  'changes.prune': { internal: 'background pruning of entries past CHANGES_RETENTION_HOURS' },
  'changes.stop': { internal: 'ends streams and pruning at shutdown' },
  'changes.stats': { internal: 'open streams and events sent, for /metrics' },
  'changes.horizonNow': { internal: 'the start cursor of MCP subscriptions' },
  'changes.settledHorizon': { internal: 'the start cursor of a new webhook endpoint' },
  'changes.watch': { internal: 'wakes the webhook dispatcher when the log moves' },
  'webhooks.list': { restOnly: "webhook endpoints are the operator's configuration, managed over REST", rest: ['GET /webhooks'] },
  'webhooks.failed': { restOnly: "webhook endpoints are the operator's configuration, managed over REST", rest: ['GET /webhooks/failed'] },
  'webhooks.replayDelivery': {
    restOnly: "webhook endpoints are the operator's configuration, managed over REST",
    rest: [`POST /webhooks/failed/msg_${'0'.repeat(32)}/replay`],
  },
  'webhooks.replayEndpoint': {
    restOnly: "webhook endpoints are the operator's configuration, managed over REST",
    rest: [`POST /webhooks/ep_${'0'.repeat(12)}/replay`],
  },
  'webhooks.enable': {
    restOnly: "webhook endpoints are the operator's configuration, managed over REST",
    rest: [`POST /webhooks/ep_${'0'.repeat(12)}/enable`],
  },
  'webhooks.health': { internal: 'endpoint states reported by /health (webhooks)' },
  'webhooks.start': { internal: 'registers the endpoints and starts sending' },
  'webhooks.ready': { internal: 'awaited by the server before it listens' },
  'webhooks.wake': { internal: 'looks for due deliveries now (after a replay, in tests after moving the clock)' },
  'webhooks.stop': { internal: 'stops sending at shutdown' },
  'vcons.update': { rest: [`PATCH /vcons/${U}`] },
  'vcons.remove': { rest: [`DELETE /vcons/${U}`] },
  'vcons.append': { rest: [`POST /vcons/${U}/dialog`, `POST /vcons/${U}/analysis`, `POST /vcons/${U}/attachments`] },
  'vcons.getAnalysis': { rest: [`GET /vcons/${U}/analysis`] },
  'vcons.getAttachments': { rest: [`GET /vcons/${U}/attachments`] },
  'vcons.modify': { internal: 'locked read-modify-write used by the tag service' },
  'vcons.readDoc': { internal: 'hooked document read used by the other read operations' },
  'vcons.getStored': { internal: 'the stored bytes of a document for GET /vcons/:uuid when no read hook is loaded (get_vcon uses get)' },
  'tags.get': { rest: [`GET /vcons/${U}/tags`] },
  'tags.getOne': { rest: [`GET /vcons/${U}/tags?key=k`] },
  'tags.set': { rest: [`PUT /vcons/${U}/tags/k`] },
  'tags.remove': { rest: [`DELETE /vcons/${U}/tags/k`] },
  'tags.removeAll': { rest: [`DELETE /vcons/${U}/tags`] },
  'tags.unique': { rest: ['GET /tags'] },
  'tags.search': { rest: ['GET /tags/search?tags=%7B%22k%22%3A%22v%22%7D'] },
  'discovery.values': { rest: ['GET /discovery/attachments/purposes', 'GET /discovery/attachments/types', 'GET /discovery/analysis/types'] },
  'meta.schema': { rest: ['GET /schema'] },
  'meta.example': { rest: ['GET /examples/minimal'] },
  'meta.exampleTypes': { internal: "the list of example names, carried in get_examples' schema and example_not_found" },
  'search.content': { rest: ['GET /vcons/search/content?q=x'] },
  'search.semantic': { rest: ['GET /vcons/search/semantic?q=x'] },
  'search.hybrid': { rest: ['GET /vcons/search/hybrid?q=x'] },
  'search.status': { internal: 'embedding space and queue status for the CLI (vcon-launch)' },
  'database.shape': { rest: ['GET /database/shape'] },
  'database.stats': { rest: ['GET /database/stats'] },
  'database.size': { rest: ['GET /database/size'] },
  'database.health': { rest: ['GET /database/health'] },
  'database.analyze': { rest: ['POST /database/analyze'] },
  'admission.acquire': { internal: 'turns of the database pool, taken by the REST gate and around every MCP call' },
  'admission.run': { internal: 'turns of the database pool, taken by the REST gate and around every MCP call' },
  'admission.saturated': { internal: 'pool state read by /health (busy vs unreachable)' },
  'admission.stats': { internal: 'pool state reported by /health (pool.size, in_use, waiting)' },
  'bodies.reserve': { internal: 'bytes of request bodies in flight, counted by the REST and MCP body gates before a body is read' },
  'bodies.stats': { internal: 'bodies in flight reported by /health (bodies.limit, in_flight, peak, refused)' },
  'analytics.all': { rest: ['GET /analytics'] },
  'analytics.growth': { rest: ['GET /analytics/growth'] },
  'analytics.content': { rest: ['GET /analytics/content'] },
  'analytics.tags': { rest: ['GET /analytics/tags'] },
  'analytics.attachments': { rest: ['GET /analytics/attachments'] },
};

let s: TestServer;
let mcp: HttpSession;
beforeAll(async () => {
  s = await startTestServer();
  mcp = await connectHttp(s.instance.url!, KEY);
});
afterAll(async () => {
  await mcp?.close();
  await s?.close();
});

/** Every function of every service group of a real instance, as `group.method`. */
function serviceOperations(): string[] {
  const ops: string[] = ['version'];
  for (const [group, svc] of Object.entries(s.instance.services)) {
    if (group === 'plugins' || !svc || typeof svc !== 'object') continue;
    for (const [name, fn] of Object.entries(svc as Record<string, unknown>)) if (typeof fn === 'function') ops.push(`${group}.${name}`);
  }
  return ops.sort();
}

describe('REST/MCP parity', () => {
  it('classifies every service operation', () => {
    const unlisted = serviceOperations().filter((op) => !(op in PARITY));
    expect(unlisted, 'add these to PARITY (REST route and MCP tool, or a reason to be one-sided)').toEqual([]);
  });

  it('reaches every two-sided operation through a tool the read-write session is offered', async () => {
    const offered = new Set((await mcp.client.listTools()).tools.map((t) => t.name));
    for (const op of serviceOperations()) {
      const entry = PARITY[op];
      const tools = TOOLS.filter((t) => t.operations.includes(op));
      if ('internal' in entry || 'restOnly' in entry) {
        expect(tools, `${op} is one-sided but has a tool`).toEqual([]);
        continue;
      }
      expect(tools.length, `${op} has no MCP tool`).toBeGreaterThan(0);
      for (const t of tools) expect(offered.has(t.name), `${t.name} (${op}) is not offered`).toBe(true);
    }
  });

  it('reaches every REST-side operation through a route', async () => {
    for (const op of serviceOperations()) {
      const entry = PARITY[op];
      if ('internal' in entry) continue;
      for (const route of entry.rest) {
        const [method, path] = route.split(' ');
        const body = method === 'POST' || method === 'PUT' || method === 'PATCH' ? { json: path.endsWith('batch') ? [{}] : {} } : {};
        const r = await s.api(path, { method, ...body });
        expect(r.status, `${route} (${op})`).not.toBe(405);
        expect(r.body?.error, `${route} (${op})`).not.toBe('route_not_found');
      }
    }
  });

  it('has no tool without a service operation behind it', () => {
    for (const t of TOOLS) for (const op of t.operations) expect(PARITY[op], `${t.name} → ${op}`).toBeDefined();
    expect(TOOLS.map((t) => t.name)).not.toContain('create_vcons_batch');
  });
});
