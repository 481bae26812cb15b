// Search quality on the development set (kept outside this repository, search-dev/a): loads its
// conversations into a throwaway schema in-process, runs its queries through the three searches and
// returns MRR (top 10) per route and per query type. `npm run bench:devset`; the bench report
// prints the same lines in its search section.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { parseConfig } from '../../src/config.js';
import { createSql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { createServices } from '../../src/main.js';
import { internalCtx } from '../../src/services/context.js';
import { packageRoot } from '../../src/paths.js';

/** Where the development set lives: DEVSET_DIR, or shared/search-dev/a beside the checkout (or one level up, for worktrees). */
export const devSetDir = () =>
  process.env.DEVSET_DIR ??
  [path.resolve(packageRoot, '..'), path.resolve(packageRoot, '..', '..')]
    .map((d) => path.join(d, 'shared', 'search-dev', 'a'))
    .find((d) => existsSync(path.join(d, 'queries.json'))) ??
  path.resolve(packageRoot, '..', 'shared', 'search-dev', 'a');

export interface RouteQuality {
  shape: Shape;
  route: 'content' | 'semantic' | 'hybrid';
  mrr: number;
  r1: number;
  empty: number;
  queries: number;
  types: Record<string, number>;
}

export type Shape = 'chat' | 'call' | 'email';

type Conv = {
  id: string;
  text: string;
  vcon: { uuid: string; created_at: string; parties: { name?: string }[]; dialog: unknown[]; attachments?: unknown[] };
};

/**
 * The same conversation in another shape real producers send: a call (a recording dialog and its
 * transcript as a JSON analysis) or an email (one message/rfc822 dialog, quoted-printable body).
 */
function reshape(c: Conv, shape: Shape): Conv['vcon'] {
  const v = c.vcon;
  if (shape === 'chat') return v;
  const [customer, agent] = v.parties.map((p) => p.name ?? 'Someone');
  if (shape === 'call') {
    const { dialog: _d, ...rest } = v;
    return {
      ...rest,
      dialog: [
        {
          type: 'recording',
          start: v.created_at,
          parties: [0, 1],
          mediatype: 'audio/x-wav',
          url: `https://example.com/rec/${c.id}.wav`,
          duration: 120,
        },
      ],
      analysis: [{ type: 'transcript', dialog: 0, vendor: 'devset', encoding: 'json', body: JSON.stringify({ transcript: c.text }) }],
    } as Conv['vcon'];
  }
  const qp = c.text.replace(/=/g, '=3D').replace(/\n/g, '\r\n');
  const body = [
    `From: ${customer} <customer@example.com>`,
    `To: ${agent} <support@example.com>`,
    'Subject: Re: your request',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qp,
    '',
  ].join('\r\n');
  return { ...v, dialog: [{ type: 'text', start: v.created_at, parties: [0, 1], mediatype: 'message/rfc822', encoding: 'none', body }] };
}

export async function measureDevSet(databaseUrl: string, dir = devSetDir(), shape: Shape = 'chat'): Promise<RouteQuality[]> {
  if (!existsSync(path.join(dir, 'queries.json'))) throw new Error(`no development set at ${dir}`);
  const convs = (JSON.parse(readFileSync(path.join(dir, 'conversations.json'), 'utf8')) as Conv[]).map((c) => ({ ...c, vcon: reshape(c, shape) }));
  const queries = JSON.parse(readFileSync(path.join(dir, 'queries.json'), 'utf8')) as { type: string; target: string; query: string }[];
  const schema = `devset_${randomBytes(4).toString('hex')}`;
  const sql = createSql({ url: databaseUrl, schema, max: 4 });
  const services = createServices(sql, parseConfig({ DATABASE_URL: databaseUrl, SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent' }));
  try {
    await migrate(sql, schema);
    for (let i = 0; i < convs.length; i += 100) {
      const r = await services.vcons.batch(
        convs.slice(i, i + 100).map((c) => c.vcon),
        internalCtx,
      );
      const bad = r.results.find((x) => x.status === 400);
      if (bad) throw new Error(`the ${shape} shape of item ${i + bad.index} was refused: ${bad.message}`);
    }
    const uuidOf = new Map(convs.map((c) => [c.id, c.vcon.uuid.toLowerCase()]));
    const out: RouteQuality[] = [];
    for (const route of ['content', 'semantic', 'hybrid'] as const) {
      let mrr = 0;
      let r1 = 0;
      let empty = 0;
      const by = new Map<string, { n: number; m: number }>();
      for (const q of queries) {
        const r = await services.search[route]({ q: q.query, limit: 10 }, internalCtx);
        const rank = r.results.findIndex((x) => x.uuid.toLowerCase() === uuidOf.get(q.target)) + 1;
        if (r.results.length === 0) empty++;
        if (rank === 1) r1++;
        const rr = rank > 0 ? 1 / rank : 0;
        mrr += rr;
        const t = by.get(q.type) ?? { n: 0, m: 0 };
        t.n++;
        t.m += rr;
        by.set(q.type, t);
      }
      const round = (x: number) => Math.round(x * 1000) / 1000;
      out.push({
        shape,
        route,
        mrr: round(mrr / queries.length),
        r1: round(r1 / queries.length),
        empty,
        queries: queries.length,
        types: Object.fromEntries([...by].map(([k, v]) => [k, round(v.m / v.n)])),
      });
    }
    return out;
  } finally {
    await services.stop();
    await sql.end({ timeout: 5 });
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await admin.end();
  }
}

/** One line per route, for people. */
export const formatDevSet = (rows: RouteQuality[]) =>
  rows.map(
    (r) =>
      `dev set (${r.shape}) ${r.route.padEnd(8)} MRR ${r.mrr.toFixed(3)}  R@1 ${r.r1.toFixed(3)}  ` +
      `${Object.entries(r.types)
        .map(([k, v]) => `${k} ${v.toFixed(3)}`)
        .join('  ')}  no result ${r.empty}/${r.queries}`,
  );

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!url) {
    process.stderr.write('bench:devset: set TEST_DATABASE_URL (or DATABASE_URL) to a PostgreSQL it may create a schema in\n');
    process.exit(2);
  }
  for (const shape of ['chat', 'call', 'email'] as const) {
    for (const line of formatDevSet(await measureDevSet(url, devSetDir(), shape))) process.stdout.write(`${line}\n`);
  }
}
