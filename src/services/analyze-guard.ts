// The analyze guard of POST /database/analyze (MCP analyze_query). It judges the statement on
// PostgreSQL's own parse tree (libpg-query: the server's parser compiled to WebAssembly) before
// anything reaches the server, because planning already runs code: the planner folds functions
// over constants. Every node kind, function, operator, cast type and relation must be on an
// allowlist, and the values constant expressions can grow to are bounded (analyze-size.ts). After planning, the plan PostgreSQL resolved is checked again (a second line).
import { loadModule, parse, scanSync, type ScanToken } from 'libpg-query';
import { ValidationError } from '../domain/errors.js';
import { CAST_TYPES, checkConstantSizes } from './analyze-size.js';

/** Thrown by the guard: a 400 naming what is not allowed. */
function refuse(message: string, hint?: string): never {
  throw new ValidationError(message, [{ path: 'query', message }], hint);
}

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
  // what SQL syntax becomes (SIMILAR TO, IS NORMALIZED, OVERLAPS)
  'similar_to_escape',
  'is_normalized',
  'overlaps',
  'like_escape',
]);

/** Where allowlisted functions and operators may be named explicitly. */
const FUNCTION_SCHEMAS = new Set(['', 'pg_catalog', 'extensions']);

/** Built-in operators (text, numbers, dates, JSON, arrays, full text search, trigrams). */
const OPERATORS = new Set(
  (
    '+ - * / % ^ |/ ||/ @ & | # ~ << >> = <> != < > <= >= || ~~ ~~* !~~ !~~* ~* !~ !~* ^@ -> ->> #> #>> @> <@ ? ?| ?& @? @@ @@@ #- && !! <-> ' +
    '<% %> <<% %>> <<-> <->> <<<-> <->>>'
  ).split(' '),
);
/** Names BETWEEN is written with in the parse tree (it becomes >= and <=). */
const BETWEEN_NAMES = new Set(['BETWEEN', 'NOT BETWEEN', 'BETWEEN SYMMETRIC', 'NOT BETWEEN SYMMETRIC']);

/** Parse-tree node kinds a read-only SELECT may use; anything else is refused by name. */
const NODE_KINDS = new Set([
  'SelectStmt',
  'ResTarget',
  'ColumnRef',
  'A_Star',
  'A_Const',
  'A_Expr',
  'BoolExpr',
  'NullTest',
  'BooleanTest',
  'CaseExpr',
  'CaseWhen',
  'CoalesceExpr',
  'MinMaxExpr',
  'SubLink',
  'FuncCall',
  'NamedArgExpr',
  'TypeCast',
  'TypeName',
  'CollateClause',
  'A_ArrayExpr',
  'A_Indices',
  'A_Indirection',
  'RowExpr',
  'SQLValueFunction',
  'GroupingFunc',
  'GroupingSet',
  'RangeVar',
  'RangeSubselect',
  'RangeFunction',
  'RangeTableSample',
  'JoinExpr',
  'CommonTableExpr',
  'CTESearchClause',
  'CTECycleClause',
  'ColumnDef',
  'SortBy',
  'WindowDef',
  'Alias',
  'List',
  'String',
  'Integer',
  'Float',
  'Boolean',
  'BitString',
]);

/** Statements that write, named as the refusal names them. */
const WRITE_KINDS: Record<string, string> = {
  InsertStmt: 'INSERT',
  UpdateStmt: 'UPDATE',
  DeleteStmt: 'DELETE',
  MergeStmt: 'MERGE',
  TruncateStmt: 'TRUNCATE',
};
const DDL_KIND = /^(Create|Drop|Alter|Grant|Comment|SecLabel|Reindex|Cluster|Refresh|Vacuum|Import|Index|Rename|Rule|View|Define|CompositeType)/;

/** What a statement kind is called in SQL: CreateTableAsStmt → CREATE, VacuumStmt → VACUUM. */
const sqlWordOf = (kind: string) => (kind === 'IndexStmt' || kind === 'ViewStmt' ? 'CREATE' : (/^[A-Z][a-z]+/.exec(kind)?.[0] ?? kind).toUpperCase());

const SINGLE = 'send one SELECT, WITH ... SELECT or VALUES statement';
const TOO_DEEP = 'query is nested too deeply for analyze to check: simplify it';

/** A parse-tree node: `{ Kind: fields }`. */
type Node = Record<string, unknown>;
const kindOf = (v: unknown): string | undefined => {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const keys = Object.keys(v);
  return keys.length === 1 && /^[A-Z]/.test(keys[0]) ? keys[0] : undefined;
};
const stringsOf = (list: unknown): string[] =>
  Array.isArray(list) ? list.map((n) => ((n as { String?: { sval?: string } }).String?.sval ?? '*') as string) : [];

export interface CheckedStatement {
  /** The statement as sent to PostgreSQL: the caller's text without a trailing semicolon. */
  statement: string;
  /**
   * Names selected from a row (`t.name`, `(expr).name`). PostgreSQL reads `t.f` as the call
   * `f(t)` when `f` is no column of `t`: the caller must make sure none of these names a function
   * off the allowlist (see checkFieldNames).
   */
  fieldNames: string[];
}

/** Loads the parser's WebAssembly once; later calls return at once. */
export const loadParser = (): Promise<void> => loadModule();

/**
 * Judges one statement on PostgreSQL's parse tree: exactly one SELECT (WITH ... SELECT, VALUES),
 * no SELECT INTO, locking clause, data-modifying CTE or parameter; every function, operator,
 * cast type and node kind on its allowlist; relations unqualified or in `schema`, and none of
 * pg_catalog's. Throws a 400 naming what it refused; sends nothing anywhere.
 */
export async function checkStatement(query: string, schema: string): Promise<CheckedStatement> {
  let tree: { stmts?: { stmt?: Node; stmt_location?: number; stmt_len?: number }[] };
  try {
    tree = await parse(query);
  } catch (err) {
    if (err instanceof RangeError) refuse(TOO_DEEP);
    const detail = (err as { sqlDetails?: { cursorPosition?: number } }).sqlDetails;
    const at = typeof detail?.cursorPosition === 'number' ? ` (at character ${detail.cursorPosition + 1})` : '';
    refuse(`query is not valid SQL: ${(err as Error).message}${at}`);
  }
  const stmts = tree.stmts ?? [];
  if (stmts.length === 0) refuse(`query is empty: ${SINGLE}`);
  if (stmts.length > 1) refuse(`query must be a single statement: found ${stmts.length} (separated by ";")`);
  const [{ stmt, stmt_location: from = 0, stmt_len: len }] = stmts;
  const kind = kindOf(stmt);
  if (!stmt || !kind) refuse(`query is empty: ${SINGLE}`);
  if (WRITE_KINDS[kind]) refuse(`data-modifying statements are not allowed (found ${WRITE_KINDS[kind]}): ${SINGLE}`);
  if (DDL_KIND.test(kind)) refuse(`DDL and maintenance commands are not allowed (found ${sqlWordOf(kind)}): ${SINGLE}`);
  if (kind !== 'SelectStmt') refuse(`only a single SELECT, WITH ... SELECT or VALUES statement can be analyzed; this one is ${sqlWordOf(kind)}`);
  const fieldNames = new Set<string>();
  try {
    walk(stmt, { schema, fieldNames });
    checkConstantSizes(stmt);
  } catch (err) {
    if (err instanceof RangeError) refuse(TOO_DEEP);
    throw err;
  }
  // Locations are byte offsets into the UTF-8 text.
  const bytes = Buffer.from(query, 'utf8');
  const statement = bytes
    .subarray(from, len === undefined ? bytes.length : from + len)
    .toString('utf8')
    .trimEnd();
  return { statement, fieldNames: [...fieldNames].filter((n) => !HARMLESS_FUNCTIONS.has(n)) };
}

/** Refuses field names that name functions (of the schemas a call could resolve in). */
export function checkFieldNames(functionNames: readonly string[]): void {
  if (functionNames.length === 0) return;
  const name = [...functionNames].sort()[0];
  refuse(
    `.${name} is not allowed in analyze: PostgreSQL reads x.${name} as a call of function ${name}(x) (attribute notation), and ${name}() is not on the allowlist`,
    `If ${name} is a column, select it from a table of this schema with its own name (not through a row value)`,
  );
}

interface WalkState {
  schema: string;
  fieldNames: Set<string>;
}

/** Fields that hold a node without its `{ Kind: ... }` wrapper (set operations' arms, types). */
const BARE_NODES: Record<string, string> = {
  larg: 'SelectStmt',
  rarg: 'SelectStmt',
  typeName: 'TypeName',
  collClause: 'CollateClause',
  intoClause: 'IntoClause',
};

function walk(value: unknown, st: WalkState): void {
  if (Array.isArray(value)) {
    for (const v of value) walk(v, st);
    return;
  }
  if (!value || typeof value !== 'object') return;
  const kind = kindOf(value);
  if (kind) visit(kind, (value as Node)[kind] as Node, st);
  else for (const v of Object.values(value)) walk(v, st);
}

function visit(kind: string, node: Node, st: WalkState): void {
  checkNode(kind, node, st);
  for (const [field, v] of Object.entries(node)) {
    const bare = BARE_NODES[field];
    if (bare && v && typeof v === 'object' && !Array.isArray(v) && !kindOf(v)) visit(bare, v as Node, st);
    else walk(v, st);
  }
}

function checkNode(kind: string, n: Node, st: WalkState): void {
  if (WRITE_KINDS[kind]) refuse(`data-modifying statements are not allowed (found ${WRITE_KINDS[kind]}), including inside WITH`);
  if (kind === 'ParamRef') refuse('parameters ($1, ...) are not allowed: write the values into the statement');
  if (!NODE_KINDS.has(kind)) refuse(`${kind} is not allowed in analyze: only plain SELECT syntax is (no XML, JSON constructors or other statements)`);
  switch (kind) {
    case 'SelectStmt':
      if (n.intoClause) refuse('SELECT INTO is not allowed: it creates a table; analyze plans read-only statements');
      if (n.lockingClause) refuse('locking clauses (FOR UPDATE / FOR SHARE) are not allowed: analyze plans read-only statements');
      return;
    case 'FuncCall':
      return checkFunction(stringsOf(n.funcname));
    case 'A_Expr': {
      const names = stringsOf(n.name);
      if (!(String(n.kind).includes('BETWEEN') && names.every((s) => BETWEEN_NAMES.has(s)))) checkOperator(names);
      return;
    }
    case 'SubLink':
      if (n.operName) checkOperator(stringsOf(n.operName));
      return;
    case 'SortBy':
      if (n.useOp) checkOperator(stringsOf(n.useOp));
      return;
    case 'TypeName':
      return checkTypeName(n);
    case 'ColumnRef': {
      const fields = stringsOf(n.fields);
      if (fields.length >= 2 && fields[fields.length - 1] !== '*') st.fieldNames.add(fields[fields.length - 1]);
      return;
    }
    case 'A_Indirection':
      for (const i of (n.indirection as unknown[]) ?? []) {
        const name = (i as { String?: { sval?: string } }).String?.sval;
        if (name !== undefined) st.fieldNames.add(name);
      }
      return;
    case 'RangeVar':
      return checkRelation(n, st.schema);
    case 'RangeTableSample': {
      const method = stringsOf(n.method);
      if (method.length !== 1 || !['system', 'bernoulli'].includes(method[0]))
        refuse(`TABLESAMPLE ${method.join('.')} is not allowed: use SYSTEM or BERNOULLI`);
      return;
    }
    case 'CollateClause': {
      const name = stringsOf(n.collname);
      if (name.length > 2 || (name.length === 2 && name[0] !== 'pg_catalog'))
        refuse(`collation ${name.join('.')} is not allowed: name a built-in collation`);
      return;
    }
    default:
      return;
  }
}

function checkFunction(qualified: string[]): void {
  const name = qualified[qualified.length - 1];
  const schema = qualified.length > 1 ? qualified.slice(0, -1).join('.') : '';
  if (!FUNCTION_SCHEMAS.has(schema) || !HARMLESS_FUNCTIONS.has(name)) {
    refuse(
      `function ${qualified.join('.')}() is not allowed in analyze: only functions that compute on their arguments are (no files, settings, sessions, locks, catalogs or statistics)`,
    );
  }
}

function checkOperator(qualified: string[]): void {
  const op = qualified[qualified.length - 1];
  const schema = qualified.length > 1 ? qualified.slice(0, -1).join('.') : '';
  if (!FUNCTION_SCHEMAS.has(schema) || !OPERATORS.has(op)) {
    refuse(`operator ${qualified.length > 1 ? `OPERATOR(${qualified.join('.')})` : op} is not allowed in analyze: only built-in operators are`);
  }
}

function checkTypeName(t: Node): void {
  const names = stringsOf(t.names);
  const name = names[names.length - 1];
  const schema = names.length > 1 ? names.slice(0, -1).join('.') : '';
  if (t.pct_type || t.setof || (schema !== '' && schema !== 'pg_catalog') || !CAST_TYPES.has(name)) {
    refuse(
      `type ${names.join('.')} is not allowed in analyze: casts and column definitions may use plain built-in types only (numbers, text, dates and times, JSON, uuid, bytea, full text search)`,
    );
  }
}

/**
 * Tables of the group's schema analyze may not read: the webhook tables hold WEBHOOK_URLS as the
 * operator wrote them, credentials and query tokens included, which GET /webhooks never shows (a
 * statement that fails only when a URL holds some text would spell them out a bit at a time).
 */
const OPERATOR_TABLES: ReadonlySet<string> = new Set(['webhook_endpoint', 'webhook_delivery']);

const operatorTable = (name: string): never =>
  refuse(
    `The query reads ${name}, which holds the operator's webhook configuration: analyze may not read it`,
    'GET /webhooks and GET /webhooks/failed show the endpoints and deliveries',
  );

function checkRelation(r: Node, schema: string): void {
  const name = String(r.relname);
  if (OPERATOR_TABLES.has(name)) operatorTable(name);
  if (r.catalogname) refuse(`relation ${String(r.catalogname)}.${String(r.schemaname)}.${name} is not allowed: name a table of this group's schema`);
  if (r.schemaname !== undefined && r.schemaname !== schema) {
    throw new ValidationError(`The query reads ${String(r.schemaname)}.${name}, outside this group's schema "${schema}"`, [
      { path: 'query', message: "may only read tables of this group's own schema" },
    ]);
  }
  // An unqualified name resolves in pg_catalog first, where every relation starts with pg_.
  if (r.schemaname === undefined && name.startsWith('pg_')) {
    throw new ValidationError(`The query reads ${name}, a system catalog or view outside this group's schema "${schema}"`, [
      { path: 'query', message: "may only read tables of this group's own schema" },
    ]);
  }
}

// ---------------------------------------------------------------------------------------------
// The plan check, after planning and before an ANALYZE run: what PostgreSQL itself resolved.
// Every relation scanned must be this group's; every function called (in any expression of any
// node, views and subqueries expanded) must be on the allowlist.

/** Types whose constants print another object's name (relations, schemas, roles, functions, types by OID). */
const NAME_TYPES = new Set([
  'regclass',
  'regnamespace',
  'regproc',
  'regprocedure',
  'regoper',
  'regoperator',
  'regtype',
  'regrole',
  'regcollation',
  'regconfig',
  'regdictionary',
]);
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

/** A token of a deparsed plan expression as PostgreSQL's own scanner splits it. */
interface Word {
  /** word: an identifier or keyword (quoted ones unquoted); else the token's text. */
  kind: 'word' | 'other';
  value: string;
  /** Written without quotes and with a capital: SQL syntax (COALESCE, ANY, ROW), never a function name. */
  syntax: boolean;
}

function wordsOf(expr: string): Word[] {
  let tokens: ScanToken[];
  try {
    tokens = scanSync(expr).tokens;
  } catch {
    refuse('the plan has an expression analyze cannot check');
  }
  return tokens.map((t) => {
    const quoted = t.text.startsWith('"');
    if (t.tokenName === 'IDENT' || t.keywordKind > 0) {
      return {
        kind: 'word',
        value: quoted ? t.text.slice(1, -1).replace(/""/g, '"') : t.text.toLowerCase(),
        syntax: !quoted && /[A-Z]/.test(t.text),
      };
    }
    return { kind: 'other', value: t.text, syntax: false };
  });
}

/** Checks one deparsed expression of a plan: functions it calls and name-typed casts. */
function checkExpression(expr: string): void {
  const w = wordsOf(expr);
  for (let i = 0; i < w.length; i++) {
    const t = w[i];
    if (t.value === '::' && t.kind === 'other') {
      // A cast: the type name (maybe qualified or several words) and its typmod are not calls.
      let j = i + 1;
      while (w[j] && (w[j].kind === 'word' || w[j].value === '.')) {
        if (NAME_TYPES.has(w[j].value))
          refuse(`the query uses a ${w[j].value} value, which names objects other groups may own: analyze does not allow it`);
        j++;
        if (!TYPE_WORDS.has(w[j]?.value ?? '') && w[j]?.value !== '.' && w[j - 1].value !== '.') break;
      }
      if (w[j]?.value === '(') {
        let k = j + 1;
        while (w[k] && (/^[0-9]+$/.test(w[k].value) || w[k].value === ',')) k++;
        if (w[k]?.value === ')') j = k + 1;
      }
      i = j - 1;
      continue;
    }
    if (t.kind === 'word' && !t.syntax && w[i + 1]?.value === '(') {
      const qualified = w[i - 1]?.value === '.' && w[i - 2]?.kind === 'word';
      checkFunction(qualified ? [w[i - 2].value, t.value] : [t.value]);
    }
  }
}

/**
 * Refuses a plan (EXPLAIN (VERBOSE, FORMAT JSON), before anything ran) that scans a relation
 * outside `schema` — a view's or a catalog's included, since plans show them expanded — or calls
 * any function not on the allowlist, in any node. Call loadParser() first.
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
    if (typeof o['Relation Name'] === 'string' && OPERATOR_TABLES.has(o['Relation Name'])) operatorTable(o['Relation Name']);
    if (typeof o['Function Name'] === 'string') checkFunction(o.Schema ? [String(o.Schema), o['Function Name']] : [o['Function Name']]);
    if (typeof o['Sampling Method'] === 'string' && !['system', 'bernoulli'].includes(o['Sampling Method'])) checkFunction([o['Sampling Method']]);
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
export function statementErrorOf(err: Error & { code: string }, timeoutMs: number): ValidationError {
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
