// The floor: the least a server can do for each measured route, a bare node:http server over
// postgres.js running the same queries as the real one (same pool size, same rows), with no
// framework, validation, hooks, logging or derived writes. Started by the bench as a child.
import http from 'node:http';
import postgres from 'postgres';
import { createSearchRepo } from '../../src/db/search-repo.js';
import type { Sql } from '../../src/db/client.js';
import { createKeywordRanker } from '../../src/services/search-keyword.js';

const sql = postgres(process.env.DATABASE_URL!, { max: 10, connection: { search_path: process.env.FLOOR_SEARCH_PATH! } });
const searchRepo = createSearchRepo(sql as unknown as Sql);
/** No spelling provider: the floor corrects nothing. */
const keyword = createKeywordRanker({ repo: searchRepo, provider: {} });
const send = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};
const readBody = async <T = { uuid: string }>(req: http.IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as T;
};

const routes: [RegExp, string, (m: RegExpExecArray, u: URL, req: http.IncomingMessage) => Promise<unknown>][] = [
  [/^\/health$/, 'GET', async () => ({ success: true, database: (await sql`select 1 as ok`)[0].ok === 1 })],
  [
    /^\/vcons\/([0-9a-f-]{36})$/,
    'GET',
    async (m) => ({ success: true, vcon: (await sql`select doc from vcons where uuid = ${m[1]}::uuid`)[0]?.doc }),
  ],
  [
    /^\/vcons$/,
    'POST',
    async (_m, _u, req) => {
      const doc = await readBody(req);
      await sql`insert into floor_docs ${sql({ uuid: doc.uuid, doc: sql.json(doc as never) })} on conflict (uuid) do update set doc = excluded.doc`;
      return { success: true, uuid: doc.uuid, created: true };
    },
  ],
  [
    // The batch floor over HTTP: the body read and parsed, the direct floor's insert (bench ingest).
    /^\/vcons\/batch$/,
    'POST',
    async (_m, _u, req) => {
      const docs = await readBody<{ uuid: string }[]>(req);
      await sql`insert into floor_http_docs ${sql(docs.map((d) => ({ uuid: d.uuid, doc: sql.json(d as never) })))}`;
      return { success: true, total: docs.length };
    },
  ],
  [
    /^\/vcons$/,
    'GET',
    async (_m, u) => {
      const limit = Number(u.searchParams.get('limit') ?? 10);
      const rows = await sql`select uuid::text, subject, created_at, updated_at, parties_count, dialog_count, analysis_count, attachments_count
      from vcons order by created_at desc, uuid desc limit ${limit + 1} offset ${Number(u.searchParams.get('offset') ?? 0)}`;
      return { success: true, data: rows.slice(0, limit), pagination: { limit, has_more: rows.length > limit } };
    },
  ],
  [
    /^\/tags\/search$/,
    'GET',
    async (_m, u) => {
      const [[k, v]] = Object.entries(JSON.parse(u.searchParams.get('tags')!) as Record<string, string>);
      const rows = await sql`select v.uuid::text from vcons v where v.tags_updated_at is not null
      and exists (select 1 from vcon_tags t where t.vcon_uuid = v.uuid and t.key = ${k} and t.value = ${v})
      order by v.tags_updated_at desc, v.uuid desc limit 51`;
      return { success: true, uuids: rows.map((r) => r.uuid) };
    },
  ],
  [
    /^\/discovery\/analysis\/types$/,
    'GET',
    async () => ({
      success: true,
      total_vcons: (await sql`select count(*)::int as n from vcons`)[0].n,
      values:
        await sql`select type as value, count(distinct vcon_uuid)::int as count from vcon_analyses where type is not null group by type order by count desc, value`,
    }),
  ],
  [
    /^\/vcons\/search\/content$/,
    'GET',
    // The product's own ranking (OR over the words, BM25-like weights, bounded candidates): the
    // same term statistics and ranking query, without corrections, snippets or the envelope.
    async (_m, u) => {
      const plan = await keyword.plan(u.searchParams.get('q')!);
      return { success: true, results: plan.terms.length ? await searchRepo.keyword(plan.terms, {}, 10, 0, keyword.cap) : [] };
    },
  ],
];

const server = http.createServer((req, res) => {
  const u = new URL(req.url!, 'http://floor');
  for (const [re, method, handle] of routes) {
    const m = req.method === method ? re.exec(u.pathname) : null;
    if (m)
      return void handle(m, u, req).then(
        (body) => send(res, 200, body),
        (err: Error) => send(res, 500, { error: err.message }),
      );
  }
  send(res, 404, { error: 'route_not_found' });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.send?.({ type: 'ready', port, url: `http://127.0.0.1:${port}` });
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void sql.end({ timeout: 2 }).then(() => process.exit(0));
});
