// The size bound of the analyze guard. PostgreSQL's planner folds expressions over constants
// before any plan exists (and before the statement timeout can stop a single function call), so
// nested replace() over literals, or `v || v` through nested subqueries that the planner pulls up
// and substitutes, builds values of hundreds of megabytes while the statement is only being
// planned. This computes, on the parse tree, an upper bound of the bytes every constant-only
// expression can produce and of all of them together, and refuses the statement when either
// exceeds MAX_CONSTANT_BYTES. Expressions over table columns are never folded: they count nothing.
import { ValidationError } from '../domain/errors.js';

/** The most bytes the constant expressions of one analyze statement may produce at planning. */
export const MAX_CONSTANT_BYTES = 1024 * 1024;

/** The longest text of a numeric (131072 digits before the point, 16383 after, sign and point). */
const NUMERIC_TEXT = 131072 + 16383 + 2;
/** What a number, boolean, date or similar fixed-size value counts. */
const FIXED = 32;

type Node = Record<string, unknown>;
const kindOf = (v: unknown): string | undefined => {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const keys = Object.keys(v);
  return keys.length === 1 && /^[A-Z]/.test(keys[0]) ? keys[0] : undefined;
};
const namesOf = (list: unknown): string[] => (Array.isArray(list) ? list.map((n) => (n as { String?: { sval?: string } }).String?.sval ?? '*') : []);

/** Functions whose result has a fixed size (numbers, booleans, dates, hashes). */
const FIXED_FUNCTIONS = new Set(
  (
    'count avg stddev stddev_pop stddev_samp variance var_pop var_samp corr covar_pop covar_samp regr_slope regr_intercept ' +
    'regr_count regr_r2 bool_and bool_or every bit_and bit_or row_number rank dense_rank percent_rank cume_dist ntile ' +
    'length char_length character_length octet_length bit_length position strpos starts_with regexp_like regexp_count ' +
    'regexp_instr ascii chr md5 to_hex textlen abs ceil ceiling floor sign sqrt cbrt ln log log10 pi random width_bucket ' +
    'degrees radians int2 int4 int8 float4 float8 bool date time timestamp timestamptz interval uuid now statement_timestamp ' +
    'transaction_timestamp clock_timestamp date_trunc date_part date_bin extract age to_date to_timestamp make_date make_time ' +
    'make_timestamp make_timestamptz make_interval justify_days justify_hours justify_interval isfinite timezone ' +
    'jsonb_array_length json_array_length jsonb_typeof json_typeof jsonb_path_exists jsonb_path_match ts_rank ts_rank_cd ' +
    'numnode similarity word_similarity strict_word_similarity array_length cardinality array_position array_lower ' +
    'array_upper array_ndims gen_random_uuid num_nonnulls num_nulls is_normalized overlaps'
  ).split(' '),
);
/** Numeric functions whose result can reach numeric's longest text from a few characters. */
const NUMERIC_GROWTH = new Set(['power', 'pow', 'exp', 'round', 'trunc', 'numeric', 'to_number', 'div', 'mod', 'gcd', 'lcm']);
/** Aggregates, window and set-returning functions: evaluated per row while the statement runs, never folded. */
const NOT_FOLDED = new Set(
  (
    'sum min max string_agg array_agg json_agg jsonb_agg json_object_agg jsonb_object_agg percentile_cont percentile_disc ' +
    'mode lag lead first_value last_value nth_value unnest generate_series generate_subscripts jsonb_array_elements ' +
    'jsonb_array_elements_text json_array_elements json_array_elements_text jsonb_each jsonb_each_text json_each ' +
    'json_each_text jsonb_object_keys json_object_keys jsonb_path_query regexp_matches regexp_split_to_table ' +
    'jsonb_to_recordset random clock_timestamp gen_random_uuid'
  ).split(' '),
);
/** Multiplier of the arguments' sizes for functions that grow their input by at most a factor. */
const FACTOR: Record<string, number> = {
  lower: 3,
  upper: 3,
  initcap: 3,
  translate: 4,
  normalize: 18,
  quote_ident: 2,
  quote_literal: 2,
  quote_nullable: 2,
  encode: 4,
  to_char: 16,
  string_to_array: 16,
  regexp_split_to_array: 16,
  show_trgm: 16,
};
/** Functions building JSON, text search or arrays: escaping and per-element overhead grow them. */
const STRUCTURED =
  /^(jsonb?_build_|to_jsonb?$|row_to_json$|array_to_json$|jsonb_object$|to_tsvector$|to_tsquery$|plainto_tsquery$|phraseto_tsquery$|websearch_to_tsquery$|array_to_tsvector$|tsvector_to_array$|setweight$|jsonb?$)/;

/** How a constant cast to a type can grow (see the TypeCast case of checkConstantSizes). */
type CastSize =
  /** To a fixed size (numbers but numeric, booleans, dates and times, uuid, addresses). */
  | 'fixed'
  /** To numeric's text: a literal's exponent spells out as digits. */
  | 'numeric'
  /** To JSON text, its numbers spelled out. */
  | 'json'
  /** To a structure several times its text (full text search values, JSON paths). */
  | 'structured'
  /** To its text. */
  | 'text';

/**
 * The types analyze lets a value be cast to (the guard refuses every other, analyze-guard.ts),
 * each with how a constant cast to it can grow: one table, so that a type is added in one place.
 * Plain built-ins only: unqualified, these resolve in pg_catalog before the group's schema, so a
 * domain of the same name cannot stand in for them. No reg* type: its input reads the catalogs
 * and its output prints other groups' objects.
 */
export const CAST_TYPES: ReadonlyMap<string, CastSize> = new Map<string, CastSize>([
  ['bool', 'fixed'],
  ['int2', 'fixed'],
  ['int4', 'fixed'],
  ['int8', 'fixed'],
  ['int', 'fixed'],
  ['integer', 'fixed'],
  ['smallint', 'fixed'],
  ['bigint', 'fixed'],
  ['float4', 'fixed'],
  ['float8', 'fixed'],
  ['real', 'fixed'],
  ['numeric', 'numeric'],
  ['decimal', 'numeric'],
  ['text', 'text'],
  ['varchar', 'text'],
  ['bpchar', 'text'],
  ['char', 'text'],
  ['date', 'fixed'],
  ['time', 'fixed'],
  ['timetz', 'fixed'],
  ['timestamp', 'fixed'],
  ['timestamptz', 'fixed'],
  ['interval', 'fixed'],
  ['json', 'json'],
  ['jsonb', 'json'],
  ['jsonpath', 'structured'],
  ['uuid', 'fixed'],
  ['bytea', 'text'],
  ['tsvector', 'structured'],
  ['tsquery', 'structured'],
  ['bit', 'text'],
  ['varbit', 'text'],
  ['inet', 'fixed'],
  ['cidr', 'fixed'],
]);

/** A literal that is one number (1e5, '-2.5E+10'). */
const NUMBER = /^\s*[+-]?[0-9.]+([eE][+-]?[0-9]+)?\s*$/;
/** Comparison operators: their value is a boolean. */
const COMPARISONS = new Set([
  '=',
  '<>',
  '!=',
  '<',
  '>',
  '<=',
  '>=',
  '~~',
  '~~*',
  '!~~',
  '!~~*',
  '~',
  '~*',
  '!~',
  '!~*',
  '@>',
  '<@',
  '?',
  '?|',
  '?&',
  '@?',
  '@@',
  '&&',
  '^@',
]);

/** The bytes the numbers in a text can print as: an exponent spells out as that many digits. */
function spelledSize(text: string): number {
  let size = Buffer.byteLength(text, 'utf8');
  for (const m of text.matchAll(/[eE][+-]?0*([0-9]{1,7})/g)) size += Math.min(Number(m[1]), NUMERIC_TEXT);
  return size;
}

interface Size {
  /** Whether the planner may fold the expression into a constant. */
  constant: boolean;
  /** Upper bound of the bytes of its value (0 when not constant). */
  out: number;
  /** Upper bound of the bytes every folded value inside it produces, its own included. */
  work: number;
}
const NONE: Size = { constant: false, out: 0, work: 0 };

/** What refusing names: the function or operator, else the construct. */
function labelOf(kind: string, n: Node): string {
  if (kind === 'FuncCall') return `function ${namesOf(n.funcname).join('.')}()`;
  if (kind === 'A_Expr') return `operator ${namesOf(n.name).join('.')}`;
  if (kind === 'ColumnRef') return `column ${namesOf(n.fields).join('.')} (a constant of a subquery the planner substitutes)`;
  if (kind === 'TypeCast') return `cast to ${namesOf((n.typeName as Node | undefined)?.names).join('.')}`;
  return 'the statement';
}

/**
 * Outputs of subqueries, CTEs, VALUES lists and function scans by the names a column reference
 * may use for them: the planner pulls such subqueries up and puts their expressions in place of
 * the references, so a reference is as large as what it names (the largest, when names repeat).
 */
class Outputs {
  readonly columns = new Map<string, unknown[]>();
  /** A range's name (alias or CTE name): all its outputs, for a whole-row reference. */
  readonly rows = new Map<string, unknown[]>();

  add(map: Map<string, unknown[]>, name: string, exprs: unknown[]) {
    const list = map.get(name);
    if (list) list.push(...exprs);
    else map.set(name, [...exprs]);
  }

  /** The target expressions of a SelectStmt (every arm of a set operation), by position. */
  targetsOf(select: unknown): unknown[][] {
    const s = (kindOf(select) ? (select as Node).SelectStmt : select) as Node | undefined;
    if (!s) return [];
    if (s.larg || s.rarg) {
      const [l, r] = [this.targetsOf(s.larg), this.targetsOf(s.rarg)];
      return l.map((col, i) => [...col, ...(r[i] ?? [])]);
    }
    if (Array.isArray(s.valuesLists)) {
      const cols: unknown[][] = [];
      for (const row of s.valuesLists as Node[]) {
        const items = ((row.List as Node | undefined)?.items as unknown[] | undefined) ?? [];
        items.forEach((e, i) => (cols[i] ??= []).push(e));
      }
      return cols;
    }
    return ((s.targetList as unknown[] | undefined) ?? []).map((t) => [((t as Node).ResTarget as Node | undefined)?.val]);
  }

  /** A range (subquery, CTE, function scan) under `name`, its columns named by `colnames` when given. */
  range(name: string | undefined, colnames: unknown, cols: unknown[][]) {
    const names = namesOf(colnames);
    cols.forEach((exprs, i) => names[i] !== undefined && this.add(this.columns, names[i], exprs));
    if (name !== undefined) this.add(this.rows, name, cols.flat());
  }

  collect(value: unknown): void {
    if (Array.isArray(value)) {
      for (const v of value) this.collect(v);
      return;
    }
    if (!value || typeof value !== 'object') return;
    const kind = kindOf(value);
    const n = (kind ? (value as Node)[kind] : value) as Node;
    if (kind === 'SelectStmt' || (!kind && ('targetList' in n || 'valuesLists' in n || 'larg' in n))) {
      for (const t of (n.targetList as unknown[] | undefined) ?? []) {
        const r = (t as Node).ResTarget as Node | undefined;
        if (r?.val !== undefined) this.add(this.columns, typeof r.name === 'string' ? r.name : implicitName(r.val), [r.val]);
      }
      this.targetsOf(n).forEach((exprs, i) => Array.isArray(n.valuesLists) && this.add(this.columns, `column${i + 1}`, exprs));
    } else if (kind === 'RangeSubselect') {
      const alias = n.alias as Node | undefined;
      this.range(alias?.aliasname as string | undefined, alias?.colnames, this.targetsOf(n.subquery));
    } else if (kind === 'CommonTableExpr') {
      this.range(n.ctename as string, n.aliascolnames, this.targetsOf(n.ctequery));
    } else if (kind === 'RangeFunction') {
      // A function scan whose call folds to a constant becomes that constant (its columns too).
      const alias = n.alias as Node | undefined;
      const calls = ((n.functions as Node[] | undefined) ?? []).map((f) => [((f.List as Node | undefined)?.items as unknown[] | undefined)?.[0]]);
      this.range(alias?.aliasname as string | undefined, alias?.colnames, calls);
      if (alias?.aliasname !== undefined && alias.colnames === undefined) this.add(this.columns, alias.aliasname as string, calls.flat());
    }
    for (const v of Object.values(n)) this.collect(v);
  }
}

/** The name PostgreSQL gives an unnamed output column: a column's, a function's, a cast's type. */
function implicitName(v: unknown): string {
  const kind = kindOf(v);
  const n = kind ? ((v as Node)[kind] as Node) : {};
  if (kind === 'ColumnRef') return namesOf(n.fields).at(-1) ?? '?column?';
  if (kind === 'FuncCall') return namesOf(n.funcname).at(-1) ?? '?column?';
  if (kind === 'A_Indirection') return namesOf(n.indirection).at(-1) ?? implicitName(n.arg);
  if (kind === 'TypeCast') {
    const inner = implicitName(n.arg);
    return inner === '?column?' ? (namesOf((n.typeName as Node | undefined)?.names).at(-1) ?? inner) : inner;
  }
  return kind === 'CaseExpr' ? 'case' : '?column?';
}

/**
 * Refuses (400 naming `query`, the function and the bound) a statement whose constant-only
 * expressions could produce more than MAX_CONSTANT_BYTES at planning, one of them or all together.
 */
export function checkConstantSizes(stmt: unknown): void {
  const outputs = new Outputs();
  outputs.collect(stmt);
  const memo = new Map<object, Size>();
  const active = new Set<object>();

  const refuse = (label: string, bytes: number): never => {
    const message = `${label} over constants could produce up to ${bytes > 1e15 ? 'more than 10^15' : Math.ceil(bytes)} bytes while PostgreSQL plans the statement; analyze allows ${MAX_CONSTANT_BYTES} bytes of constant values per statement`;
    throw new ValidationError(
      message,
      [{ path: 'query', message }],
      'Make the constants smaller, or compute the value from table columns (which the planner does not fold)',
    );
  };

  const sizeOfAll = (values: unknown[]): Size[] => values.map(size);
  const sum = (xs: Size[], f: (s: Size) => number) => xs.reduce((a, s) => a + f(s), 0);

  /** Largest of what a name stands for; constant if any of it is. */
  const lookup = (exprs: unknown[] | undefined, combine: 'max' | 'sum'): Size => {
    if (!exprs?.length) return NONE;
    const sizes = sizeOfAll(exprs).filter((s) => s.constant);
    if (sizes.length === 0) return { ...NONE, work: 0 };
    const out = combine === 'max' ? Math.max(...sizes.map((s) => s.out)) : sum(sizes, (s) => s.out);
    return { constant: true, out, work: combine === 'max' ? Math.max(...sizes.map((s) => s.work)) : sum(sizes, (s) => s.work) };
  };

  function size(value: unknown): Size {
    if (!value || typeof value !== 'object') return NONE;
    if (Array.isArray(value)) return { constant: false, out: 0, work: sum(sizeOfAll(value), (s) => s.work) };
    const known = memo.get(value);
    if (known) return known;
    // A name that (through subqueries) refers to itself: a recursive CTE, run while executing.
    if (active.has(value)) return NONE;
    active.add(value);
    const kind = kindOf(value);
    const node = (kind ? (value as Node)[kind] : value) as Node;
    const s = kind ? sizeOfKind(kind, node) : { constant: false, out: 0, work: sum(sizeOfAll(Object.values(node)), (x) => x.work) };
    active.delete(value);
    if (s.out > MAX_CONSTANT_BYTES || s.work > MAX_CONSTANT_BYTES) refuse(labelOf(kind ?? '', node), Math.max(s.out, s.work));
    memo.set(value, s);
    return s;
  }

  /** A folded value of `out` bytes over children `args`. */
  const folded = (args: Size[], out: number): Size => ({ constant: true, out, work: sum(args, (a) => a.work) + out });
  const notFolded = (parts: Size[]): Size => ({ constant: false, out: 0, work: sum(parts, (a) => a.work) });

  function sizeOfKind(kind: string, n: Node): Size {
    switch (kind) {
      case 'A_Const': {
        if (n.isnull) return { constant: true, out: 0, work: 0 };
        const text = (n.sval as Node | undefined)?.sval ?? (n.fval as Node | undefined)?.fval ?? (n.bsval as Node | undefined)?.bsval;
        const out = typeof text !== 'string' ? FIXED : NUMBER.test(text) ? spelledSize(text) : Buffer.byteLength(text, 'utf8');
        return { constant: true, out, work: out };
      }
      case 'ColumnRef': {
        const fields = namesOf(n.fields);
        const last = fields[fields.length - 1];
        if (last === '*') return fields.length === 1 ? NONE : lookup(outputs.rows.get(fields[0]), 'sum');
        const column = lookup(outputs.columns.get(last), 'max');
        const row = fields.length === 1 ? lookup(outputs.rows.get(last), 'sum') : NONE;
        return row.out > column.out ? row : column;
      }
      case 'A_Indirection': {
        const arg = size(n.arg);
        const field = namesOf(n.indirection).filter((f) => f !== '*');
        const named = field.length ? lookup(outputs.columns.get(field[field.length - 1]), 'max') : NONE;
        const subscripts = notFolded(sizeOfAll((n.indirection as unknown[]) ?? []));
        const best = named.out > arg.out ? named : arg;
        return { constant: best.constant, out: best.out, work: best.work + subscripts.work };
      }
      case 'FuncCall':
        return sizeOfCall(n);
      case 'A_Expr': {
        const args = [size(n.lexpr), size(n.rexpr)];
        const op = namesOf(n.name).at(-1) ?? '';
        if (!args.every((a) => a.constant || a === NONE) || !args.some((a) => a.constant)) return notFolded(args);
        const total = sum(args, (a) => a.out);
        if (op === '^') return folded(args, NUMERIC_TEXT);
        if (COMPARISONS.has(op)) return folded(args, FIXED);
        // ||, arithmetic (a product has at most the digits of both), JSON and array operators.
        return folded(args, total + FIXED);
      }
      case 'TypeCast': {
        const arg = size(n.arg);
        const type = n.typeName as Node | undefined;
        const name = namesOf(type?.names).at(-1) ?? '';
        if (!arg.constant) return arg;
        // NULL cast to any type is NULL (not a computed text that could spell a long number).
        if (((n.arg as Node | undefined)?.A_Const as Node | undefined)?.isnull) return arg;
        if (type?.arrayBounds) return folded([arg], 8 * arg.out + FIXED);
        // A type the guard refuses is sized as text: the statement is refused either way.
        const cast = CAST_TYPES.get(name) ?? 'text';
        if (cast === 'fixed') return folded([arg], FIXED);
        const literal = ((n.arg as Node | undefined)?.A_Const as Node | undefined)?.sval as Node | undefined;
        if (cast === 'numeric' || cast === 'json') {
          // Numbers in JSON text spell out their exponents; a computed text spelling a number
          // ('1e' || '100000') may read as numeric's longest text.
          const spelled = typeof literal?.sval === 'string' ? spelledSize(literal.sval) : NUMERIC_TEXT + arg.out;
          return folded([arg], cast === 'json' ? 8 * spelled + FIXED : spelled);
        }
        if (cast === 'structured') return folded([arg], 8 * arg.out + FIXED);
        return folded([arg], arg.out + FIXED);
      }
      case 'CaseExpr':
      case 'CoalesceExpr': {
        // The planner drops branches whose condition is constant: any constant result may stand.
        const results =
          kind === 'CaseExpr'
            ? [...((n.args as Node[] | undefined) ?? []).map((w) => (w.CaseWhen as Node).result), n.defresult]
            : ((n.args as unknown[]) ?? []);
        const all = sizeOfAll([
          n.arg,
          ...(kind === 'CaseExpr' ? ((n.args as Node[] | undefined) ?? []).map((w) => (w.CaseWhen as Node).expr) : []),
          ...results,
        ]);
        const outs = sizeOfAll(results).filter((r) => r.constant);
        return outs.length ? folded(all, Math.max(...outs.map((r) => r.out))) : notFolded(all);
      }
      case 'MinMaxExpr':
      case 'A_ArrayExpr':
      case 'RowExpr': {
        const args = sizeOfAll(((n.args ?? n.elements) as unknown[]) ?? []);
        if (!args.every((a) => a.constant)) return notFolded(args);
        const total = sum(args, (a) => a.out);
        return folded(args, kind === 'MinMaxExpr' ? Math.max(0, ...args.map((a) => a.out)) : total + 8 * args.length + FIXED);
      }
      case 'CollateClause':
      case 'NamedArgExpr':
        return size(n.arg);
      case 'SQLValueFunction':
        return { constant: true, out: FIXED, work: FIXED };
      case 'SubLink':
        // A subquery's value is computed while the statement runs; its own constants still fold.
        return notFolded(sizeOfAll(Object.values(n)));
      default:
        return notFolded(sizeOfAll(Object.values(n)));
    }
  }

  function sizeOfCall(n: Node): Size {
    const name = namesOf(n.funcname).at(-1) ?? '';
    const args = sizeOfAll((n.args as unknown[] | undefined) ?? []);
    const extra = notFolded(sizeOfAll([n.agg_order, n.agg_filter, n.over]));
    const withExtra = (s: Size): Size => ({ ...s, work: s.work + extra.work });
    const a = args.map((x) => x.out);
    if (NOT_FOLDED.has(name) || n.over || n.agg_star || n.agg_distinct || !args.every((x) => x.constant)) return withExtra(notFolded(args));
    const total = sum(args, (x) => x.out);
    let out: number;
    if (FIXED_FUNCTIONS.has(name)) out = FIXED;
    else if (NUMERIC_GROWTH.has(name)) out = NUMERIC_TEXT;
    else if (name === 'replace' || name === 'array_replace') out = ((a[0] ?? 0) + 1) * ((a[2] ?? 0) + 1);
    else if (name === 'regexp_replace') out = ((a[0] ?? 0) + 1) * (2 * (a[2] ?? 0) + 1);
    else if (name === 'regexp_match' || name === 'regexp_substr') out = ((a[0] ?? 0) + 1) * ((a[1] ?? 0) + 1);
    else if (name === 'array_to_string') out = ((a[0] ?? 0) + 1) * ((a[1] ?? 0) + (a[2] ?? 0) + 1);
    else if (name === 'concat_ws') out = (a[0] ?? 0) * args.length + total;
    else if (name === 'jsonb_pretty' || name.startsWith('jsonb_path_query') || name === 'ts_headline') out = (total + 1) * (total + 1);
    else if (FACTOR[name] !== undefined) out = FACTOR[name] * total + FIXED;
    else if (STRUCTURED.test(name)) out = 8 * total + 8 * args.length + FIXED;
    // Every other allowlisted function returns a part or a combination of its arguments.
    else out = total + FIXED;
    return withExtra(folded(args, out));
  }

  size(stmt);
}
