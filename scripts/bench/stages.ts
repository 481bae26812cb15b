// Where a write's time goes: one create and one 100-vCon batch broken into stages
// (parse, validate, derive, embed, each SQL statement, commit) with wall and CPU time, measured
// in-process through the services with a stage recorder (src/stages.ts), one write at a time.
import { randomBytes, randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { createSql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSearch } from '../../src/search.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { recordStages, stageSync, type StageTotals } from '../../src/stages.js';
import { internalCtx as ctx } from '../../src/services/context.js';
import { generateVcon } from './corpus.js';
import { BATCH } from './ingest.js';

export interface StageRow {
  stage: string;
  calls_per_op: number;
  wall_ms: number;
  cpu_ms: number;
}

export interface StageBreakdown {
  what: string;
  ops: number;
  total: { wall_ms: number; cpu_ms: number };
  stages: StageRow[];
}

function rows(totals: StageTotals, ops: number): StageRow[] {
  return [...totals]
    .filter(([name]) => name !== 'total')
    .map(([name, t]) => ({ stage: name, calls_per_op: t.calls / ops, wall_ms: t.wall_ms / ops, cpu_ms: t.cpu_ms / ops }))
    .sort((a, b) => b.wall_ms - a.wall_ms);
}

/** Measures `creates` single creates and `batches` batches of 100, after a warm-up of each. */
export async function measureStages(opts: { databaseUrl: string; seed: number; creates: number; batches: number }): Promise<StageBreakdown[]> {
  const schema = `bench_stages_${randomBytes(4).toString('hex')}`;
  const sql = createSql({ url: opts.databaseUrl, schema, max: 4 });
  const config = parseConfig({ DATABASE_URL: opts.databaseUrl, SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent' });
  const services = createServices(sql, config);
  let n = 0;
  const text = () => {
    const doc = generateVcon(opts.seed + 7, n++);
    doc.uuid = randomUUID();
    return JSON.stringify(doc);
  };
  const batchText = () => JSON.stringify(Array.from({ length: BATCH }, () => JSON.parse(text())));
  const { indexer } = createSearch({ sql, provider: createEmbeddingProvider(config), plugins: [], log: { info() {}, warn() {} } });
  try {
    await migrate(sql, schema);
    // The writes alone: no background indexing in this process while they are timed.
    await services.stop();
    // Warm-up: word vectors loaded, statements prepared, JIT settled.
    for (let i = 0; i < 20; i++) await services.vcons.create(JSON.parse(text()), ctx);
    await services.vcons.batch(JSON.parse(batchText()), ctx);
    const run = async (what: string, ops: number, body: () => string, write: (doc: unknown) => Promise<unknown>): Promise<StageBreakdown> => {
      const totals: StageTotals = new Map();
      for (let i = 0; i < ops; i++) {
        const t = body();
        await recordStages(totals, async () => {
          const t0 = performance.now();
          const c0 = process.cpuUsage();
          const doc = stageSync('parse', () => JSON.parse(t));
          await write(doc);
          const c = process.cpuUsage(c0);
          const total = totals.get('total') ?? { calls: 0, wall_ms: 0, cpu_ms: 0 };
          total.calls++;
          total.wall_ms += performance.now() - t0;
          total.cpu_ms += (c.user + c.system) / 1000;
          totals.set('total', total);
        });
      }
      const total = totals.get('total')!;
      return { what, ops, total: { wall_ms: total.wall_ms / ops, cpu_ms: total.cpu_ms / ops }, stages: rows(totals, ops) };
    };
    await indexer.catchUp(600_000);
    const out = [
      await run('one create (service.create)', opts.creates, text, (d) => services.vcons.create(d, ctx)),
      await run(`one batch of ${BATCH} (service.batch)`, opts.batches, batchText, (d) => services.vcons.batch(d, ctx)),
    ];
    // Indexing of what the writes queued, off the request path: rounds of up to 100 vCons.
    const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from index_queue`;
    const rounds = Math.floor(n / 100);
    out.push(
      await run(
        `one indexing round of 100 queued vCons (indexer.indexRound, in the background)`,
        rounds,
        () => 'null',
        () => indexer.indexRound(100),
      ),
    );
    return out;
  } finally {
    await services.stop();
    await sql.end({ timeout: 2 });
    const admin = postgres(opts.databaseUrl, { max: 1, onnotice: () => undefined });
    await admin.unsafe(`drop schema if exists "${schema}" cascade`);
    await admin.end();
  }
}

const f = (v: number) => (v >= 10 ? v.toFixed(1) : v.toFixed(2));

export function stagesMarkdown(all: StageBreakdown[]): string {
  const out = ['## Write stages (in-process, one write at a time; CPU is this process, not PostgreSQL)', ''];
  for (const b of all) {
    out.push(`### ${b.what}: ${f(b.total.wall_ms)} ms wall, ${f(b.total.cpu_ms)} ms CPU (mean of ${b.ops})`, '');
    out.push('| stage | calls | wall ms | CPU ms |', '|---|---:|---:|---:|');
    for (const r of b.stages) out.push(`| ${r.stage} | ${f(r.calls_per_op)} | ${f(r.wall_ms)} | ${f(r.cpu_ms)} |`);
    out.push('');
  }
  return out.join('\n');
}
