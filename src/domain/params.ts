// Every query and body parameter of the REST routes and MCP tools, one zod schema each: the
// services parse with these, the MCP tools advertise them, OpenAPI documents them. REST passes
// strings and MCP typed values, so each parameter coerces the strings REST sends (a number, a
// boolean, a JSON object) before its rule applies. Zod issues become docs/api.md errors in one place,
// `parseParams` (invalid_parameter) and `parseBody` (validation_failed).
import { z } from 'zod';
import { dateBound } from './dates.js';
import { MAX_TAG_VALUE_BYTES, MAX_TAG_VALUE_CHARS } from './derive.js';
import { EXAMPLE_TYPES } from './examples.js';
import { AppError, InvalidParameterError, ValidationError, issueDetails, stringError } from './errors.js';
import { textProblem } from './text.js';
import { BATCH_MAX, StoredVcon } from './responses.js';
import { UUID_RE, Vcon } from './vcon.js';
import { CHANGE_KINDS, type ChangeKind } from './changes.js';

export const MAX_PAGE = 100;
/** The tag-ordered listing pages through at most this many rows. */
export const TAG_PAGING_CAP = 100_000;
/** Semantic and hybrid rank a bounded candidate list; pages must end inside it. */
export const VECTOR_PAGING_CAP = 1000;
export const MAX_QUERY_CHARS = 1000;
/** Longest statement POST /database/analyze accepts. */
export const MAX_ANALYZE_CHARS = 20_000;
/** Period sizes of the growth trend (UTC; weeks start on Monday). */
export const GRANULARITIES = ['day', 'week', 'month'] as const;
/** The longest growth window, in months. */
export const MAX_MONTHS_BACK = 60;
export const LIST_FORMATS = ['metadata', 'full', 'ids_only'] as const;
export const GET_FORMATS = ['full', 'summary', 'metadata'] as const;
export const TAG_ACTIONS = ['set', 'remove'] as const;

/** A parameter left empty (`?limit=`) or null counts as absent. */
const absent = (v: unknown) => v === undefined || v === null || v === '';
const got = (v: unknown) => JSON.stringify(v) ?? String(v);

// ---- Parameter types ------------------------------------------------------------------------

/** An integer from a number or a decimal string; `cap` clamps (limit above 100 means 100). */
function int(opts: { def: number; min: number; max?: number; cap?: number; describe: string }) {
  let n = z
    .number({ error: (i) => `must be an integer, got ${got(i.input)}` })
    .int({ error: (i) => (i.code === 'invalid_type' ? `must be an integer, got ${got(i.input)}` : 'is too large') })
    .min(opts.min, { error: (i) => `must be ≥ ${opts.min}, got ${String(i.input)}` });
  if (opts.max !== undefined) n = n.max(opts.max, { error: (i) => `must be ≤ ${opts.max}, got ${String(i.input)}` });
  const cap = opts.cap ?? Infinity;
  return z.preprocess(
    (v) => (absent(v) ? undefined : typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v.trim()) : v),
    n
      .default(opts.def)
      .transform((v) => Math.min(v, cap))
      .describe(opts.describe),
  );
}

/** true/false, also 1/0 and yes/no as strings. */
function bool(def: boolean, describe: string) {
  return z.preprocess(
    (v) => {
      if (absent(v) || typeof v === 'boolean') return absent(v) ? undefined : v;
      const s = typeof v === 'string' || typeof v === 'number' ? String(v).trim().toLowerCase() : '';
      return ['true', '1', 'yes'].includes(s) ? true : ['false', '0', 'no'].includes(s) ? false : v;
    },
    z
      .boolean({ error: (i) => `must be true or false, got ${got(i.input)}` })
      .default(def)
      .describe(describe),
  );
}

/** A JSON body's boolean: true or false itself (a query string's words are for query strings). */
function jsonBool(def: boolean, describe: string) {
  return z.preprocess(
    (v) => (v === null ? undefined : v),
    z
      .boolean({ error: (i) => `must be true or false, got ${got(i.input)}` })
      .default(def)
      .describe(describe),
  );
}

/** A string PostgreSQL can hold, at most `max` characters. Present but empty stays "". */
function text(describe: string, opts: { min?: number; max?: number; required?: string } = {}) {
  const max = opts.max ?? 1000;
  let s = z
    .string({ error: (i) => (i.input === undefined && opts.required ? opts.required : 'must be a string') })
    .refine((v) => textProblem(v) === undefined, { error: (i) => textProblem(i.input as string) });
  if (opts.min !== undefined) s = s.min(opts.min, `must be at least ${opts.min} character(s)`);
  return s.max(max, `must be at most ${max} characters`).describe(describe);
}
const optionalText = (describe: string, opts: { max?: number } = {}) =>
  z.preprocess((v) => (v === null ? undefined : v), text(describe, opts).optional());

function oneOf<const T extends readonly [string, ...string[]]>(values: T, def: T[number], describe: string) {
  return z.preprocess(
    (v) => (absent(v) ? undefined : v),
    z
      .enum(values, { error: (i) => `must be one of ${values.join(', ')}, got ${got(i.input)}` })
      .default(def as never)
      .describe(describe),
  );
}

/** A date filter: a full date-time, or a date alone (dates.ts: as an end a date covers that whole day). */
function date(edge: 'start' | 'end', describe: string) {
  return z.preprocess(
    (v) => (absent(v) ? undefined : v),
    z
      .string({ error: 'must be a date (YYYY-MM-DD) or an RFC 3339 date-time' })
      .transform((s, ctx) => {
        const r = dateBound(s, edge);
        if ('date' in r) return r.date;
        ctx.addIssue({ code: 'custom', message: r.problem });
        return z.NEVER;
      })
      .optional()
      .describe(describe),
  );
}

/** A tag key: not empty, no ":", at most 200 characters, storable text. */
const tagKey = (max: number) =>
  z
    .string({ error: 'tag key must be a string' })
    .min(1, 'tag key must not be empty')
    .regex(/^[^:]*$/, 'tag key must not contain ":"')
    .max(max, `tag key must be at most ${max} characters`)
    .refine((k) => textProblem(k) === undefined, { error: (i) => `tag key ${textProblem(i.input as string)}` });

export const TagKey = tagKey(200).describe('Tag key: not empty, no ":", at most 200 characters');

/** A key to read: a tags attachment written elsewhere may hold keys past the 200 a write allows. */
const TagKeyToRead = tagKey(1000);

/** A tag value as sent; stored as a string. */
export const TagValue = z
  .union(
    [
      z
        .string()
        .max(MAX_TAG_VALUE_CHARS, `must be at most ${MAX_TAG_VALUE_CHARS} characters`)
        // A longer value would be kept but not indexed: a tag set here must be searchable.
        .refine((v) => Buffer.byteLength(v) <= MAX_TAG_VALUE_BYTES, `must be at most ${MAX_TAG_VALUE_BYTES} bytes of UTF-8`)
        .refine((v) => textProblem(v) === undefined, { error: (i) => textProblem(i.input as string) }),
      z.number(),
      z.boolean(),
    ],
    { error: (i) => (i.input === undefined ? 'is required' : 'must be a string, number or boolean') },
  )
  .describe('Stored as a string');

/**
 * zod's record skips a "__proto__" member without an issue (it builds its output by assignment), so
 * a filter naming that tag would lose the pair and match vCons without it: every vCon, when it was
 * the only pair. Refused with a 400 instead of answered wrong.
 */
function refuseProtoKey(v: unknown, ctx: z.RefinementCtx): void {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, '__proto__')) return;
  ctx.addIssue({ code: 'custom', path: ['__proto__'], message: 'a tag named "__proto__" can\'t be filtered on' });
}

/** `tags`: an object (REST: its JSON) of key to string, number or boolean; values read as strings. */
function tagFilter(required: boolean, describe: string) {
  const record = z
    .record(TagKey, z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, number or boolean' }).transform(String), {
      error: (i) =>
        i.input === undefined
          ? 'is required: a JSON object of tag key to value, e.g. {"status":"open"}'
          : 'must be a JSON object of tag key to value',
    })
    .describe(describe);
  const parseJson = (v: unknown, ctx: z.RefinementCtx) => {
    if (absent(v)) return undefined;
    let parsed: unknown = v;
    if (typeof v === 'string') {
      try {
        parsed = JSON.parse(v) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object such as {"status":"open"} (not valid JSON)' });
        return z.NEVER;
      }
    }
    refuseProtoKey(parsed, ctx);
    return parsed;
  };
  if (!required) return z.preprocess(parseJson, record.optional());
  return z.preprocess(
    parseJson,
    record.refine((o) => Object.keys(o).length > 0, 'must name at least one tag'),
  );
}

/** A vCon uuid (path parameter or argument), answered in lower case. */
export const UuidParam = z
  .string({
    error: (i) =>
      i.input === undefined
        ? 'is required: a UUID (8-4-4-4-12 hexadecimal digits)'
        : `must be a UUID (8-4-4-4-12 hexadecimal digits), got ${got(String(i.input).slice(0, 60))}`,
  })
  .regex(UUID_RE, { error: (i) => `must be a UUID (8-4-4-4-12 hexadecimal digits), got ${got(String(i.input).slice(0, 60))}` })
  .transform((s) => s.toLowerCase())
  .describe('The vCon UUID (8-4-4-4-12 hex), as returned by create_vcon or a search');

// ---- Shared parameters ----------------------------------------------------------------------

const Offset = int({ def: 0, min: 0, describe: 'Rows to skip, default 0' });
const Limit10 = int({ def: 10, min: 1, cap: MAX_PAGE, describe: `Page size, default 10, capped at ${MAX_PAGE}` });
const StartDate = date('start', 'Only vCons created from this date: YYYY-MM-DD or RFC 3339 (on created_at)');
const EndDate = date('end', 'Only vCons created up to this date: YYYY-MM-DD (covers the whole day) or RFC 3339 (on created_at)');
const TagsFilter = tagFilter(false, 'A JSON object of tag key to value (string, number or boolean); every pair must match');

// ---- Queries --------------------------------------------------------------------------------

/** `GET /vcons` and search_vcons (docs/api.md "Listing"). */
export const ListQuery = z.object({
  limit: Limit10,
  offset: Offset,
  subject: optionalText('Case-insensitive substring of the subject'),
  party_name: optionalText('Substring of a party name'),
  party_email: optionalText('Substring of a party email'),
  party_tel: optionalText('Substring of a party phone number'),
  start_date: StartDate,
  end_date: EndDate,
  tags: TagsFilter,
  format: oneOf(LIST_FORMATS, 'metadata', 'metadata (default): uuid, subject, dates and counts; ids_only: uuids; full: whole documents'),
});
export type ListQuery = z.output<typeof ListQuery>;

/** `GET /vcons/:uuid`, get_vcon. */
export const GetVconQuery = z.object({
  format: oneOf(
    GET_FORMATS,
    'full',
    'full (default): the whole vCon; metadata: top-level fields without dialog/analysis/attachments; summary: metadata plus analyses of type "summary"',
  ),
});

/** `GET /vcons/:uuid/analysis`, get_analysis. */
export const AnalysisQuery = z.object({
  type: optionalText('Only analyses of this type (exact), e.g. summary or transcript; discover them at /discovery/analysis/types'),
});

/** `GET /vcons/:uuid/attachments`, get_attachments. */
export const AttachmentsQuery = z.object({
  purpose: optionalText('Only attachments with this purpose (also legacy attachments whose type equals it)'),
  type: optionalText('Only attachments with this legacy type'),
});

/** `GET /vcons/:uuid/tags`, get_tags. */
export const TagsQuery = z.object({
  // A key like PUT's: `?key=` (empty) or one with ":" can name no tag, a 400 rather than a 404.
  key: z.preprocess((v) => (v === null ? undefined : v), TagKeyToRead.optional()).describe('Return only this tag (tag_not_found when absent)'),
});

/** The largest page of GET /changes. */
export const CHANGES_MAX_PAGE = 1000;
const MAX_INT8 = 9223372036854775807n;

/** A cursor of the change log: the decimal string of a non-negative 64-bit integer (0: before the first entry). */
const cursor = (describe: string) =>
  z.preprocess(
    (v) => (absent(v) ? undefined : v),
    z
      .string({ error: (i) => `must be a cursor (a non-negative integer, an entry's cursor), got ${got(i.input)}` })
      .regex(/^\d{1,19}$/, { error: (i) => `must be a cursor (a non-negative integer, an entry's cursor), got ${got(i.input)}` })
      // Checks run on after a failed regex: only digits reach BigInt.
      .refine((v) => !/^\d{1,19}$/.test(v) || BigInt(v) <= MAX_INT8, 'is too large for a cursor')
      .optional()
      .describe(describe),
  );

/** `kinds=created,deleted`: the kinds of change to show (all when absent). */
const ChangeKinds = z.preprocess(
  // An MCP client may send the list as an array.
  (v) => (absent(v) ? undefined : Array.isArray(v) ? v.join(',') : v),
  z
    .string({ error: 'must be a comma-separated list of kinds' })
    .transform((v, ctx) => {
      const kinds = [...new Set(v.split(',').map((k) => k.trim()))];
      const bad = kinds.filter((k) => !(CHANGE_KINDS as readonly string[]).includes(k));
      if (bad.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `unknown kind(s) ${bad.map((k) => got(k.slice(0, 40))).join(', ')}; kinds are ${CHANGE_KINDS.join(', ')}`,
        });
        return z.NEVER;
      }
      return kinds as ChangeKind[];
    })
    .optional()
    .describe(`Only these kinds of change, comma-separated: ${CHANGE_KINDS.join(', ')}`),
);

/** `GET /changes` (docs/api.md "Changes"). */
export const ChangesQuery = z.object({
  after: cursor('Entries after this cursor (the next_cursor of the previous page); absent: from the oldest entry held'),
  limit: int({ def: 100, min: 1, cap: CHANGES_MAX_PAGE, describe: `Page size, default 100, capped at ${CHANGES_MAX_PAGE}` }),
  kinds: ChangeKinds,
});
export type ChangesQuery = z.output<typeof ChangesQuery>;

/** `GET /changes/stream`: `after` may also be `now` (only what is written from now on). */
export const ChangesStreamQuery = z.object({
  after: z
    .union([z.literal('now'), cursor('')])
    .describe('Events after this cursor, or "now"; absent: from the oldest entry held. Last-Event-ID wins'),
  kinds: ChangeKinds,
});

/** A webhook endpoint's id, as GET /webhooks lists it. */
export const EndpointParam = z
  .string({ error: (i) => `must be an endpoint id (ep_ and 12 hex digits, from GET /webhooks), got ${got(i.input)}` })
  .regex(/^ep_[0-9a-f]{12}$/, { error: (i) => `must be an endpoint id (ep_ and 12 hex digits, from GET /webhooks), got ${got(i.input)}` })
  .describe('A webhook endpoint id, from GET /webhooks');
/** A webhook delivery's id (its webhook-id), as GET /webhooks/failed lists it. */
export const DeliveryParam = z
  .string({ error: (i) => `must be a delivery id (msg_ and 32 hex digits, from GET /webhooks/failed), got ${got(i.input)}` })
  .regex(/^msg_[0-9a-f]{32}$/, { error: (i) => `must be a delivery id (msg_ and 32 hex digits, from GET /webhooks/failed), got ${got(i.input)}` })
  .describe('A delivery id (its webhook-id header), from GET /webhooks/failed');

/** `GET /webhooks/failed`: failed deliveries, newest first. */
export const WebhookFailedQuery = z.object({
  endpoint: z.preprocess(
    (v) => (absent(v) ? undefined : v),
    EndpointParam.optional().describe("Only this endpoint's deliveries (its id from GET /webhooks)"),
  ),
  limit: int({ def: 100, min: 1, cap: CHANGES_MAX_PAGE, describe: `Page size, default 100, capped at ${CHANGES_MAX_PAGE}` }),
});

/** The Last-Event-ID header of a reconnecting EventSource: the cursor of the last event it got. */
export const LastEventId = z.object({ 'Last-Event-ID': cursor('The cursor of the last event received') });

/** `GET /tags/search`, search_by_tags. */
export const TagSearchQuery = z.object({
  tags: tagFilter(true, 'Required: a JSON object of tag key to value that must all match, e.g. {"status":"open"}'),
  limit: int({ def: 50, min: 1, cap: MAX_PAGE, describe: `Page size, default 50, capped at ${MAX_PAGE}` }),
  offset: Offset,
});

/** The discovery routes and tools. */
export const DiscoveryQuery = z.object({
  include_counts: bool(true, 'Include the per-value vCon count (default true)'),
  min_count: int({ def: 1, min: 1, describe: 'Only values found in at least this many vCons (default 1)' }),
});

const searchShape = {
  q: z.preprocess(
    (v) => (v === null ? undefined : v),
    text('What to look for (1 to 1000 characters); quotes, OR and -word work as in a web search box', {
      min: 1,
      max: MAX_QUERY_CHARS,
      required: 'is required: the text to search for (1 to 1000 characters)',
    }).refine((s) => s.trim() !== '', {
      message: 'must not be blank',
      // An empty q already failed its length rule: one problem, not two.
      when: (payload) => payload.issues.length === 0,
    }),
  ),
  limit: int({ def: 10, min: 1, cap: MAX_PAGE, describe: `Results per page, default 10, capped at ${MAX_PAGE}` }),
  offset: int({ def: 0, min: 0, describe: 'Results to skip, default 0' }),
  tags: TagsFilter,
  start_date: StartDate,
  end_date: EndDate,
};

/** Keyword search. */
export const SearchQuery = z.object(searchShape);

/**
 * The semantic side's default minimum similarity: unrelated texts score near 0 (0.00-0.03 on the
 * development set), the least similar right answer in a top 10 there scored 0.105.
 */
export const DEFAULT_THRESHOLD = 0.05;

/** Semantic and hybrid search: keyword's parameters and a similarity threshold. */
export const VectorSearchQuery = z.object({
  ...searchShape,
  threshold: z.preprocess(
    (v) => (absent(v) ? undefined : typeof v === 'string' && /^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/.test(v) ? Number(v) : v),
    z
      .number({ error: (i) => `must be a number from 0 to 1, got ${got(i.input)}` })
      .min(0, { error: (i) => `must be a number from 0 to 1, got ${got(i.input)}` })
      .max(1, { error: (i) => `must be a number from 0 to 1, got ${got(i.input)}` })
      .default(DEFAULT_THRESHOLD)
      .describe(`Minimum cosine similarity 0..1 (default ${DEFAULT_THRESHOLD}; 0 is honoured, though a similarity of 0 is never a result)`),
  ),
});
export type SearchQuery = z.output<typeof VectorSearchQuery>;

const growthShape = {
  granularity: oneOf(GRANULARITIES, 'month', 'Bucket size of the trend (default month)'),
  months_back: int({ def: 12, min: 1, max: MAX_MONTHS_BACK, describe: `How far back to look, 1 to ${MAX_MONTHS_BACK} months (default 12)` }),
};
const rangeShape = { start_date: StartDate, end_date: EndDate };
const tagAnalyticsShape = {
  limit: int({ def: 20, min: 1, max: 100, describe: 'How many tag keys, default 20' }),
  values_limit: int({ def: 10, min: 1, max: 100, describe: 'How many values per key, default 10' }),
};
const endAfterStart = <S extends z.ZodObject>(s: S): S =>
  s.refine(
    (r) => {
      const { start_date: start, end_date: end } = r as { start_date?: Date; end_date?: Date };
      return !(start && end && start >= end);
    },
    { path: ['end_date'], message: 'must be after start_date' },
  );

export const GrowthQuery = z.object(growthShape);
export const DateRangeQuery = endAfterStart(z.object(rangeShape));
export const TagAnalyticsQuery = z.object(tagAnalyticsShape);
/** The whole dashboard: growth, range and tag parameters together. */
export const AnalyticsQuery = endAfterStart(z.object({ ...growthShape, ...rangeShape, ...tagAnalyticsShape }));

/** `GET /examples/:type`, get_examples: an unknown name is 404 example_not_found, not a bad parameter. */
export const ExampleArgs = z.object({
  type: text('Which example').meta({ enum: [...EXAMPLE_TYPES] }),
});

// ---- Bodies ---------------------------------------------------------------------------------

export const WAIT_FOR = ['search'] as const;

/**
 * `wait_for` of the writes (POST /vcons, POST /vcons/batch, PATCH /vcons/:uuid; create_vcon and
 * update_vcon): a write answers once it is stored; with `search` it also waits until the written
 * vCons are indexed for search (bounded). Searches already see every write acknowledged before them.
 */
export const WaitFor = z.preprocess(
  (v) => (absent(v) ? undefined : v),
  z
    .enum(WAIT_FOR, { error: (i) => `must be one of ${WAIT_FOR.join(', ')}, got ${got(i.input)}` })
    .optional()
    .describe(
      'search: answer only once the written vCons are indexed for search (at most 30 s). Without it the write answers as soon as it is stored; ' +
        'searches still find it, since a search first indexes every write acknowledged before it',
    ),
);

/** The query of the REST writes. */
export const WriteQuery = z.object({ wait_for: WaitFor });

/** `GET /vcons/export`: resume after the last uuid received. */
export const ExportQuery = z.object({
  after: UuidParam.optional().describe('Resume after this vCon UUID (the last line received); absent: from the first vCon'),
});

const sameStrings = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((s, i) => s === b[i]);

/** `PATCH /vcons/:uuid` and update_vcon's `updates`. */
export const VconPatch = z
  .strictObject(
    {
      subject: Vcon.shape.subject,
      extensions: Vcon.shape.extensions,
      critical: Vcon.shape.critical,
      must_support: Vcon.shape.must_support.describe('Legacy name of critical; stored as critical'),
    },
    {
      error: (i) =>
        i.code === 'unrecognized_keys'
          ? 'is not an updatable field: only subject, extensions and critical (legacy must_support) can be updated'
          : 'must be a JSON object',
    },
  )
  .refine((p) => Object.keys(p).length > 0, {
    message: 'nothing to update: send subject, extensions or critical',
    // Unknown fields are stripped from p: only a body with no problem yet can be "nothing".
    when: (payload) => payload.issues.length === 0,
  })
  // must_support is stored as critical: two different lists would leave one of them dropped unsaid.
  .refine((p) => p.critical === undefined || p.must_support === undefined || sameStrings(p.critical, p.must_support), {
    message: 'differs from critical, which it is stored as: send one of them (must_support is the legacy name of critical)',
    path: ['must_support'],
  })
  .describe('The fields to change; only subject, extensions and critical (legacy must_support) can be updated');

/** `PUT /vcons/:uuid/tags/:key`. */
export const TagPut = z.object({ value: TagValue }, { error: 'must be a JSON object with a "value" field' });

/** manage_tag: `value` is needed for "set" only. */
export const ManageTagArgs = z.object({
  uuid: UuidParam,
  action: z.enum(TAG_ACTIONS, { error: (i) => `must be set or remove, got ${got(i.input ?? null)}` }).describe('set or remove'),
  key: TagKey,
  value: TagValue.optional().describe('The value for action "set"'),
});

/** `POST /database/analyze`, analyze_query. */
export const AnalyzeBody = z.strictObject(
  {
    query: z
      .string({
        error: stringError('is required: one SELECT or WITH ... SELECT statement', 'must be a string: one SELECT or WITH ... SELECT statement'),
      })
      .refine((s) => s.trim() !== '', 'is required: one SELECT or WITH ... SELECT statement')
      .max(MAX_ANALYZE_CHARS, `must be at most ${MAX_ANALYZE_CHARS} characters`)
      .refine((s) => !s.includes('\u0000'), 'must not contain NUL characters')
      .describe('One SELECT (or WITH ... SELECT) statement'),
    analyze: jsonBool(false, 'EXPLAIN ANALYZE: run the statement in a read-only transaction to report actual timings (default false)'),
  },
  { error: (i) => (i.code === 'unrecognized_keys' ? 'is not a known field (query, analyze)' : 'must be a JSON object') },
);

// ---- The one mapping ------------------------------------------------------------------------

/**
 * Parses query parameters (or tool arguments) with their schema; a failure is 400
 * invalid_parameter naming the first bad parameter, with every bad parameter in details.
 */
export function parseParams<T extends z.ZodType>(schema: T, raw: unknown): z.output<T> {
  const r = schema.safeParse(raw ?? {});
  if (r.success) return r.data;
  const details = issueDetails(r.error.issues);
  throw new InvalidParameterError(details[0].path, details[0].message, undefined, details);
}

/**
 * Parses a request body with its schema; a failure is 400 validation_failed with every problem
 * in details, the message naming the first (as bodies always have: "path: problem").
 */
export function parseBody<T extends z.ZodType>(schema: T, raw: unknown): z.output<T> {
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const details = issueDetails(r.error.issues);
  throw new ValidationError(`${details[0].path}: ${details[0].message}`, details);
}

/** A paging cap (paging_cap_exceeded: a limit of the service, not a parameter's own rule). */
export function checkPagingCap(q: { limit: number; offset: number }, cap: number, where: string, detail = ''): void {
  if (q.offset + q.limit <= cap) return;
  throw new AppError(400, 'paging_cap_exceeded', `offset + limit may not pass ${cap} ${where}`, [
    { path: 'offset', message: `offset + limit must be ≤ ${cap}${detail}` },
  ]);
}

const UuidArgs = z.object({ uuid: UuidParam });
/** A vCon uuid (a path parameter, an argument), lower-cased; 400 invalid_parameter naming `uuid`. */
export const parseUuid = (value: unknown): string => parseParams(UuidArgs, { uuid: value }).uuid;

/** Parses the `GET /vcons` parameters, the paging cap of the tag-ordered listing included. */
export function parseListQuery(raw: unknown): ListQuery {
  const q = parseParams(ListQuery, raw);
  if (q.tags && Object.keys(q.tags).length > 0) checkPagingCap(q, TAG_PAGING_CAP, 'when filtering by tags', ' in the tag-ordered listing');
  return q;
}

/**
 * POST /vcons/batch: 1 to BATCH_MAX vCons. The service checks each item on its own (one bad vCon
 * must not sink the others), so parseBatch applies only this schema's array rule.
 */
export const BatchBody = z.array(StoredVcon).min(1).max(BATCH_MAX);

/** BatchBody's own checks over items of any shape: the array rule, written once. */
const BatchShape = z.array(z.unknown()).check(...((BatchBody.def.checks ?? []) as z.core.$ZodCheck<unknown[]>[]));

/** The batch's items, or the batch's own errors (docs/api.md: batch_empty, batch_too_large, validation_failed). */
export function parseBatch(raw: unknown): unknown[] {
  const r = BatchShape.safeParse(raw);
  if (r.success) return r.data;
  const code = r.error.issues[0]?.code;
  if (code === 'too_small') throw new AppError(400, 'batch_empty', `The batch is empty: send 1 to ${BATCH_MAX} vCons`);
  if (code === 'too_big') {
    throw new AppError(400, 'batch_too_large', `The batch has ${(raw as unknown[]).length} items; at most ${BATCH_MAX} are allowed`);
  }
  throw new ValidationError('The batch body must be a JSON array of vCon objects', [{ path: '(root)', message: 'must be an array' }]);
}
