// Keyword, semantic and hybrid search latency at concurrency 1 over the HTTP routes. The keyword
// floor is the product's own OR ranking done directly against PostgreSQL (its term statistics and
// ranking query; no corrections, snippets or envelope), via the floor server; semantic and hybrid
// have absolute goals only.
import { SEARCH_QUERIES } from './corpus.js';

import { runSequential } from './load.js';
import { benchAuth } from './processes.js';
import { makeFigure, percentile, type Figure } from './stats.js';

const KINDS = [
  { kind: 'content', label: 'keyword search', goalMs: 30, floor: true },
  { kind: 'semantic', label: 'semantic search', goalMs: 50, floor: false },
  { kind: 'hybrid', label: 'hybrid search', goalMs: 60, floor: false },
] as const;

export async function measureSearch(opts: {
  serverApi: string;
  floorApi: string;
  rounds: number;
  /** Passes over the query set per round. */
  passes: number;
  corpusSize: number;
  quick: boolean;
  /** The query set (default: the one matching this bench's own corpus). */
  queries?: readonly string[];
  /**
   * Filter parameters (e.g. `&tags=…`, a date range) measured as one more figure per route: every
   * query once with each. Filters change the plans (a tag is tested row by row, dates join the
   * scan), so the unfiltered figure alone would hide them.
   */
  filters?: readonly string[];
  log: (msg: string) => void;
}): Promise<{ figures: Figure[]; firstQueryMs: Record<string, number>; emptyResults: Record<string, number>; errors: string[] }> {
  const figures: Figure[] = [];
  const errors: string[] = [];
  const queries = opts.queries ?? SEARCH_QUERIES;
  const firstQueryMs: Record<string, number> = {};
  const emptyResults: Record<string, number> = {};
  const urls = (api: string, kind: string) => {
    const list: string[] = [];
    for (let p = 0; p < opts.passes; p++) for (const q of queries) list.push(`${api}/vcons/search/${kind}?q=${encodeURIComponent(q)}&limit=10`);
    return list;
  };
  for (const k of KINDS) {
    try {
      figures.push(...(await measureKind(k)));
      if (opts.filters?.length) figures.push(await measureFiltered(k, opts.filters));
    } catch (err) {
      errors.push(`${k.label}: ${(err as Error).message.slice(0, 300)}`);
    }
  }
  return { figures, firstQueryMs, emptyResults, errors };

  async function measureFiltered(k: (typeof KINDS)[number], filters: readonly string[]): Promise<Figure> {
    const list = queries.flatMap((q) => filters.map((f) => `${opts.serverApi}/vcons/search/${k.kind}?q=${encodeURIComponent(q)}&limit=10${f}`));
    const bad = await fetch(list[list.length - 1], { headers: benchAuth });
    if (!bad.ok) throw new Error(`filtered GET /vcons/search/${k.kind} answered ${bad.status}: ${(await bad.text()).slice(0, 300)}`);
    const p95: number[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const s = await runSequential(list);
      p95.push(percentile(s.latencies, 95));
      opts.log(`  ${k.kind} filtered round ${r + 1}/${opts.rounds}: p50 ${percentile(s.latencies, 50).toFixed(1)} ms, p95 ${p95[r].toFixed(1)} ms`);
    }
    return makeFigure({
      id: `search.${k.kind}.filtered.p95`,
      label: `${k.label} p95 with a filter (${opts.corpusSize.toLocaleString('en-US')} vCons)`,
      unit: 'ms',
      better: 'lower',
      rounds: p95,
      goal: { kind: 'max', value: k.goalMs },
      note: `${queries.length} queries × ${filters.length} filters: ${filters.map((f) => decodeURIComponent(f.slice(1))).join('; ')}`,
    });
  }

  async function measureKind(k: (typeof KINDS)[number]): Promise<Figure[]> {
    // Cold first query (lazy loads, caches), then one unmeasured pass that also checks the answers.
    firstQueryMs[k.kind] = (await runSequential(urls(opts.serverApi, k.kind).slice(0, 1))).latencies[0];
    let empty = 0;
    for (const q of queries) {
      const res = await fetch(`${opts.serverApi}/vcons/search/${k.kind}?q=${encodeURIComponent(q)}&limit=10`, { headers: benchAuth });
      const body = (await res.json()) as { results?: unknown[] };
      if (!res.ok) throw new Error(`GET /vcons/search/${k.kind} answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
      if (!body.results?.length) empty++;
    }
    emptyResults[k.kind] = empty;
    const p50: number[] = [];
    const p95: number[] = [];
    const f50: number[] = [];
    const f95: number[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const s = await runSequential(urls(opts.serverApi, k.kind));
      p50.push(percentile(s.latencies, 50));
      p95.push(percentile(s.latencies, 95));
      if (k.floor) {
        const f = await runSequential(urls(opts.floorApi, k.kind));
        f50.push(percentile(f.latencies, 50));
        f95.push(percentile(f.latencies, 95));
      }
      opts.log(
        `  ${k.kind} round ${r + 1}/${opts.rounds}: p50 ${p50[r].toFixed(1)} ms, p95 ${p95[r].toFixed(1)} ms${k.floor ? ` (floor p50 ${f50[r].toFixed(1)}, p95 ${f95[r].toFixed(1)})` : ''}`,
      );
    }
    const at = `${opts.corpusSize.toLocaleString('en-US')} vCons`;
    const floorLabel = 'the same OR ranking (term statistics + ranking query of search-repo.ts; no corrections, no snippets) via node:http';
    const note = [`${queries.length} queries`, empty ? `${empty} returned no result` : '', `first query ${firstQueryMs[k.kind].toFixed(0)} ms`]
      .filter(Boolean)
      .join('; ');
    return [
      makeFigure({
        id: `search.${k.kind}.p50`,
        label: `${k.label} p50 (${at})`,
        unit: 'ms',
        better: 'lower',
        rounds: p50,
        floor: k.floor ? { label: floorLabel, rounds: f50 } : undefined,
        note,
      }),
      makeFigure({
        id: `search.${k.kind}.p95`,
        label: `${k.label} p95 (${at})`,
        unit: 'ms',
        better: 'lower',
        rounds: p95,
        floor: k.floor ? { label: floorLabel, rounds: f95 } : undefined,
        goal: { kind: 'max', value: k.goalMs },
        note: opts.corpusSize < 100_000 ? 'the goal is for 100k vCons; this corpus is smaller' : undefined,
      }),
    ];
  }
}
