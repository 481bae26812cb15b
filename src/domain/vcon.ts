// The vCon and its parts, implementing docs/api.md "Validation": strict structure, lenient vocabulary.
// These schemas are the single source for REST parsing, MCP input schemas, GET /schema and tests.
// Unknown fields pass through (looseObject); services store the caller's own object, so key order
// and unknown fields survive untouched.
import { z } from 'zod';
import { ValidationError, formatPath, invalid, issueDetails, stringError } from './errors.js';
import { RANGE_PROBLEM, dateTimeProblem, readRfc2822 } from './dates.js';
import { textProblem, unstorableText } from './text.js';
import { tooManyElements } from './elements.js';

export const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
// No regex flags: the pattern goes into the JSON Schema and OpenAPI documents as written.
const MEDIA_TYPE_RE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(\s*;[\s\S]*)?$/;

export const DIALOG_TYPES = ['recording', 'recording-set', 'text', 'transfer', 'incomplete'] as const;
export const ENCODINGS = ['base64url', 'json', 'none'] as const;

/** Longest dialog duration accepted, in seconds (about 31.7 years): larger values are mistakes, and sums of them overflow. */
export const MAX_DURATION_S = 1e9;

export const Uuid = z.string().regex(UUID_RE, 'must be a UUID (8-4-4-4-12 hexadecimal digits)');

/**
 * How much of what real producers write a group accepts (VCON_VALIDATION; docs/configuration.md "Validation
 * modes"). `strict` follows the project's rules; `ietf` adds what the IETF vCon draft allows beyond
 * them (any JSON value as an analysis body with encoding "json"); `lenient` adds known producer
 * slips. Broken documents are refused, with the same messages, in every mode.
 */
export const VALIDATION_MODES = ['strict', 'ietf', 'lenient'] as const;
export type ValidationMode = (typeof VALIDATION_MODES)[number];

const DATE_FORMAT_MESSAGE = 'must be an RFC 3339 date-time such as 2025-01-31T14:05:00Z';
// One check that reads the date once (two refines read it twice); a format problem aborts, as
// `abort: true` did, and a range problem doesn't.
const dateTimeOf = (rfc2822: boolean) =>
  z.string({ error: 'must be a date-time string' }).superRefine((s, ctx) => {
    const problem = dateTimeProblem(s);
    if (problem === 'format' && !(rfc2822 && readRfc2822(s))) ctx.addIssue({ code: 'custom', message: DATE_FORMAT_MESSAGE, continue: false });
    else if (problem === 'range') ctx.addIssue({ code: 'custom', message: RANGE_PROBLEM });
  });
export const DateTime = dateTimeOf(false);
const MediaType = z.string({ error: 'must be a media type string' }).regex(MEDIA_TYPE_RE, 'must be a media type like text/plain or audio/x-wav');
const LENIENT_ENCODINGS = [...ENCODINGS, 'base64'] as const;
const encodingOf = (values: readonly [string, ...string[]]) => z.enum(values, { error: `must be one of ${ENCODINGS.join(', ')}` });
const Index = z.number({ error: 'must be an array index (integer ≥ 0)' }).int('must be an integer').min(0, 'must be ≥ 0');
const IndexOrList = z.union([Index, z.array(z.union([Index, z.array(Index)]))], {
  error: 'must be an index or an array of indexes',
});
const StringList = z.array(z.string({ error: 'must be a string' }), { error: 'must be an array of strings' });

export const Party = z.looseObject({
  tel: z.string().optional(),
  mailto: z.string().optional(),
  name: z.string().optional(),
  uuid: z.string().optional(),
  did: z.string().optional(),
  role: z.string().optional(),
});
export type Party = z.infer<typeof Party>;

const ANALYSIS_BODY_MESSAGE = 'must be a string (serialise structured output and set encoding "json")';
const isStructured = (v: unknown) => typeof v === 'object' && v !== null;

/**
 * Whether a mode takes an analysis body that is not a string: the IETF draft allows any JSON value
 * with encoding "json"; lenient also reads an object or array with encoding "none" (or none given) as JSON.
 */
function takesJsonBody(mode: ValidationMode, a: { encoding?: unknown; body?: unknown }): boolean {
  if (mode === 'strict') return false;
  if (a.encoding === 'json') return true;
  return mode === 'lenient' && (a.encoding === 'none' || a.encoding === undefined) && isStructured(a.body);
}

const arrayOf = <T extends z.ZodType>(item: T, what: string) => z.array(item, { error: `must be an array of ${what} objects` });
const indexList = (v: unknown): number[] => (Array.isArray(v) ? v.flat(2) : typeof v === 'number' ? [v] : []) as number[];

/** The schemas of one validation mode: the one decider of what a group accepts. */
function buildSchemas(mode: ValidationMode) {
  const lenient = mode === 'lenient';
  const DateTime = dateTimeOf(lenient);
  const Encoding = encodingOf(lenient ? LENIENT_ENCODINGS : ENCODINGS);
  // Lenient takes any other name too, but a missing, empty or non-string type is refused as strict refuses it.
  const typeMessage = `must be one of ${DIALOG_TYPES.join(', ')}`;
  const DialogType = lenient ? z.string({ error: typeMessage }).min(1, typeMessage) : z.enum(DIALOG_TYPES, { error: typeMessage });
  const vendor = z.string({ error: stringError('is required (a non-empty string)', 'must be a non-empty string') }).min(1, 'must not be empty');

  const Dialog = z
    .looseObject({
      type: DialogType,
      start: DateTime.optional(),
      duration: z
        .number({ error: 'must be a number of seconds' })
        .min(0, 'must be ≥ 0')
        .max(MAX_DURATION_S, `must be at most ${MAX_DURATION_S} seconds`)
        .optional(),
      parties: IndexOrList.optional(),
      originator: Index.optional(),
      mediatype: MediaType.optional(),
      mimetype: MediaType.optional(),
      filename: z.string().optional(),
      encoding: Encoding.optional(),
      url: z.string().optional(),
      disposition: z.string().optional(),
      session_id: z.unknown().optional(),
      application: z.string().optional(),
      message_id: z.string().optional(),
      body: z.unknown().optional(),
    })
    .superRefine(
      (d, ctx) => {
        if (d?.type === 'incomplete' && (typeof d.disposition !== 'string' || d.disposition === '')) {
          ctx.addIssue({ code: 'custom', path: ['disposition'], message: 'is required when type is incomplete' });
        }
      },
      { when: (p) => typeof p.value === 'object' && p.value !== null },
    );

  const Analysis = z
    .looseObject({
      type: z
        .string({ error: stringError('is required (a string such as summary or transcript)', 'must be a string such as summary or transcript') })
        .min(1, 'must not be empty'),
      vendor: lenient ? vendor.optional() : vendor,
      dialog: IndexOrList.optional(),
      product: z.string().optional(),
      schema: z.string().optional(),
      mediatype: MediaType.optional(),
      mimetype: MediaType.optional(),
      encoding: Encoding.optional(),
      // A string, or (checked below, as the mode allows) a JSON value.
      body: mode === 'strict' ? z.string({ error: ANALYSIS_BODY_MESSAGE }).optional() : z.unknown().optional(),
      url: z.string().optional(),
      schema_version: z.undefined({ error: 'is not a vCon field: use `schema`' }).optional(),
    })
    .superRefine(
      (a, ctx) => {
        if (mode !== 'strict' && a.body !== undefined && typeof a.body !== 'string' && !takesJsonBody(mode, a)) {
          ctx.addIssue({ code: 'custom', path: ['body'], message: ANALYSIS_BODY_MESSAGE });
        }
      },
      { when: (p) => typeof p.value === 'object' && p.value !== null },
    );

  const Attachment = z.looseObject({
    purpose: z.string().optional(),
    type: z.string().optional(),
    start: DateTime.optional(),
    party: Index.optional(),
    dialog: Index.optional(),
    mediatype: MediaType.optional(),
    mimetype: MediaType.optional(),
    encoding: Encoding.optional(),
    filename: z.string().optional(),
    url: z.string().optional(),
    body: z.unknown().optional(),
  });

  const VconFields = {
    uuid: Uuid.optional(),
    vcon: z.string({ error: 'must be a string' }).optional(),
    created_at: DateTime.optional(),
    updated_at: DateTime.optional(),
    subject: z.string({ error: 'must be a string' }).nullable().optional(),
    parties: arrayOf(Party, 'party').optional(),
    dialog: arrayOf(Dialog, 'dialog').optional(),
    analysis: arrayOf(Analysis, 'analysis').optional(),
    attachments: arrayOf(Attachment, 'attachment').optional(),
    extensions: StringList.optional(),
    critical: StringList.optional(),
    must_support: StringList.optional(),
  };

  /** The plain (unsigned, unencrypted) vCon, with index references checked. */
  const Vcon = z.looseObject(VconFields).superRefine(
    (v, ctx) => {
      // Runs even when other fields failed, so one 400 lists every problem: read defensively.
      const list = (x: unknown) => (Array.isArray(x) ? x.filter((i) => typeof i === 'object' && i !== null) : []);
      v = { ...v, parties: list(v.parties), dialog: list(v.dialog), analysis: list(v.analysis), attachments: list(v.attachments) };
      const np = v.parties?.length ?? 0;
      const nd = v.dialog?.length ?? 0;
      const check = (ok: boolean, path: (string | number)[], message: string) => {
        if (!ok) ctx.addIssue({ code: 'custom', path, message });
      };
      v.dialog?.forEach((d, i) => {
        for (const p of indexList(d.parties)) check(p < np, ['dialog', i, 'parties'], `party index ${p} is out of range (${np} parties)`);
        if (typeof d.originator === 'number')
          check(d.originator < np, ['dialog', i, 'originator'], `party index ${d.originator} is out of range (${np} parties)`);
      });
      v.analysis?.forEach((a, i) => {
        for (const di of indexList(a.dialog)) check(di < nd, ['analysis', i, 'dialog'], `dialog index ${di} is out of range (${nd} dialogs)`);
      });
      v.attachments?.forEach((a, i) => {
        if (typeof a.party === 'number') check(a.party < np, ['attachments', i, 'party'], `party index ${a.party} is out of range (${np} parties)`);
        if (typeof a.dialog === 'number')
          check(a.dialog < nd, ['attachments', i, 'dialog'], `dialog index ${a.dialog} is out of range (${nd} dialogs)`);
      });
    },
    { when: (p) => typeof p.value === 'object' && p.value !== null && !Array.isArray(p.value) },
  );
  return { Dialog, Analysis, Attachment, Vcon };
}

export type VconSchemas = ReturnType<typeof buildSchemas>;
const SCHEMAS: Record<ValidationMode, VconSchemas> = { strict: buildSchemas('strict'), ietf: buildSchemas('ietf'), lenient: buildSchemas('lenient') };

/** The Vcon, Dialog, Analysis and Attachment schemas of a validation mode. */
export const vconSchemas = (mode: ValidationMode): VconSchemas => SCHEMAS[mode];

// The strict schemas, which types and the strict group's documents use.
export const { Dialog, Analysis, Attachment, Vcon } = SCHEMAS.strict;
export type Dialog = z.infer<typeof Dialog>;
export type Analysis = z.infer<typeof Analysis>;
export type Attachment = z.infer<typeof Attachment>;
export type Vcon = z.infer<typeof Vcon>;

/** A JWS General JSON signed vCon: stored opaque, identified by the uuid in a signature header. */
export const SignedVcon = z.looseObject({
  payload: z.string(),
  signatures: z.array(z.looseObject({ header: z.looseObject({ uuid: Uuid.optional() }).optional() })).min(1),
});
/** A JWE JSON encrypted vCon: stored opaque, identified by the uuid in its unprotected header. */
export const EncryptedVcon = z.looseObject({
  ciphertext: z.string(),
  recipients: z.array(z.unknown()),
  unprotected: z.looseObject({ uuid: Uuid.optional() }).optional(),
});

export type VconKind = 'plain' | 'signed' | 'encrypted';
export type JsonObject = Record<string, unknown>;

/**
 * Throws a ValidationError listing every problem, or returns the parsed value. Besides the schema,
 * every field name and string anywhere in the value must be text PostgreSQL can hold (text.ts).
 */
export function validate<T extends z.ZodType>(schema: T, value: unknown, what: string, prefix: (string | number)[] = []): z.infer<T> {
  const r = schema.safeParse(value);
  const text = unstorableText(value, prefix);
  if (r.success && text.length === 0) return r.data;
  throw invalid(what, [...(r.success ? [] : issueDetails(r.error.issues, prefix)), ...text]);
}

const isPlainObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * VCON_MAX_ELEMENTS by default: the JSON values one request body or one vCon may hold. The largest
 * real vCon of the fixtures (an hour's meeting with its transcription) holds 1,692 values in 65 KB:
 * this leaves room for ~150 of them in one batch, or a transcript with per-word timings of a
 * day-long call; a recording is one value however long. 1.8 million `{}` (5.4 MB) held the process
 * ~20 s in JSON.parse alone.
 */
export const DEFAULT_MAX_ELEMENTS = 250_000;

/**
 * `o[k] = v` as JSON.parse sets a member: a "__proto__" member stays an ordinary own field. An
 * assignment would replace the object's prototype instead, so the member vanished from what is
 * stored while every read of a missing field (subject, parties, attachments) found the planted one.
 */
export function setMember(o: JsonObject, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  else o[k] = v;
}

/** Deepest nesting we store; real vCons stay under 20 levels, and deeper JSON breaks recursion. */
export const MAX_DEPTH = 100;

const tooDeep = (max: number) =>
  new ValidationError(`Invalid vCon: nested deeper than ${max} levels`, [{ path: '(root)', message: `must not nest deeper than ${max} levels` }]);

/** Rejects absurdly deep documents up front (iteratively, so the check itself can't overflow). */
export function checkDepth(input: unknown, max = MAX_DEPTH): void {
  scanDocument(input, max);
}

/**
 * Rejects a document nested deeper than `max` (whatever text it met), else answers "is any field
 * name or string unstorable" (text.ts), in one walk. Every create
 * asked both, a walk each (~a third of a plain vCon's validation); this walk allocates nothing per
 * value (two stacks, not a pair per object).
 */
export function scanDocument(input: unknown, max = MAX_DEPTH, maxElements = Infinity): { unstorable: boolean } {
  const values: unknown[] = [input];
  const depths: number[] = [1];
  let unstorable = false;
  let elements = 0;
  while (values.length > 0) {
    if (++elements > maxElements) throw tooManyElements(maxElements);
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (!unstorable && textProblem(v) !== undefined) unstorable = true;
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth > max) throw tooDeep(max);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        values.push(v[i]);
        depths.push(depth + 1);
      }
    } else {
      for (const k of Object.keys(v)) {
        if (!unstorable && textProblem(k) !== undefined) unstorable = true;
        values.push((v as JsonObject)[k]);
        depths.push(depth + 1);
      }
    }
  }
  return { unstorable };
}

// A hand-written acceptor for the plain vCon of the common shape: zod's walk of a vCon (objects,
// checks, a copy of every loose object) cost ~40 µs a vCon, most of a batch's validation. It
// answers true only for documents the Vcon schema accepts (tested by mutation against the schema);
// anything it is unsure of, and every invalid document, goes to the schema, which names the
// problems. Stricter than the schema is fine, looser never.
const DIALOG_TYPE_SET: ReadonlySet<unknown> = new Set(DIALOG_TYPES);
const ENCODING_SET: ReadonlySet<unknown> = new Set(ENCODINGS);
const isIndex = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const optString = (v: unknown) => v === undefined || typeof v === 'string';
const optDate = (v: unknown) => v === undefined || (typeof v === 'string' && dateTimeProblem(v) === undefined);
const optMediaType = (v: unknown) => v === undefined || (typeof v === 'string' && MEDIA_TYPE_RE.test(v));
const optEncoding = (v: unknown) => v === undefined || ENCODING_SET.has(v);
const optIndex = (v: unknown, below: number) => v === undefined || (isIndex(v) && v < below);
const optStrings = (v: unknown) => v === undefined || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
/** An index or a list of indexes and lists of indexes, each below `below`. */
const optIndexes = (v: unknown, below: number) =>
  v === undefined ||
  (isIndex(v) && v < below) ||
  (Array.isArray(v) && v.every((x) => (isIndex(x) && x < below) || (Array.isArray(x) && x.every((y) => isIndex(y) && y < below))));
const objects = (v: unknown): v is JsonObject[] | undefined => v === undefined || (Array.isArray(v) && v.every(isPlainObject));
// Own keys a JSON object may carry that objects treat specially: left to the schema.
const plainKeys = (o: JsonObject) => !Object.hasOwn(o, '__proto__');

/** The media fields dialogs, analyses and attachments share. */
const mediaOk = (o: JsonObject) => optMediaType(o.mediatype) && optMediaType(o.mimetype) && optEncoding(o.encoding) && optString(o.url);

function partyOk(p: JsonObject): boolean {
  return plainKeys(p) && optString(p.tel) && optString(p.mailto) && optString(p.name) && optString(p.uuid) && optString(p.did) && optString(p.role);
}

function dialogOk(d: JsonObject, np: number): boolean {
  if (!plainKeys(d) || !DIALOG_TYPE_SET.has(d.type)) return false;
  if (d.type === 'incomplete' && (typeof d.disposition !== 'string' || d.disposition === '')) return false;
  const duration = d.duration;
  if (duration !== undefined && !(typeof duration === 'number' && duration >= 0 && duration <= MAX_DURATION_S)) return false;
  return (
    optDate(d.start) &&
    optIndexes(d.parties, np) &&
    optIndex(d.originator, np) &&
    optString(d.filename) &&
    optString(d.disposition) &&
    optString(d.application) &&
    optString(d.message_id) &&
    mediaOk(d)
  );
}

function analysisOk(a: JsonObject, nd: number): boolean {
  return (
    plainKeys(a) &&
    typeof a.type === 'string' &&
    a.type !== '' &&
    typeof a.vendor === 'string' &&
    a.vendor !== '' &&
    !Object.hasOwn(a, 'schema_version') &&
    optIndexes(a.dialog, nd) &&
    optString(a.product) &&
    optString(a.schema) &&
    optString(a.body) &&
    mediaOk(a)
  );
}

function attachmentOk(a: JsonObject, np: number, nd: number): boolean {
  return (
    plainKeys(a) &&
    optString(a.purpose) &&
    optString(a.type) &&
    optDate(a.start) &&
    optIndex(a.party, np) &&
    optIndex(a.dialog, nd) &&
    optString(a.filename) &&
    mediaOk(a)
  );
}

/** True only when the Vcon schema accepts `v` (a plain object); false means "ask the schema". */
export function acceptsPlainVcon(v: JsonObject): boolean {
  if (!plainKeys(v)) return false;
  const { parties, dialog, analysis, attachments } = v;
  if (!objects(parties) || !objects(dialog) || !objects(analysis) || !objects(attachments)) return false;
  if (!(v.uuid === undefined || (typeof v.uuid === 'string' && UUID_RE.test(v.uuid)))) return false;
  if (!optString(v.vcon) || !optDate(v.created_at) || !optDate(v.updated_at)) return false;
  if (!(v.subject === undefined || v.subject === null || typeof v.subject === 'string')) return false;
  if (!optStrings(v.extensions) || !optStrings(v.critical) || !optStrings(v.must_support)) return false;
  const np = parties?.length ?? 0;
  const nd = dialog?.length ?? 0;
  return (
    (parties ?? []).every(partyOk) &&
    (dialog ?? []).every((d) => dialogOk(d, np)) &&
    (analysis ?? []).every((a) => analysisOk(a, nd)) &&
    (attachments ?? []).every((a) => attachmentOk(a, np, nd))
  );
}

/** Something a group's validation mode accepted that the strict rules refuse: said, never silent. */
export interface ValidationWarning {
  path: string;
  message: string;
}

/** A write result's `warnings` member: present only when the mode tolerated something. */
export const withWarnings = (warnings: readonly ValidationWarning[]): { warnings?: ValidationWarning[] } =>
  warnings.length > 0 ? { warnings: [...warnings] } : {};

export interface ClassifiedVcon {
  kind: VconKind;
  /** The caller's own object (key order and unknown fields intact). */
  doc: JsonObject;
  uuid: string | undefined;
  /** What the mode tolerated (empty in strict mode and for documents the strict rules accept). */
  warnings: ValidationWarning[];
}

const valueAt = (doc: unknown, path: readonly PropertyKey[]): unknown =>
  path.reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Record<PropertyKey, unknown>)[k] : undefined), doc);

/** What a mode made of a value the strict rules refuse, in words for the warning. */
function toleranceOf(mode: ValidationMode, doc: unknown, path: readonly PropertyKey[]): string {
  const field = path[path.length - 1];
  const value = valueAt(doc, path);
  const parent = valueAt(doc, path.slice(0, -1)) as JsonObject | undefined;
  if (field === 'body') {
    return parent?.encoding === 'json'
      ? 'is a JSON value with encoding "json", which the IETF vCon draft allows: stored as sent'
      : `is a JSON ${Array.isArray(value) ? 'array' : 'object'} with encoding ${parent?.encoding === undefined ? 'absent' : '"none"'}: read as JSON`;
  }
  if (field === 'encoding') return `${JSON.stringify(value)} is not a vCon encoding: read as standard base64, base64url's sibling`;
  if (field === 'vendor') return 'is missing: accepted without a vendor';
  if (field === 'type') return `${JSON.stringify(value)} is not a vCon dialog type: stored as sent`;
  if (typeof value === 'string') {
    const instant = readRfc2822(value);
    if (instant) return `is an RFC 2822 date: read as ${instant.toISOString()}`;
  }
  return `accepted in ${mode} mode`;
}

/**
 * Validates a plain vCon under a mode: refused with the mode's messages, or accepted with a warning
 * for each item the strict rules would have refused (the strict schema's issues, reworded).
 */
function validatePlain(input: JsonObject, mode: ValidationMode): ValidationWarning[] {
  validate(vconSchemas(mode).Vcon, input, 'vCon');
  if (mode === 'strict') return [];
  return warningsOf(Vcon.safeParse(input), input, mode);
}

/** The tolerated items of a value that a mode accepted, as warnings under `prefix`. */
function warningsOf(
  strict: z.ZodSafeParseResult<unknown>,
  input: unknown,
  mode: ValidationMode,
  prefix: (string | number)[] = [],
): ValidationWarning[] {
  if (strict.success) return [];
  return strict.error.issues.map((i) => ({ path: formatPath([...prefix, ...i.path]), message: toleranceOf(mode, input, i.path) }));
}

/**
 * Validates one dialog, analysis or attachment (an append) under a mode, and returns what the mode
 * tolerated. `prefix` names where it goes, for messages.
 */
export function validateItem(
  kind: 'dialog' | 'analysis' | 'attachment',
  item: unknown,
  mode: ValidationMode,
  what: string,
  prefix: (string | number)[] = [],
): ValidationWarning[] {
  const pick = (s: VconSchemas) => (kind === 'dialog' ? s.Dialog : kind === 'analysis' ? s.Analysis : s.Attachment);
  validate(pick(vconSchemas(mode)), item, what, prefix);
  if (mode === 'strict') return [];
  return warningsOf(pick(SCHEMAS.strict).safeParse(item), item, mode, prefix);
}

/**
 * Validates an incoming document under a mode (strict unless given) and says what it is. Signed
 * and encrypted forms are opaque: only their envelope and header uuid are checked.
 */
export function classifyVcon(input: unknown, maxElements = DEFAULT_MAX_ELEMENTS, mode: ValidationMode = 'strict'): ClassifiedVcon {
  const { unstorable } = scanDocument(input, MAX_DEPTH, maxElements);
  if (!isPlainObject(input)) {
    throw new ValidationError('Invalid vCon: the body must be a JSON object (the vCon itself, not wrapped)', [
      { path: '(root)', message: 'must be an object' },
    ]);
  }
  if (Object.hasOwn(input, 'payload') && Object.hasOwn(input, 'signatures')) {
    const s = validate(SignedVcon, input, 'signed vCon');
    const uuid = s.signatures.map((x) => x.header?.uuid).find(Boolean);
    return { kind: 'signed', doc: input, uuid: uuid?.toLowerCase(), warnings: [] };
  }
  if (Object.hasOwn(input, 'ciphertext') && Object.hasOwn(input, 'recipients')) {
    const e = validate(EncryptedVcon, input, 'encrypted vCon');
    return { kind: 'encrypted', doc: input, uuid: e.unprotected?.uuid?.toLowerCase(), warnings: [] };
  }
  const uuid = typeof input.uuid === 'string' ? input.uuid.toLowerCase() : undefined;
  // The fast acceptor answers for the strict rules, which every mode includes.
  if (!unstorable && acceptsPlainVcon(input)) return { kind: 'plain', doc: input, uuid, warnings: [] };
  const warnings = validatePlain(input, mode);
  return { kind: 'plain', doc: input, uuid, warnings };
}
