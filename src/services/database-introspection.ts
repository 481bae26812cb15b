// Introspection of this instance's schema (GET /database/shape, stats, size, health): shape,
// statistics, sizes and health. Figures come from the catalog of this schema only; thresholds
// below turn them into alerts and recommendations.
import type { RequestCtx } from './context.js';
import type { IndexInfo, IndexStats, IntrospectionRepo, TableInfo, TableStats } from '../db/introspection-repo.js';

const DEAD_RATIO_WARN = 0.2;
const DEAD_ROWS_WARN = 1_000;
const DEAD_RATIO_CRITICAL = 0.5;
const DEAD_ROWS_CRITICAL = 10_000;
const STALE_ANALYZE_RATIO = 0.2;
const UNUSED_INDEX_WARN_BYTES = 10 * 1024 * 1024;
const CONNECTIONS_WARN = 0.8;
const CONNECTIONS_CRITICAL = 0.95;
const LONG_RUNNING_CRITICAL_S = 300;
const SEQ_SCAN_ROWS = 10_000;
const TOAST_ADVICE_BYTES = 1024 * 1024;

/** `info` never changes the health status; `warning` and `critical` do. */
export type Severity = 'info' | 'warning' | 'critical';

/** An alert or recommendation computed from the figures of the same answer. */
export interface Advice {
  severity: Severity;
  code: string;
  message: string;
  table?: string;
  index?: string;
  /** A statement an operator may run (never run by the service). */
  action?: string;
}

/** What introspection needs: the schema-bound catalog repo. */
export interface IntrospectionDeps {
  repo: IntrospectionRepo;
  /** A query of this application running longer than this is reported by health. */
  longRunningS?: number;
  now?: () => Date;
}

const ESTIMATE_NOTES = {
  row_estimate: 'pg_class.reltuples: the planner estimate, refreshed by ANALYZE and autovacuum; null until the table is first analyzed',
  sizes:
    'exact on-disk sizes (pg_total_relation_size, pg_table_size, pg_relation_size, pg_indexes_size), including free space VACUUM has not yet reclaimed',
  counters:
    'pg_stat_user_tables / pg_stat_user_indexes / pg_statio_*: cumulative counters since stats_since, flushed asynchronously by each backend (they can lag by about a second); n_live_tup and n_dead_tup are estimates',
  cache_hit_ratio: 'shared_buffers hits over hits plus reads; a read may still be served by the operating system cache',
};

/** Bytes as pg_size_pretty writes them. */
export function prettyBytes(n: number): string {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 10 * 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Math.round(v)} ${units[i]}`;
}

type TableSizes = Pick<TableInfo, 'total_bytes' | 'table_bytes' | 'heap_bytes' | 'toast_bytes' | 'index_bytes'>;

/** A table's sizes as both shape and size report them. */
const sizesOf = (t: TableSizes) => ({
  total_bytes: t.total_bytes,
  table_bytes: t.table_bytes,
  heap_bytes: t.heap_bytes,
  toast_bytes: t.toast_bytes,
  index_bytes: t.index_bytes,
  total_pretty: prettyBytes(t.total_bytes),
});

const ratio = (part: number, whole: number): number | null => (whole > 0 ? Math.round((part / whole) * 10_000) / 10_000 : null);
const quoteIdent = (name: string) => (/^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`);

function statusOf(alerts: Advice[]): 'ok' | 'warning' | 'critical' {
  if (alerts.some((a) => a.severity === 'critical')) return 'critical';
  if (alerts.some((a) => a.severity === 'warning')) return 'warning';
  return 'ok';
}

/** Introspection of this instance's schema; the figures of every answer are computed, never fixed. */
export function createIntrospection(deps: IntrospectionDeps) {
  const { repo } = deps;
  const longRunningS = deps.longRunningS ?? 60;
  const now = deps.now ?? (() => new Date());
  const header = () => ({ schema: repo.schema, generated_at: now().toISOString() });

  function tableAdvice(stats: TableStats[]): Advice[] {
    const out: Advice[] = [];
    for (const t of stats) {
      const total = t.n_live_tup + t.n_dead_tup;
      const dead = ratio(t.n_dead_tup, total) ?? 0;
      if (dead >= DEAD_RATIO_CRITICAL && t.n_dead_tup >= DEAD_ROWS_CRITICAL) {
        out.push({
          severity: 'critical',
          code: 'table_bloat',
          table: t.table,
          action: `VACUUM (ANALYZE) ${quoteIdent(t.table)}`,
          message: `${t.table}: ${t.n_dead_tup} dead rows (${Math.round(dead * 100)}% of its rows); vacuum it now`,
        });
      } else if (dead >= DEAD_RATIO_WARN && t.n_dead_tup >= DEAD_ROWS_WARN) {
        out.push({
          severity: 'warning',
          code: 'table_bloat',
          table: t.table,
          action: `VACUUM (ANALYZE) ${quoteIdent(t.table)}`,
          message: `${t.table}: ${t.n_dead_tup} dead rows (${Math.round(dead * 100)}% of its rows); vacuum it, or lower its autovacuum_vacuum_scale_factor`,
        });
      }
      const analyzed = t.last_analyze ?? t.last_autoanalyze;
      if (!analyzed && t.n_mod_since_analyze > 0) {
        out.push({
          severity: 'info',
          code: 'never_analyzed',
          table: t.table,
          action: `ANALYZE ${quoteIdent(t.table)}`,
          message: `${t.table} has never been analyzed (${t.n_mod_since_analyze} rows changed): its row estimate is unknown and plans are guesses`,
        });
      } else if (analyzed && t.reltuples && t.n_mod_since_analyze > Math.max(DEAD_ROWS_WARN, t.reltuples * STALE_ANALYZE_RATIO)) {
        out.push({
          severity: 'info',
          code: 'stale_statistics',
          table: t.table,
          action: `ANALYZE ${quoteIdent(t.table)}`,
          message: `${t.table}: ${t.n_mod_since_analyze} rows changed since the last analyze (about ${Math.round((t.n_mod_since_analyze / t.reltuples) * 100)}% of the table)`,
        });
      }
    }
    return out;
  }

  /** Identical indexes, and non-unique btree indexes whose keys lead another index's keys. */
  function findDuplicates(indexes: IndexInfo[]) {
    const duplicate: { table: string; indexes: string[]; definition: string; bytes: number }[] = [];
    const redundant: { table: string; index: string; covered_by: string; bytes: number }[] = [];
    const groups = new Map<string, IndexInfo[]>();
    for (const ix of indexes) {
      const key = [ix.table, ix.method, ix.keys.join(' '), ix.opclasses, ix.expression ?? '', ix.predicate ?? ''].join('\u0000');
      groups.set(key, [...(groups.get(key) ?? []), ix]);
    }
    for (const g of groups.values()) {
      if (g.length > 1) {
        duplicate.push({
          table: g[0].table,
          indexes: g.map((i) => i.name),
          definition: g[0].columns.join(', '),
          bytes: g.slice(1).reduce((s, i) => s + i.bytes, 0),
        });
      }
    }
    const plain = indexes.filter((i) => i.method === 'btree' && !i.expression && !i.predicate && !i.keys.includes(0));
    for (const a of plain) {
      if (a.unique || a.constraint) continue;
      const b = plain.find((o) => o !== a && o.table === a.table && o.keys.length > a.keys.length && a.keys.every((k, j) => o.keys[j] === k));
      if (b) redundant.push({ table: a.table, index: a.name, covered_by: b.name, bytes: a.bytes });
    }
    return { duplicate, redundant };
  }

  return {
    async shape(_ctx: RequestCtx) {
      const [tables, views, columns, indexes, constraints] = await Promise.all([
        repo.tables(),
        repo.views(),
        repo.columns(),
        repo.indexes(),
        repo.constraints(),
      ]);
      const colsOf = (table: string) => columns.filter((c) => c.table === table).map(({ table: _t, ...c }) => c);
      return {
        ...header(),
        estimates: { row_estimate: ESTIMATE_NOTES.row_estimate, sizes: ESTIMATE_NOTES.sizes },
        totals: {
          tables: tables.length,
          views: views.length,
          indexes: indexes.length,
          row_estimate: tables.reduce((s, t) => s + (t.row_estimate ?? 0), 0),
          total_bytes: tables.reduce((s, t) => s + t.total_bytes, 0),
          total_pretty: prettyBytes(tables.reduce((s, t) => s + t.total_bytes, 0)),
        },
        tables: tables.map((t) => ({
          name: t.name,
          kind: t.kind,
          comment: t.comment,
          row_estimate: t.row_estimate,
          size: sizesOf(t),
          columns: colsOf(t.name),
          indexes: indexes
            .filter((i) => i.table === t.name)
            .map((i) => ({
              name: i.name,
              method: i.method,
              columns: i.columns,
              unique: i.unique,
              primary: i.primary,
              valid: i.valid,
              predicate: i.predicate,
              definition: i.definition,
              bytes: i.bytes,
            })),
          constraints: constraints.filter((c) => c.table === t.name).map(({ table: _t, ...c }) => c),
        })),
        views: views.map((v) => ({ ...v, columns: colsOf(v.name) })),
      };
    },

    /** Scans, cache hit ratios, index usage and row churn since the counters were last reset. */
    async stats(_ctx: RequestCtx) {
      const [tables, indexes, statsSince] = await Promise.all([repo.tableStats(), repo.indexStats(), repo.statsSince()]);
      const sum = (f: (t: TableStats) => number) => tables.reduce((s, t) => s + f(t), 0);
      const heapHit = sum((t) => t.heap_blks_hit);
      const heapRead = sum((t) => t.heap_blks_read);
      const idxHit = sum((t) => t.idx_blks_hit);
      const idxRead = sum((t) => t.idx_blks_read);
      const toastHit = sum((t) => t.toast_blks_hit);
      const toastRead = sum((t) => t.toast_blks_read);
      const seq = sum((t) => t.seq_scan);
      const idx = sum((t) => t.idx_scan ?? 0);
      const recommendations: Advice[] = [];
      for (const t of tables) {
        const scans = t.seq_scan + (t.idx_scan ?? 0);
        const rows = t.reltuples ?? t.n_live_tup;
        if (rows >= SEQ_SCAN_ROWS && t.seq_scan > (t.idx_scan ?? 0) && t.seq_tup_read / Math.max(t.seq_scan, 1) >= SEQ_SCAN_ROWS) {
          recommendations.push({
            severity: 'warning',
            code: 'sequential_scans',
            table: t.table,
            message: `${t.table}: ${t.seq_scan} of ${scans} scans were sequential, reading ${Math.round(t.seq_tup_read / t.seq_scan)} rows each on average; look for a filter without an index (POST /database/analyze shows the plan)`,
          });
        }
      }
      for (const i of indexes) {
        const hit = ratio(i.idx_blks_hit, i.idx_blks_hit + i.idx_blks_read);
        if (hit !== null && hit < 0.9 && i.idx_blks_read > 1_000) {
          recommendations.push({
            severity: 'info',
            code: 'index_cache_misses',
            table: i.table,
            index: i.index,
            message: `${i.index}: ${Math.round(hit * 100)}% of its block reads hit shared_buffers; a larger shared_buffers would keep it in memory`,
          });
        }
      }
      recommendations.push(...tableAdvice(tables));
      return {
        ...header(),
        stats_since: statsSince,
        estimates: { counters: ESTIMATE_NOTES.counters, cache_hit_ratio: ESTIMATE_NOTES.cache_hit_ratio },
        cache: {
          hit_ratio: ratio(heapHit + idxHit + toastHit, heapHit + heapRead + idxHit + idxRead + toastHit + toastRead),
          heap_hit_ratio: ratio(heapHit, heapHit + heapRead),
          index_hit_ratio: ratio(idxHit, idxHit + idxRead),
          toast_hit_ratio: ratio(toastHit, toastHit + toastRead),
          blocks_hit: heapHit + idxHit + toastHit,
          blocks_read: heapRead + idxRead + toastRead,
        },
        totals: {
          seq_scan: seq,
          idx_scan: idx,
          index_scan_ratio: ratio(idx, seq + idx),
          rows_inserted: sum((t) => t.n_tup_ins),
          rows_updated: sum((t) => t.n_tup_upd),
          rows_deleted: sum((t) => t.n_tup_del),
          live_rows: sum((t) => t.n_live_tup),
          dead_rows: sum((t) => t.n_dead_tup),
        },
        tables: tables.map((t) => ({
          table: t.table,
          seq_scan: t.seq_scan,
          seq_tup_read: t.seq_tup_read,
          idx_scan: t.idx_scan,
          idx_tup_fetch: t.idx_tup_fetch,
          index_scan_ratio: ratio(t.idx_scan ?? 0, t.seq_scan + (t.idx_scan ?? 0)),
          rows_inserted: t.n_tup_ins,
          rows_updated: t.n_tup_upd,
          rows_hot_updated: t.n_tup_hot_upd,
          rows_deleted: t.n_tup_del,
          live_rows: t.n_live_tup,
          dead_rows: t.n_dead_tup,
          dead_ratio: ratio(t.n_dead_tup, t.n_live_tup + t.n_dead_tup),
          cache_hit_ratio: ratio(t.heap_blks_hit + t.idx_blks_hit, t.heap_blks_hit + t.heap_blks_read + t.idx_blks_hit + t.idx_blks_read),
          last_vacuum: t.last_vacuum,
          last_autovacuum: t.last_autovacuum,
          last_analyze: t.last_analyze,
          last_autoanalyze: t.last_autoanalyze,
        })),
        indexes: indexes.map((i) => ({
          table: i.table,
          index: i.index,
          scans: i.idx_scan,
          tuples_read: i.idx_tup_read,
          tuples_fetched: i.idx_tup_fetch,
          bytes: i.bytes,
          unique: i.unique,
          primary: i.primary,
          cache_hit_ratio: ratio(i.idx_blks_hit, i.idx_blks_hit + i.idx_blks_read),
        })),
        recommendations,
      };
    },

    /** Sizes of this schema's tables and indexes, with vacuum and search-limit advice. */
    async size(_ctx: RequestCtx) {
      const [tables, indexes, stats, vcons] = await Promise.all([repo.tables(), repo.indexes(), repo.tableStats(), repo.countVcons()]);
      const total = (f: (t: (typeof tables)[number]) => number) => tables.reduce((s, t) => s + f(t), 0);
      const totals = {
        total_bytes: total((t) => t.total_bytes),
        table_bytes: total((t) => t.table_bytes),
        heap_bytes: total((t) => t.heap_bytes),
        toast_bytes: total((t) => t.toast_bytes),
        index_bytes: total((t) => t.index_bytes),
      };
      const recommendations: Advice[] = tableAdvice(stats).filter((a) => a.code !== 'stale_statistics');
      const tier =
        vcons < 10_000
          ? {
              tier: 'small',
              recommended_limit: 100,
              advice: 'Small corpus: any limit up to the maximum of 100 is cheap for keyword, semantic and hybrid search.',
            }
          : vcons < 250_000
            ? {
                tier: 'medium',
                recommended_limit: 50,
                advice: 'Medium corpus: keep search limits at 50 or less and narrow semantic and hybrid searches with start_date/end_date or tags.',
              }
            : {
                tier: 'large',
                recommended_limit: 25,
                advice:
                  'Large corpus: keep limits at 25 or less, page with offset, and always narrow semantic and hybrid searches with dates or tags; prefer keyword search for exact terms.',
              };
      recommendations.push({ severity: 'info', code: 'search_limits', message: `${vcons} vCons stored. ${tier.advice}` });
      const vconsTable = tables.find((t) => t.name === 'vcons');
      if (vconsTable && vconsTable.toast_bytes >= TOAST_ADVICE_BYTES && vconsTable.toast_bytes / vconsTable.table_bytes >= 0.5) {
        recommendations.push({
          severity: 'info',
          code: 'documents_out_of_line',
          table: 'vcons',
          message: `${Math.round((vconsTable.toast_bytes / vconsTable.table_bytes) * 100)}% of vcons is TOAST (large documents stored out of line): list with format=metadata and fetch full documents one at a time`,
        });
      }
      if (totals.index_bytes > totals.table_bytes && totals.table_bytes > 8 * 1024 * 1024) {
        recommendations.push({
          severity: 'info',
          code: 'index_heavy',
          message: `indexes (${prettyBytes(totals.index_bytes)}) outweigh table data (${prettyBytes(totals.table_bytes)}); GET /database/health lists unused and duplicate indexes`,
        });
      }
      return {
        ...header(),
        estimates: { sizes: ESTIMATE_NOTES.sizes, row_estimate: ESTIMATE_NOTES.row_estimate },
        totals: { ...totals, total_pretty: prettyBytes(totals.total_bytes) },
        vcons,
        tables: [...tables]
          .sort((a, b) => b.total_bytes - a.total_bytes || (a.name < b.name ? -1 : 1))
          .map((t) => ({
            table: t.name,
            row_estimate: t.row_estimate,
            ...sizesOf(t),
            share_of_schema: ratio(t.total_bytes, totals.total_bytes),
            bytes_per_row_estimate: t.row_estimate ? Math.round(t.table_bytes / t.row_estimate) : null,
          })),
        largest_indexes: [...indexes]
          .sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : 1))
          .slice(0, 10)
          .map((i) => ({ table: i.table, index: i.name, bytes: i.bytes, pretty: prettyBytes(i.bytes) })),
        search: { corpus_vcons: vcons, ...tier },
        recommendations,
      };
    },

    /** Bloat, unused/duplicate/invalid indexes, and this application's connections, with alerts. */
    async health(_ctx: RequestCtx) {
      const [stats, indexStats, indexes, connections, statsSince] = await Promise.all([
        repo.tableStats(),
        repo.indexStats(),
        repo.indexes(),
        repo.connections(longRunningS),
        repo.statsSince(),
      ]);
      const alerts: Advice[] = tableAdvice(stats);
      const bloat = stats
        .map((t) => {
          const dead = ratio(t.n_dead_tup, t.n_live_tup + t.n_dead_tup);
          return {
            table: t.table,
            live_rows: t.n_live_tup,
            dead_rows: t.n_dead_tup,
            dead_ratio: dead,
            estimated_dead_bytes: Math.round(t.heap_bytes * (dead ?? 0)),
            last_vacuum: t.last_vacuum,
            last_autovacuum: t.last_autovacuum,
          };
        })
        .sort((a, b) => (b.dead_ratio ?? 0) - (a.dead_ratio ?? 0) || (a.table < b.table ? -1 : 1));

      const byName = new Map(indexes.map((i) => [i.name, i]));
      const unused = indexStats
        .filter((i) => i.idx_scan === 0 && !i.unique && !i.primary && !i.constraint)
        .map((i: IndexStats) => ({
          table: i.table,
          index: i.index,
          bytes: i.bytes,
          pretty: prettyBytes(i.bytes),
          definition: byName.get(i.index)?.definition ?? null,
        }));
      for (const u of unused) {
        alerts.push({
          severity: u.bytes >= UNUSED_INDEX_WARN_BYTES ? 'warning' : 'info',
          code: 'unused_index',
          table: u.table,
          index: u.index,
          message: `${u.index} (${u.pretty}) has not been scanned since ${statsSince ? statsSince.toISOString() : 'statistics began'}; keep it if a rare query needs it, otherwise drop it in a migration`,
        });
      }
      const { duplicate, redundant } = findDuplicates(indexes);
      for (const d of duplicate) {
        alerts.push({
          severity: 'warning',
          code: 'duplicate_index',
          table: d.table,
          index: d.indexes.slice(1).join(', '),
          action: d.indexes
            .slice(1)
            .map((i) => `DROP INDEX ${quoteIdent(i)}`)
            .join('; '),
          message: `${d.table}: indexes ${d.indexes.join(', ')} are identical (${d.definition}); keep one and save ${prettyBytes(d.bytes)}`,
        });
      }
      for (const r of redundant) {
        alerts.push({
          severity: 'info',
          code: 'redundant_index',
          table: r.table,
          index: r.index,
          message: `${r.index} is a leading prefix of ${r.covered_by}, which can serve the same lookups`,
        });
      }
      const invalid = indexes.filter((i) => !i.valid);
      for (const i of invalid) {
        alerts.push({
          severity: 'warning',
          code: 'invalid_index',
          table: i.table,
          index: i.name,
          action: `REINDEX INDEX ${quoteIdent(i.name)}`,
          message: `${i.name} is invalid (a failed concurrent build); it costs writes and serves no reads`,
        });
      }

      const usable = connections.server.max_connections - connections.server.reserved;
      const usage = ratio(connections.server.total, usable) ?? 0;
      if (usage >= CONNECTIONS_WARN) {
        alerts.push({
          severity: usage >= CONNECTIONS_CRITICAL ? 'critical' : 'warning',
          code: 'connections_near_limit',
          message: `${connections.server.total} of ${usable} usable connections are open on the server (${Math.round(usage * 100)}%)`,
        });
      }
      for (const s of connections.long_running) {
        alerts.push({
          severity: (s.running_s ?? 0) >= LONG_RUNNING_CRITICAL_S ? 'critical' : 'warning',
          code: 'long_running_query',
          message: `a query of this application (pid ${s.pid}) has been running for ${Math.round(s.running_s ?? 0)} s`,
        });
      }
      for (const s of connections.idle_in_transaction) {
        alerts.push({
          severity: 'warning',
          code: 'idle_in_transaction',
          message: `a session of this application (pid ${s.pid}) has been idle in a transaction for ${Math.round(s.transaction_s ?? 0)} s, holding its locks and snapshot`,
        });
      }
      const appTotal = connections.by_state.reduce((s, c) => s + c.count, 0);
      return {
        ...header(),
        status: statusOf(alerts),
        stats_since: statsSince,
        estimates: { counters: ESTIMATE_NOTES.counters, estimated_dead_bytes: 'heap size × dead-row ratio: an estimate of space VACUUM can reuse' },
        alerts: alerts.filter((a) => a.severity !== 'info'),
        bloat: { tables: bloat },
        indexes: { unused, duplicate, redundant, invalid: invalid.map((i) => ({ table: i.table, index: i.name })) },
        connections: {
          application: {
            application_name: connections.application_name,
            total: appTotal,
            by_state: connections.by_state,
            long_running_threshold_s: longRunningS,
            long_running: connections.long_running,
            idle_in_transaction: connections.idle_in_transaction,
          },
          server: {
            total: connections.server.total,
            max_connections: connections.server.max_connections,
            usable,
            usage_ratio: ratio(connections.server.total, usable),
          },
        },
        recommendations: alerts,
      };
    },
  };
}
