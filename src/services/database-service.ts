// Database introspection of this instance's schema (API.md "Database and analytics"): shape,
// statistics, sizes, health, and the plan of one read-only statement. Figures come from the
// catalog of this schema only; thresholds below turn them into alerts and recommendations.
import { isDatabaseUnavailable, ValidationError } from '../domain/errors.js';
import { AnalyzeBody, parseBody } from '../domain/params.js';
import type { RequestCtx } from './context.js';
import type { IndexInfo, IndexStats, IntrospectionRepo, TableInfo, TableStats } from '../db/introspection-repo.js';
import type { AnalyzeRepo } from '../db/analyze-repo.js';

/** work_mem and temp_file_limit of an analyze statement: one sort can't fill the shared server's disk. */
export const ANALYZE_WORK_MEM_KB = 4 * 1024;
export const ANALYZE_TEMP_FILE_LIMIT_KB = 64 * 1024;
/** The longest statement timeout of POST /database/analyze (ms), whatever STATEMENT_TIMEOUT_MS says. */
export const ANALYZE_TIMEOUT_MAX_MS = 5_000;

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

/** What the database service needs: the schema-bound catalog repo and its limits. */
export interface DatabaseServiceDeps {
  repo: IntrospectionRepo;
  /** Runs the EXPLAIN of analyze on a connection of its own. */
  analyzer: AnalyzeRepo;
  /** statement_timeout of POST /database/analyze. */
  analyzeTimeoutMs: number;
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

// ---------------------------------------------------------------------------------------------
// The read-only statement check of POST /database/analyze.

type TokenKind = 'word' | 'quoted' | 'string' | 'number' | 'param' | 'punct' | 'op';
interface Token {
  kind: TokenKind;
  value: string;
  pos: number;
}

const IDENT_START = /[A-Za-z_\u0080-\uffff]/;
const IDENT_PART = /[A-Za-z0-9_$\u0080-\uffff]/;

/** Thrown by the statement check: a 400 naming what is not allowed. */
function refuse(message: string, hint?: string): never {
  throw new ValidationError(message, [{ path: 'query', message }], hint);
}

/** Decodes the escapes of a U&"..." identifier or U&'...' string as PostgreSQL does. */
export function decodeUnicodeEscapes(raw: string, escape: string): string {
  if (/[0-9a-fA-F+'"\s]/.test(escape)) refuse(`invalid Unicode escape character ${JSON.stringify(escape)}`);
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] !== escape) {
      out += raw[i];
      continue;
    }
    if (raw[i + 1] === escape) {
      out += escape;
      i++;
      continue;
    }
    const long = raw[i + 1] === '+';
    const hex = long ? raw.slice(i + 2, i + 8) : raw.slice(i + 1, i + 5);
    if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== (long ? 6 : 4)) refuse('query has an invalid Unicode escape in a U& literal');
    const code = parseInt(hex, 16);
    if (code > 0x10ffff) refuse('query has an invalid Unicode escape in a U& literal');
    out += code >= 0xd800 && code <= 0xdfff ? String.fromCharCode(code) : String.fromCodePoint(code);
    i += long ? 7 : 4;
  }
  return out;
}

/**
 * Splits PostgreSQL text into tokens the way the server does: comments (`--`, nested block
 * comments) vanish, string literals (standard, E'' escapes, dollar quotes) and quoted identifiers
 * are single tokens, so a semicolon or keyword inside them is inert. Unterminated literals or
 * comments are refused rather than guessed at.
 */
export function tokenizeSql(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '-' && text[i + 1] === '-') {
      while (i < n && text[i] !== '\n' && text[i] !== '\r') i++;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (text[i] === '/' && text[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (text[i] === '*' && text[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
      if (depth > 0) refuse('query has an unterminated /* comment');
      continue;
    }
    const start = i;
    if (c === "'") {
      // Escape strings are E'...' (prefix already emitted as a word "e"): backslash escapes apply.
      const prev = out[out.length - 1];
      const escape = prev?.kind === 'word' && prev.value === 'e' && prev.pos + 1 === i;
      if (escape) out.pop();
      i++;
      for (;;) {
        if (i >= n) refuse('query has an unterminated string literal');
        if (escape && text[i] === '\\') {
          i += 2;
          continue;
        }
        if (text[i] === "'") {
          if (text[i + 1] === "'") {
            i += 2;
            continue;
          }
          i++;
          break;
        }
        i++;
      }
      out.push({ kind: 'string', value: text.slice(start, i), pos: start });
      continue;
    }
    if (c === '"') {
      i++;
      let name = '';
      for (;;) {
        if (i >= n) refuse('query has an unterminated quoted identifier');
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            name += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        name += text[i++];
      }
      out.push({ kind: 'quoted', value: name, pos: start });
      continue;
    }
    if (c === '$') {
      const m = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 200));
      if (m) {
        const tag = m[0];
        const end = text.indexOf(tag, i + tag.length);
        if (end < 0) refuse(`query has an unterminated dollar-quoted string ${tag}`);
        i = end + tag.length;
        out.push({ kind: 'string', value: text.slice(start, i), pos: start });
        continue;
      }
      if (/[0-9]/.test(text[i + 1] ?? '')) {
        i++;
        while (i < n && /[0-9]/.test(text[i])) i++;
        out.push({ kind: 'param', value: text.slice(start, i), pos: start });
        continue;
      }
      out.push({ kind: 'op', value: '$', pos: start });
      i++;
      continue;
    }
    if ((c === 'u' || c === 'U') && text[i + 1] === '&' && (text[i + 2] === '"' || text[i + 2] === "'")) {
      // U&"..." / U&'...': PostgreSQL decodes the escapes, so the check must see the decoded name.
      const quote = text[i + 2];
      let j = i + 3;
      let raw = '';
      for (;;) {
        if (j >= n) refuse(`query has an unterminated U&${quote} literal`);
        if (text[j] === quote) {
          if (text[j + 1] === quote) {
            raw += quote;
            j += 2;
            continue;
          }
          j++;
          break;
        }
        raw += text[j++];
      }
      const uescape = /^\s*uescape\s*'(.)'/i.exec(text.slice(j, j + 64));
      if (uescape) j += uescape[0].length;
      else if (/^\s*(--|\/\*)/.test(text.slice(j)) && /uescape/i.test(text.slice(j))) {
        refuse('write UESCAPE directly after its U& literal (no comment between)');
      }
      const value = decodeUnicodeEscapes(raw, uescape?.[1] ?? '\\');
      out.push(quote === '"' ? { kind: 'quoted', value, pos: start } : { kind: 'string', value: text.slice(start, j), pos: start });
      i = j;
      continue;
    }
    if (IDENT_START.test(c)) {
      while (i < n && IDENT_PART.test(text[i])) i++;
      out.push({ kind: 'word', value: text.slice(start, i).toLowerCase(), pos: start });
      continue;
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(text[i + 1] ?? ''))) {
      while (i < n && /[0-9A-Za-z_.]/.test(text[i])) {
        // 1e-5: the sign belongs to the exponent
        if ((text[i] === 'e' || text[i] === 'E') && (text[i + 1] === '-' || text[i + 1] === '+')) i++;
        i++;
      }
      out.push({ kind: 'number', value: text.slice(start, i), pos: start });
      continue;
    }
    if ('();,[].'.includes(c)) {
      out.push({ kind: 'punct', value: c, pos: start });
      i++;
      continue;
    }
    if (c === ':' && text[i + 1] === ':') {
      out.push({ kind: 'op', value: '::', pos: start });
      i += 2;
      continue;
    }
    // Operators: a run of operator characters.
    while (i < n && /[+\-*/<>=~!@#%^&|`?:]/.test(text[i])) {
      if ((text[i] === '-' && text[i + 1] === '-') || (text[i] === '/' && text[i + 1] === '*')) break;
      i++;
    }
    if (i === start) {
      // A character PostgreSQL has no use for (e.g. a backslash): let the server report it.
      i++;
    }
    out.push({ kind: 'op', value: text.slice(start, i), pos: start });
  }
  return out;
}

/** Words that make a statement write, anywhere in it (a data-modifying CTE is a write too). */
const WRITE_WORDS = new Set(['insert', 'update', 'delete', 'merge', 'truncate']);
/** First words of statements that are not queries: refused with a message naming the kind. */
const DDL_WORDS = new Set([
  'create',
  'drop',
  'alter',
  'grant',
  'revoke',
  'comment',
  'security',
  'reindex',
  'cluster',
  'refresh',
  'vacuum',
  'analyze',
  'analyse',
  'import',
]);

/** Functions with effects outside the statement (sleep, files, locks, other servers, SQL text). */
const DANGEROUS_EXACT = new Set([
  'set_config',
  'nextval',
  'setval',
  'loread',
  'lowrite',
  'pg_terminate_backend',
  'pg_cancel_backend',
  'pg_signal_backend',
  'pg_reload_conf',
  'pg_rotate_logfile',
  'pg_promote',
  'pg_switch_wal',
  'pg_create_restore_point',
  'pg_backup_start',
  'pg_backup_stop',
  'pg_start_backup',
  'pg_stop_backup',
  'pg_wal_replay_pause',
  'pg_wal_replay_resume',
  'pg_log_backend_memory_contexts',
  'pg_import_system_collations',
  'pg_export_snapshot',
  'pg_notify',
  'pg_prewarm',
  'pg_stat_file',
  'pg_logdir_ls',
  'pg_drop_replication_slot',
  'pg_replication_slot_advance',
  'txid_current',
  'pg_current_xact_id',
]);
const DANGEROUS_PREFIXES = [
  'pg_sleep',
  'dblink',
  'lo_',
  'pg_read_',
  'pg_ls_',
  'pg_file_',
  'pg_advisory',
  'pg_try_advisory',
  'pg_stat_reset',
  'pg_stat_statements_reset',
  'pg_create_',
  'pg_copy_',
  'pg_logical_',
  'pg_replication_origin_',
  'binary_upgrade_',
  'query_to_xml',
  'cursor_to_xml',
  'table_to_xml',
  'schema_to_xml',
  'database_to_xml',
  // Isolation: these run SQL text or read any relation by name, out of sight of the plan's
  // relation check, so another group's words (ts_stat) or figures (sizes, statistics) could leak.
  'ts_stat',
  'ts_rewrite',
  'pg_stat_get_',
  'pg_relation_size',
  'pg_total_relation_size',
  'pg_table_size',
  'pg_indexes_size',
  'pg_relation_filenode',
  'pg_relation_filepath',
];

const isDangerous = (name: string) => DANGEROUS_EXACT.has(name) || DANGEROUS_PREFIXES.some((p) => name.startsWith(p));

/**
 * Accepts exactly one SELECT or WITH ... SELECT and returns its text without the trailing
 * semicolon and anything after it (only comments can follow). Refuses DML, DDL, other commands,
 * several statements, SELECT INTO, locking clauses, data-modifying CTEs and dangerous functions.
 */
export function checkReadOnlyStatement(query: string): string {
  const tokens = tokenizeSql(query);
  if (tokens.length === 0) refuse('query is empty: send one SELECT or WITH ... SELECT statement');
  const semis = tokens.filter((t) => t.kind === 'punct' && t.value === ';');
  const last = tokens[tokens.length - 1];
  if (semis.length > 1 || (semis.length === 1 && semis[0] !== last)) {
    refuse('query must be a single statement: found more than one (a ";" outside string literals and comments)');
  }
  const body = semis.length === 1 ? tokens.slice(0, -1) : tokens;
  const statement = semis.length === 1 ? query.slice(0, last.pos) : query;
  if (body.length === 0) refuse('query is empty: send one SELECT or WITH ... SELECT statement');
  const first = body.find((t) => !(t.kind === 'punct' && t.value === '('));
  const word = first?.kind === 'word' ? first.value : first ? query.slice(first.pos, first.pos + 20).split(/\s/)[0] : '(';
  if (WRITE_WORDS.has(word)) refuse(`data-modifying statements are not allowed (found ${word.toUpperCase()}): send one SELECT or WITH ... SELECT`);
  if (DDL_WORDS.has(word)) refuse(`DDL and maintenance commands are not allowed (found ${word.toUpperCase()}): send one SELECT or WITH ... SELECT`);
  if (word !== 'select' && word !== 'with') {
    refuse(`only a single SELECT or WITH ... SELECT statement can be analyzed; this one starts with ${JSON.stringify(word.toUpperCase())}`);
  }
  const quoteHint = 'If the word is a column or table name, write it in double quotes';
  body.forEach((t, i) => {
    const next = body[i + 1];
    if (t.kind === 'word') {
      if (t.value === 'for' && next?.kind === 'word' && ['update', 'share', 'no', 'key'].includes(next.value)) {
        refuse('locking clauses (FOR UPDATE / FOR SHARE) are not allowed: analyze plans read-only statements');
      }
      if (t.value === 'into') refuse('SELECT INTO is not allowed: it creates a table; analyze plans read-only statements', quoteHint);
      if (WRITE_WORDS.has(t.value)) {
        refuse(`data-modifying statements are not allowed (found ${t.value.toUpperCase()}), including inside WITH`, quoteHint);
      }
    }
    if ((t.kind === 'word' || t.kind === 'quoted') && next?.kind === 'punct' && next.value === '(' && isDangerous(t.value.toLowerCase())) {
      refuse(
        `function ${t.value}() is not allowed in analyze: it acts outside the statement (sleeping, files, locks, sessions, other servers or SQL text)`,
      );
    }
  });
  return statement;
}

// ---------------------------------------------------------------------------------------------
// The plan check of POST /database/analyze: what PostgreSQL itself resolved, not what the text
// looks like. Every relation scanned must be this group's; every function called (in any
// expression of any node, views and subqueries expanded) must be on the allowlist below.

/** Built-in functions that compute on their arguments only: no files, settings, sessions, catalogs or statistics. */
const HARMLESS_FUNCTIONS = new Set([
  // aggregates and window functions
  'count',
  'sum',
  'avg',
  'min',
  'max',
  'string_agg',
  'array_agg',
  'json_agg',
  'jsonb_agg',
  'json_object_agg',
  'jsonb_object_agg',
  'bool_and',
  'bool_or',
  'every',
  'bit_and',
  'bit_or',
  'stddev',
  'stddev_pop',
  'stddev_samp',
  'variance',
  'var_pop',
  'var_samp',
  'percentile_cont',
  'percentile_disc',
  'mode',
  'corr',
  'covar_pop',
  'covar_samp',
  'regr_slope',
  'regr_intercept',
  'regr_count',
  'regr_r2',
  'row_number',
  'rank',
  'dense_rank',
  'percent_rank',
  'cume_dist',
  'ntile',
  'lag',
  'lead',
  'first_value',
  'last_value',
  'nth_value',
  // text
  'lower',
  'upper',
  'initcap',
  'length',
  'char_length',
  'character_length',
  'octet_length',
  'bit_length',
  'substr',
  'substring',
  'position',
  'strpos',
  'trim',
  'btrim',
  'ltrim',
  'rtrim',
  'replace',
  'translate',
  'split_part',
  'concat',
  'concat_ws',
  'left',
  'right',
  'reverse',
  'md5',
  'starts_with',
  'regexp_replace',
  'regexp_match',
  'regexp_matches',
  'regexp_split_to_array',
  'regexp_split_to_table',
  'regexp_like',
  'regexp_count',
  'regexp_substr',
  'regexp_instr',
  'format',
  'quote_ident',
  'quote_literal',
  'quote_nullable',
  'ascii',
  'chr',
  'to_hex',
  'encode',
  'decode',
  'string_to_array',
  'array_to_string',
  'textlen',
  'normalize',
  'overlay',
  // numbers
  'abs',
  'ceil',
  'ceiling',
  'floor',
  'round',
  'trunc',
  'sqrt',
  'cbrt',
  'power',
  'pow',
  'mod',
  'div',
  'exp',
  'ln',
  'log',
  'log10',
  'sign',
  'pi',
  'random',
  'width_bucket',
  'gcd',
  'lcm',
  'degrees',
  'radians',
  // casts written as calls
  'int2',
  'int4',
  'int8',
  'float4',
  'float8',
  'numeric',
  'text',
  'varchar',
  'bpchar',
  'bool',
  'date',
  'time',
  'timestamp',
  'timestamptz',
  'interval',
  'json',
  'jsonb',
  'uuid',
  // dates and times
  'now',
  'statement_timestamp',
  'transaction_timestamp',
  'clock_timestamp',
  'date_trunc',
  'date_part',
  'date_bin',
  'extract',
  'age',
  'to_char',
  'to_date',
  'to_timestamp',
  'to_number',
  'make_date',
  'make_time',
  'make_timestamp',
  'make_timestamptz',
  'make_interval',
  'justify_days',
  'justify_hours',
  'justify_interval',
  'isfinite',
  'timezone',
  // JSON
  'jsonb_array_elements',
  'jsonb_array_elements_text',
  'json_array_elements',
  'json_array_elements_text',
  'jsonb_each',
  'jsonb_each_text',
  'json_each',
  'json_each_text',
  'jsonb_object_keys',
  'json_object_keys',
  'jsonb_array_length',
  'json_array_length',
  'jsonb_typeof',
  'json_typeof',
  'jsonb_extract_path',
  'jsonb_extract_path_text',
  'json_extract_path',
  'json_extract_path_text',
  'jsonb_build_object',
  'jsonb_build_array',
  'json_build_object',
  'json_build_array',
  'to_jsonb',
  'to_json',
  'row_to_json',
  'array_to_json',
  'jsonb_path_query',
  'jsonb_path_query_array',
  'jsonb_path_query_first',
  'jsonb_path_exists',
  'jsonb_path_match',
  'jsonb_strip_nulls',
  'json_strip_nulls',
  'jsonb_pretty',
  'jsonb_set',
  'jsonb_insert',
  'jsonb_object',
  'jsonb_to_record',
  'jsonb_to_recordset',
  // full text search and trigrams
  'to_tsvector',
  'to_tsquery',
  'plainto_tsquery',
  'phraseto_tsquery',
  'websearch_to_tsquery',
  'ts_rank',
  'ts_rank_cd',
  'ts_headline',
  'setweight',
  'numnode',
  'querytree',
  'strip',
  'tsvector_to_array',
  'array_to_tsvector',
  'ts_delete',
  'ts_filter',
  'similarity',
  'word_similarity',
  'strict_word_similarity',
  'show_trgm',
  // arrays, series, misc
  'array_length',
  'cardinality',
  'unnest',
  'array_position',
  'array_positions',
  'array_append',
  'array_prepend',
  'array_cat',
  'array_remove',
  'array_replace',
  'array_lower',
  'array_upper',
  'array_ndims',
  'array_dims',
  'generate_subscripts',
  'generate_series',
  'coalesce',
  'nullif',
  'greatest',
  'least',
  'gen_random_uuid',
  'num_nonnulls',
  'num_nulls',
]);
/** Where harmless functions live; a function of any other schema is refused. */
const FUNCTION_SCHEMAS = new Set(['', 'pg_catalog', 'extensions']);
/** Types whose constants print another object's name (relations, schemas, roles, functions, types by OID). */
const NAME_TYPES = new Set(['regclass', 'regnamespace', 'regproc', 'regprocedure', 'regoper', 'regoperator', 'regtype', 'regrole', 'regcollation']);
/** Plan keys that hold names, not expressions. */
const NAME_KEYS = new Set([
  'Node Type',
  'Relation Name',
  'Schema',
  'Alias',
  'Index Name',
  'CTE Name',
  'Subplan Name',
  'Function Name',
  'Join Type',
  'Strategy',
  'Parent Relationship',
  'Scan Direction',
  'Sort Method',
  'Sort Space Type',
  'Partial Mode',
  'Command',
  'Operation',
  'Sampling Method',
]);
const TYPE_WORDS = new Set(['varying', 'precision', 'with', 'without', 'time', 'zone']);

const refusePlan = (message: string): never => {
  throw new ValidationError(message, [{ path: 'query', message }]);
};

/** Checks one deparsed expression of a plan: functions it calls and name-typed constants. */
function checkExpression(expr: string): void {
  let toks: Token[];
  try {
    toks = tokenizeSql(expr);
  } catch {
    refusePlan('the plan has an expression analyze cannot check');
  }
  for (let i = 0; i < toks!.length; i++) {
    const t = toks![i];
    const next = toks![i + 1];
    if (t.kind === 'op' && t.value === '::') {
      // A cast: the type name (maybe qualified or several words) and its typmod are not calls.
      let j = i + 1;
      while (toks![j] && (toks![j].kind === 'word' || toks![j].kind === 'quoted' || (toks![j].kind === 'punct' && toks![j].value === '.'))) {
        if (NAME_TYPES.has(toks![j].value))
          refusePlan(`the query uses a ${toks![j].value} value, which names objects other groups may own: analyze does not allow it`);
        j++;
        if (!TYPE_WORDS.has(toks![j]?.value ?? '') && toks![j]?.value !== '.' && toks![j - 1].value !== '.') break;
      }
      if (toks![j]?.kind === 'punct' && toks![j].value === '(') {
        let k = j + 1;
        while (toks![k] && (toks![k].kind === 'number' || (toks![k].kind === 'punct' && toks![k].value === ','))) k++;
        if (toks![k]?.kind === 'punct' && toks![k].value === ')') j = k + 1;
      }
      i = j - 1;
      continue;
    }
    if ((t.kind === 'word' || t.kind === 'quoted') && next?.kind === 'punct' && next.value === '(') {
      // PostgreSQL prints every function name in lower case or quoted: an unquoted word with a
      // capital is SQL syntax (COALESCE, ANY, OVER, FILTER, EXTRACT, ROW, ARRAY...).
      if (t.kind === 'word' && /[A-Z]/.test(expr.slice(t.pos, t.pos + t.value.length))) continue;
      const qualified =
        toks![i - 1]?.kind === 'punct' && toks![i - 1].value === '.' && (toks![i - 2]?.kind === 'word' || toks![i - 2]?.kind === 'quoted');
      checkFunction(qualified ? toks![i - 2].value : '', t.value);
    }
  }
}

function checkFunction(schema: string, name: string): void {
  if (!FUNCTION_SCHEMAS.has(schema) || !HARMLESS_FUNCTIONS.has(name)) {
    refusePlan(
      `function ${schema ? `${schema}.` : ''}${name}() is not allowed in analyze: only functions that compute on their arguments are (no files, settings, sessions, locks, catalogs or statistics)`,
    );
  }
}

/**
 * Refuses a plan (EXPLAIN (VERBOSE, FORMAT JSON), before anything ran) that scans a relation
 * outside `schema` — a view's or a catalog's included, since plans show them expanded — or calls
 * any function not on the allowlist, in any node.
 */
export function checkPlan(plan: unknown, schema: string): void {
  const foreign = new Set<string>();
  const stack: unknown[] = [plan];
  while (stack.length) {
    const node = stack.pop();
    if (typeof node === 'string') {
      checkExpression(node);
      continue;
    }
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    if (!node || typeof node !== 'object') continue;
    const o = node as Record<string, unknown>;
    if (typeof o['Relation Name'] === 'string' && o.Schema !== schema) foreign.add(`${String(o.Schema ?? '?')}.${o['Relation Name']}`);
    if (typeof o['Function Name'] === 'string') checkFunction(String(o.Schema ?? ''), o['Function Name']);
    if (typeof o['Sampling Method'] === 'string' && !['system', 'bernoulli'].includes(o['Sampling Method'])) checkFunction('', o['Sampling Method']);
    for (const [k, v] of Object.entries(o)) {
      if (NAME_KEYS.has(k)) continue;
      if (typeof v === 'string' || (v && typeof v === 'object')) stack.push(v);
    }
  }
  if (foreign.size) {
    throw new ValidationError(`The query reads ${[...foreign].sort().join(', ')}, outside this group's schema "${schema}"`, [
      { path: 'query', message: "may only read tables of this group's own schema" },
    ]);
  }
}

/**
 * A PostgreSQL error of the caller's statement as a 400. Messages of data errors (class 22) lose
 * their quoted values: the value may come from somewhere the caller could not read.
 */
function statementError(err: Error & { code: string }, timeoutMs: number): ValidationError {
  const { code } = err;
  let message: string;
  if (code === '57014') message = `query exceeded the statement timeout of ${timeoutMs} ms`;
  else if (code === '25006') message = 'query tried to write: analyze runs in a read-only transaction';
  else if (code === '53100' || code === '53400' || code === '54000') message = 'query exceeded the temporary file or memory limit of analyze';
  else if (code.startsWith('22'))
    message = `PostgreSQL refused the query: ${err.message.replace(/"(?:[^"]|"")*"/g, '"…"').replace(/:\s*[^:]*$/, (m) => (m.includes('"…"') ? m : ''))}`;
  else if (['42', '0A', '25', '2F', '3F', '21', '44'].some((p) => code.startsWith(p))) message = `PostgreSQL refused the query: ${err.message}`;
  else message = 'PostgreSQL refused the query';
  return new ValidationError(message, [{ path: 'query', message: `${message} (SQLSTATE ${code})` }]);
}

// ---------------------------------------------------------------------------------------------

/** Introspection of this instance's schema; the figures of every answer are computed, never fixed. */
export function createDatabaseService(deps: DatabaseServiceDeps) {
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
    /** Tables of this schema with columns, indexes, constraints, row estimates and sizes. */
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

    /**
     * The plan of one read-only statement (EXPLAIN (FORMAT JSON), with ANALYZE when asked) in a
     * READ ONLY transaction with a statement timeout; anything but one SELECT → 400.
     */
    async analyze(body: unknown, _ctx: RequestCtx) {
      const { query, analyze } = parseBody(AnalyzeBody, body);
      const statement = checkReadOnlyStatement(query);
      let result;
      try {
        result = await deps.analyzer.explain(statement, {
          analyze,
          timeoutMs: deps.analyzeTimeoutMs,
          workMemKb: ANALYZE_WORK_MEM_KB,
          tempFileLimitKb: ANALYZE_TEMP_FILE_LIMIT_KB,
          inspect: (plan) => checkPlan(plan, repo.schema),
        });
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        // Any SQLSTATE of the caller's statement (XX000 from pg_describe_object included) is a 400;
        // an outage (08, 57P0x, 53300) or a driver error is not.
        if (err instanceof ValidationError || typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code) || isDatabaseUnavailable(err)) throw err;
        throw statementError(err as Error & { code: string }, deps.analyzeTimeoutMs);
      }
      return {
        schema: repo.schema,
        analyzed: analyze,
        read_only: true,
        statement_timeout_ms: deps.analyzeTimeoutMs,
        search_path: result.search_path,
        note:
          `Run as ${deps.analyzer.restricted ? "a role that may only read this group's tables" : "the server's own database user"}, on a connection opened for this call and closed after it, in a rolled-back READ ONLY transaction. ` +
          "Unqualified names resolve in this instance's schema; a plan that reads a relation outside it or calls a function off the allowlist is refused before it runs." +
          (analyze ? ' With analyze the statement was executed to measure it.' : ' The statement was planned, not executed.'),
        plan: result.plan,
      };
    },
  };
}

/** The database use cases both transports call (REST /database/*, MCP tools). */
export type DatabaseService = ReturnType<typeof createDatabaseService>;
