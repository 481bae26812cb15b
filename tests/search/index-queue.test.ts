// Search indexing off the request path: a write queues its vCons in its own
// transaction; indexers claim them with SKIP LOCKED; a search first indexes what was acknowledged
// before it; wait_for=search answers after indexing; a queue left by a stopped instance is indexed
// by the next one. Real PostgreSQL, each case on the schema of this file.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { createSearch } from '../../src/search.js';
import { HELP_BUDGET_MS } from '../../src/services/search-indexer.js';
import { createEmbeddingProvider } from '../../src/embeddings/index.js';
import { internalCtx } from '../../src/services/context.js';
import { recordStages, type StageTotals } from '../../src/stages.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { buildVcon } from './builders.js';

const configFor = (schema: string) => parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: schema, LOG_LEVEL: 'silent' });
const silent = { info() {}, warn() {} };

describe('the index queue', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('index_queue');
  });
  afterAll(() => t?.drop());

  const count = async (table: string, uuid: string) => {
    const [r] = await t.sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table} where vcon_uuid = $1::uuid`, [uuid]);
    return r.n;
  };

  /** Services without their background worker, and an indexer of this file's schema to run rounds with. */
  const indexing = async () => {
    const services = createServices(t.sql, configFor(t.schema));
    await services.stop();
    const { indexer } = createSearch({ sql: t.sql, provider: createEmbeddingProvider(configFor(t.schema)), plugins: [], log: silent });
    return { services, indexer };
  };
  /**
   * The group's provider (`inline` overridden), counting embed calls. `hold()` makes each call wait
   * until `release()`; `never()` makes each call wait for good (a remote model that does not answer).
   */
  const gatedProvider = (inline?: boolean) => {
    let calls = 0;
    let gate: Promise<void> | undefined;
    let open = () => {};
    const provider = new Proxy(createEmbeddingProvider(configFor(t.schema)), {
      get(target, key, receiver) {
        if (key === 'inline' && inline !== undefined) return inline;
        if (key !== 'embed') return Reflect.get(target, key, receiver);
        return async (texts: string[]) => {
          calls++;
          await gate;
          return target.embed(texts);
        };
      },
    });
    return {
      provider,
      calls: () => calls,
      hold: () => (gate = new Promise<void>((r) => (open = r))),
      never: () => (gate = new Promise<void>(() => {})),
      release: () => {
        gate = undefined;
        open();
      },
    };
  };
  /** The stored ranking tsvector of a vCon, as text. */
  const tsvOf = async (uuid: string) => {
    const [row] = await t.sql<{ tsv: string }[]>`select tsv::text from vcon_search where vcon_uuid = ${uuid}::uuid`;
    return row.tsv;
  };

  test('a write is queued, not indexed; the next search indexes it first and finds it', async () => {
    const services = createServices(t.sql, configFor(t.schema));
    // No background worker: only the search itself can index the write.
    await services.stop();
    const v = buildVcon({ subject: 'Cracked windscreen', turns: ['A stone cracked the windscreen on the motorway.'] });
    await services.vcons.create(v, internalCtx);
    expect(await count('index_queue', v.uuid as string)).toBe(1);
    expect(await count('search_units', v.uuid as string)).toBe(0);
    expect((await services.search.content({ q: 'windscreen' }, internalCtx)).results.map((r) => r.uuid)).toEqual([v.uuid]);
    expect(await count('index_queue', v.uuid as string)).toBe(0);
    expect(await count('vcon_vectors', v.uuid as string)).toBe(1);
  });

  test('wait_for search answers after indexing; a replaced vCon is indexed from its new document', async () => {
    const services = createServices(t.sql, configFor(t.schema));
    await services.stop();
    const v = buildVcon({ subject: 'Boiler noise', turns: ['The boiler bangs every morning.'] });
    await services.vcons.create(v, internalCtx, { waitFor: 'search' });
    expect(await count('index_queue', v.uuid as string)).toBe(0);
    expect(await count('search_units', v.uuid as string)).toBeGreaterThan(0);
    await services.vcons.create({ ...v, subject: 'Radiator leak', dialog: [] }, internalCtx, { waitFor: 'search' });
    const tsv = await tsvOf(v.uuid as string);
    expect(tsv).toContain('radiat');
    expect(tsv).not.toContain('boiler');
  });

  test('a round over never-indexed vCons deletes nothing; a re-queued one has its rows replaced', async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    const v = buildVcon({ subject: 'Flat tyre', turns: ['The front tyre went flat on the bridge.'] });
    await services.vcons.create(v, internalCtx);
    const statements = async () => {
      const totals: StageTotals = new Map();
      expect(await recordStages(totals, () => indexer.indexRound(100))).toBe(1);
      return [...totals.keys()].filter((k) => k.startsWith('sql:'));
    };
    // Fresh: no deletes and no look at stored vectors, the rows are only written.
    const fresh = await statements();
    expect(fresh.filter((k) => k.startsWith('sql: delete') || k === 'sql: vector sigs')).toEqual([]);
    expect(fresh).toContain('sql: copy vcon_search');
    expect(await count('vcon_vectors', v.uuid as string)).toBe(1);
    // Written again: the old rows go first (one row each, the new text's).
    await services.vcons.create({ ...v, subject: 'Puncture', dialog: [] }, internalCtx);
    const again = await statements();
    expect(again).toEqual(
      expect.arrayContaining(['sql: delete search_units', 'sql: delete vcon_search', 'sql: vector sigs', 'sql: delete vcon_vectors']),
    );
    for (const table of ['search_units', 'vcon_search', 'vcon_vectors', 'vcon_codes']) expect(await count(table, v.uuid as string)).toBe(1);
    const tsv = await tsvOf(v.uuid as string);
    expect(tsv).toContain('punctur');
    expect(tsv).not.toContain('tyre');
  });

  test('a stray ranking row of a vCon without units is replaced, not a key violation on every retry', async () => {
    const { services, indexer } = await indexing();
    const v = buildVcon({ subject: 'Gutter blocked', turns: ['Leaves blocked the gutter again.'] });
    await services.vcons.create(v, internalCtx);
    await t.sql`insert into vcon_search (vcon_uuid, created_at, tsv) values (${v.uuid as string}::uuid, now(), to_tsvector('english', 'stray'))`;
    while ((await indexer.indexRound(100)) > 0);
    expect(await count('index_queue', v.uuid as string)).toBe(0);
    const tsv = await tsvOf(v.uuid as string);
    expect(tsv).toContain('gutter');
    expect(tsv).not.toContain('stray');
  });

  test('a write failing while the round embeds rolls the whole round back: its vCons stay queued, the connection serves the next round', async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    const docs = Array.from({ length: 30 }, (_, i) => buildVcon({ subject: `Leaking tap ${i}`, turns: ['The kitchen tap drips all night.'] }));
    await services.vcons.batch(docs, internalCtx);
    // The ranking rows are written while the vectors are made: that COPY fails.
    await t.sql.unsafe(`
      create function refuse_ranking() returns trigger language plpgsql as $$ begin raise exception 'ranking refused'; end $$;
      create trigger refuse_ranking before insert on vcon_search for each row execute function refuse_ranking()`);
    try {
      await expect(indexer.indexRound(100)).rejects.toThrow('ranking refused');
    } finally {
      await t.sql.unsafe(`drop trigger refuse_ranking on vcon_search; drop function refuse_ranking()`);
    }
    for (const d of docs) {
      expect(await count('index_queue', d.uuid as string)).toBe(1);
      for (const table of ['search_units', 'vcon_search', 'vcon_vectors']) expect(await count(table, d.uuid as string)).toBe(0);
    }
    expect(await indexer.indexRound(100)).toBe(docs.length);
    for (const d of docs)
      for (const table of ['search_units', 'vcon_search', 'vcon_vectors', 'vcon_codes']) expect(await count(table, d.uuid as string)).toBe(1);
  });

  test('a round whose write fails stops embedding at its next slice', async () => {
    const { services } = await indexing();
    const gated = gatedProvider();
    const { indexer } = createSearch({ sql: t.sql, provider: gated.provider, plugins: [], log: silent });
    while ((await indexer.indexRound(500)) > 0);
    const docs = Array.from({ length: 300 }, (_, i) => buildVcon({ subject: `Dripping gutter ${i}`, turns: ['Rain pours over the gutter.'] }));
    await services.vcons.batch(docs.slice(0, 100), internalCtx);
    await services.vcons.batch(docs.slice(100, 200), internalCtx);
    await services.vcons.batch(docs.slice(200), internalCtx);
    await t.sql.unsafe(`
      create function refuse_units() returns trigger language plpgsql as $$ begin raise exception 'units refused'; end $$;
      create trigger refuse_units before insert on search_units for each row execute function refuse_units()`);
    const before = gated.calls();
    // Every embed call waits until the round has failed: the failure is known during the first slice.
    gated.hold();
    const totals: StageTotals = new Map();
    try {
      await expect(recordStages(totals, () => indexer.indexRound(300))).rejects.toThrow('units refused');
    } finally {
      gated.release();
      await t.sql.unsafe(`drop trigger refuse_units on search_units; drop function refuse_units()`);
    }
    // The embedding ran on after the round's rejection: its stage is recorded when it ends.
    await waitFor(() => totals.has('embed'), 60_000, 10, 'the embedding to end');
    // 300 texts are 12 slices; at most the slice in flight when the write failed was embedded.
    expect(gated.calls() - before).toBeLessThanOrEqual(1);
    while ((await indexer.indexRound(500)) > 0);
  });

  test('a search waiting for a background indexer that does not come indexes the rows itself after a short wait', async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    const v = buildVcon({ subject: 'Stuck lift', turns: ['The lift stopped between floors.'] });
    await services.vcons.create(v, internalCtx);
    // help = false: a background indexer is said to run (it does not: a starved thread), so the
    // request first waits for it, then indexes the unclaimed rows itself.
    const done = await Promise.all([indexer.catchUp(30_000, false), indexer.awaitIndexed([v.uuid as string], 30_000, false)]);
    expect(done).toEqual([true, true]);
    // The request's own round indexed it (one request of the process helps at a time).
    expect(indexer.lastHelp()).toMatchObject({ rounds: 1, vcons: 1 });
    expect(await count('index_queue', v.uuid as string)).toBe(0);
    expect(await count('vcon_search', v.uuid as string)).toBe(1);
  });

  test('an indexing round commits without waiting for its WAL flush; a write and a re-embed page wait for it', async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    await t.sql.unsafe(`
      create table commit_modes (tbl text, mode text);
      create function note_commit_mode() returns trigger language plpgsql as $$
        begin insert into commit_modes values (tg_table_name, current_setting('synchronous_commit')); return null; end $$;
      create trigger note_commit_mode after insert on vcon_search for each statement execute function note_commit_mode();
      create trigger note_commit_mode after insert on vcon_vectors for each statement execute function note_commit_mode();
      create trigger note_commit_mode after insert on vcons for each statement execute function note_commit_mode()`);
    try {
      const v = buildVcon({ subject: 'Burst pipe', turns: ['Water everywhere in the hall.'] });
      await services.vcons.create(v, internalCtx);
      expect(await indexer.indexRound(100)).toBe(1);
      // Vectors nothing re-queues: the re-embed tool writes them again, synchronously.
      await t.sql`delete from vcon_vectors where vcon_uuid = ${v.uuid as string}::uuid`;
      expect(await indexer.reembedMissing()).toBe(1);
      const rows = await t.sql<{ tbl: string; mode: string }[]>`select tbl, mode from commit_modes`;
      expect(rows).toEqual([
        { tbl: 'vcons', mode: 'on' },
        { tbl: 'vcon_search', mode: 'off' },
        { tbl: 'vcon_vectors', mode: 'off' },
        { tbl: 'vcon_vectors', mode: 'on' },
      ]);
    } finally {
      await t.sql.unsafe(`
        drop trigger note_commit_mode on vcon_search; drop trigger note_commit_mode on vcon_vectors; drop trigger note_commit_mode on vcons;
        drop function note_commit_mode(); drop table commit_modes`);
    }
  });

  test('a re-embedded vCon gets the vector an indexing round makes (its units read back from search_units)', async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    // Units of every embedded source: stored in (source, idx) order, extracted subject first.
    const v = buildVcon({
      subject: 'Roof leak',
      turns: ['Rain comes through the ceiling of the attic.', 'A roofer can come on Monday.'],
      analysis: [{ type: 'summary', body: 'Leaking roof, roofer booked.' }],
    });
    const uuid = v.uuid as string;
    await services.vcons.create(v, internalCtx);
    expect(await indexer.indexRound(100)).toBe(1);
    const vecOf = async () => (await t.sql<{ vec: Buffer }[]>`select vec from vcon_vectors where vcon_uuid = ${uuid}::uuid`)[0].vec.toString('hex');
    const indexed = await vecOf();
    await t.sql`delete from vcon_vectors where vcon_uuid = ${uuid}::uuid`;
    expect(await indexer.reembedMissing()).toBe(1);
    expect(await vecOf()).toBe(indexed);
    // Its signature is the round's: a tag write's round keeps that vector rather than redo it.
    await services.tags.set(uuid, 'tier', 'gold', internalCtx);
    expect(await indexer.indexRound(100)).toBe(1);
    expect(await vecOf()).toBe(indexed);
  });

  test("a search helps a lagging thread for a bounded time only: a backlog stays the thread's", async () => {
    const { services, indexer } = await indexing();
    while ((await indexer.indexRound(100)) > 0);
    for (let b = 0; b < 20; b++) {
      const docs = Array.from({ length: 100 }, (_, i) => buildVcon({ subject: `Backlog ${b}-${i}`, turns: ['A bulk import of old calls.'] }));
      await services.vcons.batch(docs, internalCtx);
    }
    const queued = async () => (await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`)[0].n;
    expect(await queued()).toBe(2_000);
    // help = false and no thread comes: the search helps until its rounds have taken
    // HELP_BUDGET_MS, then only waits. The rule, read from the indexer's own account: the last
    // round started inside the budget, and the rounds together reached it. (Without the bound the
    // search helps until the deadline: far more than the budget, or the whole backlog.)
    expect(await indexer.catchUp(5_000, false)).toBe(false);
    const help = indexer.lastHelp();
    expect(help.msBeforeLastRound).toBeLessThan(HELP_BUDGET_MS);
    expect(help.ms).toBeGreaterThanOrEqual(HELP_BUDGET_MS);
    expect(help.vcons).toBe(2_000 - (await queued()));
    while ((await indexer.indexRound(100)) > 0);
  });

  test("a search does not help a remote provider's slow indexing past its deadline", async () => {
    const { services } = await indexing();
    // A remote provider (not inline) that never answers.
    const gated = gatedProvider(false);
    gated.never();
    const { indexer } = createSearch({ sql: t.sql, provider: gated.provider, plugins: [], log: silent });
    await services.vcons.create(buildVcon({ subject: 'Slow remote', turns: ['A remote model is slow today.'] }), internalCtx);
    // It answers by its deadline (an embed call it started would never end) and never called the model.
    expect(await indexer.catchUp(1_000, false)).toBe(false);
    expect(gated.calls()).toBe(0);
    // The local indexer indexes it for the tests after this one.
    const local = (await indexing()).indexer;
    while ((await local.indexRound(100)) > 0);
  });

  test('a queue left by a stopped instance is indexed by the next one', async () => {
    const first = createServices(t.sql, configFor(t.schema));
    await first.stop();
    const docs = Array.from({ length: 30 }, (_, i) => buildVcon({ subject: `Left behind ${i}`, turns: [`Queued order number ${i}.`] }));
    await first.vcons.batch(docs, internalCtx);
    const [queued] = await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`;
    expect(queued.n).toBe(30);
    // A new instance: its background worker finds the rows without any write of its own.
    const next = createServices(t.sql, configFor(t.schema));
    try {
      await waitFor(async () => (await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`)[0].n === 0, 60_000, 50, 'an empty queue');
      const [indexed] = await t.sql<
        { n: number }[]
      >`select count(*)::int as n from vcon_search where vcon_uuid = any(${docs.map((d) => d.uuid as string)}::uuid[])`;
      expect(indexed.n).toBe(30);
    } finally {
      await next.stop();
    }
  });

  test('indexers of several instances share the queue (SKIP LOCKED): each vCon is indexed once, with deletes in between', async () => {
    const writer = createServices(t.sql, configFor(t.schema));
    await writer.stop();
    const docs = Array.from({ length: 120 }, (_, i) => buildVcon({ subject: `Shared ${i}`, turns: [`Parcel ${i} went to the wrong depot.`] }));
    await writer.vcons.batch(docs.slice(0, 100), internalCtx);
    await writer.vcons.batch(docs.slice(100), internalCtx);
    const indexers = Array.from({ length: 3 }, () =>
      createSearch({ sql: t.sql, provider: createEmbeddingProvider(configFor(t.schema)), plugins: [], log: silent }),
    );
    const claimed: number[] = [0, 0, 0];
    const rounds = indexers.map(async (s, k) => {
      for (let n; (n = await s.indexer.indexRound(10)) > 0;) claimed[k] += n;
    });
    // Deletes while indexers hold rows: they wait for the round, never deadlock.
    const deletes = docs.slice(0, 10).map((d) => writer.vcons.remove(d.uuid as string, internalCtx));
    await Promise.all([...rounds, ...deletes]);
    expect(claimed.reduce((a, b) => a + b)).toBeGreaterThanOrEqual(110);
    expect(claimed.reduce((a, b) => a + b)).toBeLessThanOrEqual(120);
    const [left] = await t.sql<{ n: number }[]>`select count(*)::int as n from index_queue`;
    expect(left.n).toBe(0);
    const [indexed] = await t.sql<
      { n: number }[]
    >`select count(*)::int as n from vcon_search where vcon_uuid = any(${docs.map((d) => d.uuid as string)}::uuid[])`;
    expect(indexed.n).toBe(110);
  });
});

describe('over HTTP', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s?.close());

  test('?wait_for=search, a bad wait_for, and the lag in /health', async () => {
    const v = buildVcon({ subject: 'Missing invoice', turns: ['The invoice for March never arrived.'] });
    const ok = await s.api('/vcons?wait_for=search', { method: 'POST', json: v });
    expect(ok.status).toBe(201);
    const [q] = await s.instance.sql<{ n: number }[]>`select count(*)::int as n from index_queue where vcon_uuid = ${v.uuid as string}::uuid`;
    expect(q.n).toBe(0);
    const bad = await s.api('/vcons/batch?wait_for=never', { method: 'POST', json: [buildVcon({ subject: 'x', turns: ['y'] })] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'invalid_parameter' });
    expect(JSON.stringify(bad.body)).toContain('wait_for');
    // Without wait_for and without a search, the server's index thread indexes it.
    const later = buildVcon({ subject: 'Lost keycard', turns: ['My hotel keycard stopped working.'] });
    expect((await s.api('/vcons', { method: 'POST', json: later })).status).toBe(201);
    await waitFor(
      async () => (await s.instance.sql<{ n: number }[]>`select count(*)::int as n from index_queue`)[0].n === 0,
      60_000,
      50,
      'an empty queue',
    );
    const [indexed] = await s.instance.sql<
      { n: number }[]
    >`select count(*)::int as n from vcon_search where vcon_uuid = ${later.uuid as string}::uuid`;
    expect(indexed.n).toBe(1);
    const health = await s.api('/health', { key: null });
    expect(health.body.index).toEqual({
      pending: expect.any(Number),
      lag_s: expect.any(Number),
      failing: 0,
      thread: expect.any(Boolean),
      thread_out_of_heap: 0,
      thread_failed: false,
    });
  });
});
