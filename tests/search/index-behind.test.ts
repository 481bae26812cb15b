// A search that could not see every vCon written before it says so: with indexing paused (the
// instance's worker stopped) and the write's queue row held by another transaction, no indexer can
// take it, and every search (keyword, semantic, hybrid; REST and MCP) answers with
// index: {pending: 1, complete: false} and X-Index-Pending: 1 instead of looking whole.
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectHttp } from '../mcp/helpers.js';
import { databaseUrl } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';
import { KEY, startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

const KINDS = ['content', 'semantic', 'hybrid'] as const;
const search = (kind: string, q: string) => s.api(`/vcons/search/${kind}?q=${encodeURIComponent(q)}`);

describe('a search behind the index says so', () => {
  it('answers pending and complete on every search of REST and MCP, and finds the write once it is indexed', async () => {
    for (const kind of KINDS) {
      const r = await search(kind, 'anything');
      expect(r.body.index, kind).toEqual({ pending: 0, complete: true });
      expect(r.headers.get('x-index-pending'), kind).toBe('0');
    }
    // Indexing paused: the worker is stopped (searches would index themselves) and the queue row
    // is held FOR UPDATE by another transaction, so every claim skips it.
    await s.instance.services.stop();
    const uuid = '0195a1c2-0000-4000-8000-00000000b10c';
    const created = await s.api('/vcons', { method: 'POST', json: { uuid, subject: 'Backlog probe of a refund call' } });
    expect(created.status).toBe(201);
    const admin = postgres(databaseUrl(), { max: 1, onnotice: () => {} });
    let release!: () => void;
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    const tx = admin.begin(async (sql) => {
      const rows = await sql.unsafe(`select vcon_uuid from "${s.schema}".index_queue where vcon_uuid = $1 for update`, [uuid]);
      expect(rows).toHaveLength(1);
      held();
      await new Promise<void>((r) => (release = r));
    });
    try {
      await holding;
      for (const kind of KINDS) {
        const r = await search(kind, 'backlog probe refund');
        expect([r.status, r.body.index], kind).toEqual([200, { pending: 1, complete: false }]);
        expect(r.headers.get('x-index-pending'), kind).toBe('1');
        expect(r.body.results.map((x: { uuid: string }) => x.uuid)).not.toContain(uuid);
      }
      const mcp = await connectHttp(s.instance.url!, KEY);
      try {
        for (const kind of KINDS) {
          const m = await mcp.call(`search_vcons_${kind}`, { q: 'backlog probe refund' });
          expect(m.structuredContent.index, kind).toEqual({ pending: 1, complete: false });
        }
      } finally {
        await mcp.close();
      }
    } finally {
      release?.();
      await tx;
      await admin.end();
    }
    // Released: a search indexes it first (within its 2 s wait; a loaded machine may need another
    // search for it), then every search finds it and says the answer is whole.
    await waitFor(
      async () => (await search('content', 'backlog probe refund')).body.index?.complete,
      60_000,
      100,
      'a search to see the write indexed',
    );
    for (const kind of KINDS) {
      const r = await search(kind, 'backlog probe refund');
      expect(r.body.index, kind).toEqual({ pending: 0, complete: true });
      expect(r.headers.get('x-index-pending'), kind).toBe('0');
      expect(r.body.results.map((x: { uuid: string }) => x.uuid)).toContain(uuid);
    }
  });
});
