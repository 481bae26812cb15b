// Catalog reads of this instance's own schema (docs/api.md "Database and analytics"). Every query
// filters on the schema name passed as a bound parameter; the name comes from validated config
// (SchemaName), never from a request. Figures from pg_class.reltuples and pg_stat_* are estimates.
import type { Sql } from './client.js';
import { AppError } from '../domain/errors.js';

export interface ColumnInfo {
  name: string;
  type: string;
  not_null: boolean;
  default: string | null;
  generated: boolean;
}

export interface IndexInfo {
  name: string;
  table: string;
  definition: string;
  method: string;
  unique: boolean;
  primary: boolean;
  valid: boolean;
  constraint: boolean;
  /** Column numbers of the key (0 = expression), as in pg_index.indkey. */
  keys: number[];
  columns: string[];
  opclasses: string;
  expression: string | null;
  predicate: string | null;
  bytes: number;
}

export interface TableInfo {
  name: string;
  kind: 'table' | 'partitioned_table';
  /** pg_class.reltuples: null until the table has been analyzed (an estimate afterwards). */
  row_estimate: number | null;
  total_bytes: number;
  table_bytes: number;
  heap_bytes: number;
  toast_bytes: number;
  index_bytes: number;
  comment: string | null;
}

export interface ConstraintInfo {
  table: string;
  name: string;
  type: 'primary_key' | 'foreign_key' | 'unique' | 'check' | 'exclusion' | 'not_null' | 'trigger';
  definition: string;
}

export interface TableStats {
  table: string;
  seq_scan: number;
  seq_tup_read: number;
  idx_scan: number | null;
  idx_tup_fetch: number | null;
  n_tup_ins: number;
  n_tup_upd: number;
  n_tup_del: number;
  n_tup_hot_upd: number;
  n_live_tup: number;
  n_dead_tup: number;
  n_mod_since_analyze: number;
  last_vacuum: Date | null;
  last_autovacuum: Date | null;
  last_analyze: Date | null;
  last_autoanalyze: Date | null;
  vacuum_count: number;
  autovacuum_count: number;
  analyze_count: number;
  autoanalyze_count: number;
  heap_blks_read: number;
  heap_blks_hit: number;
  idx_blks_read: number;
  idx_blks_hit: number;
  toast_blks_read: number;
  toast_blks_hit: number;
  heap_bytes: number;
  reltuples: number | null;
}

export interface IndexStats {
  table: string;
  index: string;
  idx_scan: number;
  idx_tup_read: number;
  idx_tup_fetch: number;
  idx_blks_read: number;
  idx_blks_hit: number;
  bytes: number;
  unique: boolean;
  primary: boolean;
  constraint: boolean;
}

export interface SessionInfo {
  pid: number;
  state: string | null;
  running_s: number | null;
  transaction_s: number | null;
  wait_event_type: string | null;
  wait_event: string | null;
  query: string | null;
}

export interface ConnectionInfo {
  application_name: string;
  by_state: { state: string; count: number }[];
  /** Sessions of this application (same database, role and application_name) open for long. */
  long_running: SessionInfo[];
  idle_in_transaction: SessionInfo[];
  server: { total: number; max_connections: number; reserved: number };
}

const QUERY_TEXT_CHARS = 200;

/** SQLSTATEs of a query that gave up waiting: statement_timeout (or a cancel) and lock_timeout. */
const GAVE_UP = new Set(['57014', '55P03']);

/**
 * Runs a catalog read; a statement or lock timeout becomes a 503 in the one error format (the
 * database is busy, the request was fine), never an internal error.
 */
async function catalogRead<T>(query: Promise<T>): Promise<T> {
  try {
    return await query;
  } catch (err) {
    if (GAVE_UP.has((err as { code?: string } | null)?.code ?? '')) {
      throw new AppError(
        503,
        'database_timeout',
        'The database did not answer this catalog read within the statement timeout; try again shortly',
        undefined,
        "STATEMENT_TIMEOUT_MS bounds every query; a long lock on one of this group's tables (a migration, VACUUM FULL) also holds these reads",
      );
    }
    throw err;
  }
}

/** Reads of the PostgreSQL catalog restricted to one schema. */
export function createIntrospectionRepo(sql: Sql, schema: string) {
  // This group's relations, found through pg_depend's index on the schema (every table, view and
  // sequence records a dependency on its schema). Filtering pg_class on relnamespace instead would
  // scan the whole catalog: on a database shared by many groups, the cost of every read would
  // follow the whole database rather than this group. Every query starts from this set and
  // reaches the other catalogs through their indexes (pg_class by oid, pg_attribute, pg_index and
  // pg_constraint by relation).
  const own = () => sql`
    select d.objid as oid from pg_depend d
    where d.refclassid = 'pg_namespace'::regclass and d.refobjsubid = 0 and d.deptype = 'n'
      and d.refobjid = (select oid from pg_namespace where nspname = ${schema})
      and d.classid = 'pg_class'::regclass`;

  /**
   * Sessions of this application only: same database, same role and the pool's own
   * application_name. Other applications' sessions appear only as a server-wide count.
   */
  async function readConnections(longRunningS: number): Promise<ConnectionInfo> {
    const [app] = await sql<{ name: string }[]>`select current_setting('application_name') as name`;
    const byState = await sql<{ state: string; count: number }[]>`
      select coalesce(state, 'unknown') as state, count(*)::int as count
      from pg_stat_activity
      where datname = current_database() and usename = current_user
        and application_name = current_setting('application_name')
      group by 1 order by 1`;
    const sessions = await sql<(SessionInfo & { kind: 'long' | 'idle_tx' })[]>`
      select pid, state,
             extract(epoch from now() - query_start)::float8 as running_s,
             extract(epoch from now() - xact_start)::float8 as transaction_s,
             wait_event_type, wait_event, left(query, ${QUERY_TEXT_CHARS}) as query,
             case when state = 'active' then 'long' else 'idle_tx' end as kind
      from pg_stat_activity
      where datname = current_database() and usename = current_user
        and application_name = current_setting('application_name')
        and pid <> pg_backend_pid()
        and ((state = 'active' and query_start < now() - make_interval(secs => ${longRunningS}))
          or (state like 'idle in transaction%' and state_change < now() - make_interval(secs => ${longRunningS})))
      order by query_start`;
    const [server] = await sql<{ total: number; max_connections: number; reserved: number }[]>`
      select (select count(*) from pg_stat_activity where backend_type = 'client backend')::int as total,
             current_setting('max_connections')::int as max_connections,
             current_setting('superuser_reserved_connections')::int as reserved`;
    const strip = ({ kind: _kind, ...s }: SessionInfo & { kind: string }) => s;
    return {
      application_name: app.name,
      by_state: byState,
      long_running: sessions.filter((s) => s.kind === 'long').map(strip),
      idle_in_transaction: sessions.filter((s) => s.kind === 'idle_tx').map(strip),
      server,
    };
  }

  return {
    schema,

    async tables(): Promise<TableInfo[]> {
      return catalogRead(sql<TableInfo[]>`
        with rel as materialized (${own()})
        select c.relname as name,
               case c.relkind when 'p' then 'partitioned_table' else 'table' end as kind,
               case when c.reltuples < 0 then null else c.reltuples::float8 end as row_estimate,
               pg_total_relation_size(c.oid)::float8 as total_bytes,
               pg_table_size(c.oid)::float8 as table_bytes,
               pg_relation_size(c.oid)::float8 as heap_bytes,
               coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)::float8 as toast_bytes,
               pg_indexes_size(c.oid)::float8 as index_bytes,
               obj_description(c.oid, 'pg_class') as comment
        from rel join pg_class c on c.oid = rel.oid
        where c.relkind in ('r', 'p')
        order by c.relname`);
    },

    async views(): Promise<{ name: string; kind: 'view' | 'materialized_view' }[]> {
      return catalogRead(sql<{ name: string; kind: 'view' | 'materialized_view' }[]>`
        with rel as materialized (${own()})
        select c.relname as name, case c.relkind when 'm' then 'materialized_view' else 'view' end as kind
        from rel join pg_class c on c.oid = rel.oid
        where c.relkind in ('v', 'm')
        order by c.relname`);
    },

    async columns(): Promise<(ColumnInfo & { table: string })[]> {
      return catalogRead(sql<(ColumnInfo & { table: string })[]>`
        with rel as materialized (${own()})
        select c.relname as table, a.attname as name, format_type(a.atttypid, a.atttypmod) as type,
               a.attnotnull as not_null, pg_get_expr(d.adbin, d.adrelid) as default,
               a.attgenerated <> '' as generated
        from rel
        join pg_class c on c.oid = rel.oid
        join pg_attribute a on a.attrelid = c.oid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where c.relkind in ('r', 'p', 'v', 'm') and a.attnum > 0 and not a.attisdropped
        order by c.relname, a.attnum`);
    },

    async indexes(): Promise<IndexInfo[]> {
      const rows = await catalogRead(sql<(Omit<IndexInfo, 'keys'> & { keys: string })[]>`
        with rel as materialized (${own()})
        select i.relname as name, t.relname as table, pg_get_indexdef(i.oid) as definition, am.amname as method,
               x.indisunique as unique, x.indisprimary as primary, x.indisvalid as valid,
               exists (select 1 from pg_constraint k where k.conrelid = t.oid and k.conindid = i.oid) as constraint,
               x.indkey::text as keys,
               array(select coalesce(a.attname, '(expression)')
                     from unnest(x.indkey) with ordinality as u(attnum, ord)
                     left join pg_attribute a on a.attrelid = t.oid and a.attnum = u.attnum
                     order by u.ord) as columns,
               x.indclass::text || '/' || x.indcollation::text || '/' || x.indoption::text as opclasses,
               pg_get_expr(x.indexprs, x.indrelid) as expression,
               pg_get_expr(x.indpred, x.indrelid) as predicate,
               pg_relation_size(i.oid)::float8 as bytes
        from rel
        join pg_class t on t.oid = rel.oid
        join pg_index x on x.indrelid = t.oid
        join pg_class i on i.oid = x.indexrelid
        join pg_am am on am.oid = i.relam
        order by t.relname, i.relname`);
      return rows.map((r) => ({ ...r, keys: r.keys.split(' ').filter(Boolean).map(Number) }));
    },

    async constraints(): Promise<ConstraintInfo[]> {
      return catalogRead(sql<ConstraintInfo[]>`
        with rel as materialized (${own()})
        select t.relname as table, k.conname as name,
               case k.contype when 'p' then 'primary_key' when 'f' then 'foreign_key' when 'u' then 'unique'
                              when 'c' then 'check' when 'x' then 'exclusion' when 'n' then 'not_null' else 'trigger' end as type,
               pg_get_constraintdef(k.oid) as definition
        from rel
        join pg_class t on t.oid = rel.oid
        join pg_constraint k on k.conrelid = t.oid
        order by t.relname, k.conname`);
    },

    /**
     * The counters of pg_stat_user_tables and pg_statio_user_tables for this schema's tables,
     * read with the functions those views use: the views compute every table of the database
     * before a filter on the schema applies.
     */
    async tableStats(): Promise<TableStats[]> {
      return catalogRead(sql<TableStats[]>`
        with rel as materialized (${own()})
        select c.relname as table,
               pg_stat_get_numscans(c.oid)::float8 as seq_scan, pg_stat_get_tuples_returned(c.oid)::float8 as seq_tup_read,
               ix.idx_scan, ix.idx_tup_fetch + pg_stat_get_tuples_fetched(c.oid)::float8 as idx_tup_fetch,
               pg_stat_get_tuples_inserted(c.oid)::float8 as n_tup_ins, pg_stat_get_tuples_updated(c.oid)::float8 as n_tup_upd,
               pg_stat_get_tuples_deleted(c.oid)::float8 as n_tup_del, pg_stat_get_tuples_hot_updated(c.oid)::float8 as n_tup_hot_upd,
               pg_stat_get_live_tuples(c.oid)::float8 as n_live_tup, pg_stat_get_dead_tuples(c.oid)::float8 as n_dead_tup,
               pg_stat_get_mod_since_analyze(c.oid)::float8 as n_mod_since_analyze,
               pg_stat_get_last_vacuum_time(c.oid) as last_vacuum, pg_stat_get_last_autovacuum_time(c.oid) as last_autovacuum,
               pg_stat_get_last_analyze_time(c.oid) as last_analyze, pg_stat_get_last_autoanalyze_time(c.oid) as last_autoanalyze,
               pg_stat_get_vacuum_count(c.oid)::float8 as vacuum_count, pg_stat_get_autovacuum_count(c.oid)::float8 as autovacuum_count,
               pg_stat_get_analyze_count(c.oid)::float8 as analyze_count, pg_stat_get_autoanalyze_count(c.oid)::float8 as autoanalyze_count,
               (pg_stat_get_blocks_fetched(c.oid) - pg_stat_get_blocks_hit(c.oid))::float8 as heap_blks_read,
               pg_stat_get_blocks_hit(c.oid)::float8 as heap_blks_hit,
               coalesce(ix.idx_blks_read, 0) as idx_blks_read, coalesce(ix.idx_blks_hit, 0) as idx_blks_hit,
               case when c.reltoastrelid = 0 then 0
                    else (pg_stat_get_blocks_fetched(c.reltoastrelid) - pg_stat_get_blocks_hit(c.reltoastrelid))::float8 end as toast_blks_read,
               case when c.reltoastrelid = 0 then 0 else pg_stat_get_blocks_hit(c.reltoastrelid)::float8 end as toast_blks_hit,
               pg_relation_size(c.oid)::float8 as heap_bytes,
               case when c.reltuples < 0 then null else c.reltuples::float8 end as reltuples
        from rel
        join pg_class c on c.oid = rel.oid
        left join lateral (
          select sum(pg_stat_get_numscans(x.indexrelid))::float8 as idx_scan,
                 sum(pg_stat_get_tuples_fetched(x.indexrelid))::float8 as idx_tup_fetch,
                 sum(pg_stat_get_blocks_fetched(x.indexrelid) - pg_stat_get_blocks_hit(x.indexrelid))::float8 as idx_blks_read,
                 sum(pg_stat_get_blocks_hit(x.indexrelid))::float8 as idx_blks_hit
          from pg_index x where x.indrelid = c.oid
        ) ix on true
        where c.relkind in ('r', 'm', 'p')
        order by c.relname`);
    },

    /** pg_stat_user_indexes and pg_statio_user_indexes of this schema, read the same way. */
    async indexStats(): Promise<IndexStats[]> {
      return catalogRead(sql<IndexStats[]>`
        with rel as materialized (${own()})
        select c.relname as table, i.relname as index,
               pg_stat_get_numscans(i.oid)::float8 as idx_scan, pg_stat_get_tuples_returned(i.oid)::float8 as idx_tup_read,
               pg_stat_get_tuples_fetched(i.oid)::float8 as idx_tup_fetch,
               (pg_stat_get_blocks_fetched(i.oid) - pg_stat_get_blocks_hit(i.oid))::float8 as idx_blks_read,
               pg_stat_get_blocks_hit(i.oid)::float8 as idx_blks_hit,
               pg_relation_size(i.oid)::float8 as bytes,
               x.indisunique as unique, x.indisprimary as primary,
               exists (select 1 from pg_constraint k where k.conrelid = c.oid and k.conindid = i.oid) as constraint
        from rel
        join pg_class c on c.oid = rel.oid
        join pg_index x on x.indrelid = c.oid
        join pg_class i on i.oid = x.indexrelid
        where c.relkind in ('r', 'm')
        order by c.relname, i.relname`);
    },

    /** When the cumulative counters of this database were last reset (null: never). */
    async statsSince(): Promise<Date | null> {
      const [r] = await catalogRead(sql<{ stats_reset: Date | null }[]>`
        select stats_reset from pg_stat_database where datname = current_database()`);
      return r?.stats_reset ?? null;
    },

    /** Exact row count of the vcons table (the corpus size). */
    async countVcons(): Promise<number> {
      const [r] = await catalogRead(sql<{ n: number }[]>`select count(*)::float8 as n from vcons`);
      return r.n;
    },

    /**
     * Sessions of this application only: same database, same role and the pool's own
     * application_name. Other applications' sessions appear only as a server-wide count.
     */
    async connections(longRunningS: number): Promise<ConnectionInfo> {
      return catalogRead(readConnections(longRunningS));
    },

    /**
     * Which of `names` name a function a call written in this schema could resolve to (pg_catalog,
     * this schema, extensions): analyze's guard refuses `x.name` when it would call one.
     */
    async functionsNamed(names: readonly string[]): Promise<string[]> {
      const rows = await catalogRead(sql<{ name: string }[]>`
        select distinct p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where p.proname = any(${names as string[]}) and n.nspname = any(current_schemas(true))`);
      return rows.map((r) => r.name);
    },
  };
}

export type IntrospectionRepo = ReturnType<typeof createIntrospectionRepo>;
