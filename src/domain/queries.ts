// Query parameters of the read routes and tools, validated once here. REST passes strings,
// MCP passes typed values: both go through the same schemas.
import { z } from 'zod';
import { AppError, InvalidParameterError } from './errors.js';
import { dateBound } from './dates.js';
import { textProblem } from './text.js';
import { Uuid } from './vcon.js';

export const MAX_PAGE = 100;
export const TAG_PAGING_CAP = 100_000;

type Issue = { parameter: string; problem: string };

function fail(i: Issue): never {
  throw new InvalidParameterError(i.parameter, i.problem);
}

/** Integer parameter from a string or a number. */
export function intParam(name: string, value: unknown, opts: { def: number; min: number; max?: number }): number {
  if (value === undefined || value === null || value === '') return opts.def;
  const s = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  if (!/^-?\d+$/.test(s)) fail({ parameter: name, problem: `must be an integer, got ${JSON.stringify(value)}` });
  const n = Number(s);
  if (!Number.isSafeInteger(n)) fail({ parameter: name, problem: 'is too large' });
  if (n < opts.min) fail({ parameter: name, problem: `must be ≥ ${opts.min}, got ${n}` });
  if (opts.max !== undefined && n > opts.max) fail({ parameter: name, problem: `must be ≤ ${opts.max}, got ${n}` });
  return n;
}

export function boolParam(name: string, value: unknown, def: boolean): boolean {
  if (value === undefined || value === null || value === '') return def;
  if (typeof value === 'boolean') return value;
  const s = String(value).trim().toLowerCase();
  if (['true', '1', 'yes'].includes(s)) return true;
  if (['false', '0', 'no'].includes(s)) return false;
  return fail({ parameter: name, problem: `must be true or false, got ${JSON.stringify(value)}` });
}

export function stringParam(name: string, value: unknown, opts: { max?: number; min?: number } = {}): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') fail({ parameter: name, problem: 'must be a string' });
  const bad = textProblem(value);
  if (bad) fail({ parameter: name, problem: bad });
  if (opts.min !== undefined && value.length < opts.min) fail({ parameter: name, problem: `must be at least ${opts.min} character(s)` });
  if (value.length > (opts.max ?? 1000)) fail({ parameter: name, problem: `must be at most ${opts.max ?? 1000} characters` });
  return value;
}

export function enumParam<T extends string>(name: string, value: unknown, allowed: readonly T[], def: T): T {
  if (value === undefined || value === null || value === '') return def;
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  return fail({ parameter: name, problem: `must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}` });
}

/**
 * A date filter: a full date-time, or a date alone (rules in dates.ts: as a start a date means that
 * day's 00:00 UTC, as an end it covers the whole day; years 0001-9999 after the offset).
 */
export function dateParam(name: string, value: unknown, edge: 'start' | 'end'): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') fail({ parameter: name, problem: 'must be a date (YYYY-MM-DD) or an RFC 3339 date-time' });
  const r = dateBound(value, edge);
  if ('problem' in r) fail({ parameter: name, problem: r.problem });
  return r.date;
}

/** The `tags` filter: a JSON object of key to value (string, number or boolean). */
export function tagsParam(name: string, value: unknown, required = false): Record<string, string> | undefined {
  if (value === undefined || value === null || value === '') {
    if (required) fail({ parameter: name, problem: 'is required: a JSON object of tag key to value, e.g. {"status":"open"}' });
    return undefined;
  }
  let obj: unknown = value;
  if (typeof value === 'string') {
    try {
      obj = JSON.parse(value);
    } catch {
      fail({ parameter: name, problem: 'must be a JSON object such as {"status":"open"} (not valid JSON)' });
    }
  }
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) fail({ parameter: name, problem: 'must be a JSON object of tag key to value' });
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
    checkTagKey(`${name}.${k}`, k);
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      fail({ parameter: `${name}.${k}`, problem: 'must be a string, number or boolean' });
    }
    out[k] = String(v);
  }
  if (required && Object.keys(out).length === 0) fail({ parameter: name, problem: 'must name at least one tag' });
  return out;
}

/** A tag key may not be empty, contain a colon, or be absurdly long. */
export function checkTagKey(parameter: string, key: string): string {
  if (key === '') fail({ parameter, problem: 'tag key must not be empty' });
  if (key.includes(':')) fail({ parameter, problem: 'tag key must not contain ":"' });
  if (key.length > 200) fail({ parameter, problem: 'tag key must be at most 200 characters' });
  const bad = textProblem(key);
  if (bad) fail({ parameter, problem: `tag key ${bad}` });
  return key;
}

export function uuidParam(value: unknown, name = 'uuid'): string {
  const r = Uuid.safeParse(value);
  if (!r.success)
    fail({ parameter: name, problem: `must be a UUID (8-4-4-4-12 hexadecimal digits), got ${JSON.stringify(String(value).slice(0, 60))}` });
  return r.data.toLowerCase();
}

export const LIST_FORMATS = ['metadata', 'full', 'ids_only'] as const;
export const GET_FORMATS = ['full', 'summary', 'metadata'] as const;

export interface ListQuery {
  limit: number;
  offset: number;
  subject?: string;
  party_name?: string;
  party_email?: string;
  party_tel?: string;
  start_date?: Date;
  end_date?: Date;
  tags?: Record<string, string>;
  format: (typeof LIST_FORMATS)[number];
}

/** Parses the `GET /vcons` parameters (API.md "Listing"). */
export function parseListQuery(q: Record<string, unknown>): ListQuery {
  const limit = Math.min(intParam('limit', q.limit, { def: 10, min: 1 }), MAX_PAGE);
  const query: ListQuery = {
    limit,
    offset: intParam('offset', q.offset, { def: 0, min: 0 }),
    subject: stringParam('subject', q.subject),
    party_name: stringParam('party_name', q.party_name),
    party_email: stringParam('party_email', q.party_email),
    party_tel: stringParam('party_tel', q.party_tel),
    start_date: dateParam('start_date', q.start_date, 'start'),
    end_date: dateParam('end_date', q.end_date, 'end'),
    tags: tagsParam('tags', q.tags),
    format: enumParam('format', q.format, LIST_FORMATS, 'metadata'),
  };
  if (query.tags && Object.keys(query.tags).length > 0 && query.offset + query.limit > TAG_PAGING_CAP) {
    throw new AppError(400, 'paging_cap_exceeded', `offset + limit may not pass ${TAG_PAGING_CAP} when filtering by tags`, [
      { path: 'offset', message: `offset + limit must be ≤ ${TAG_PAGING_CAP} in the tag-ordered listing` },
    ]);
  }
  return query;
}

/** JSON-Schema-friendly descriptions of the list parameters, for MCP and OpenAPI. */
export const ListQuerySchema = z.object({
  limit: z.number().int().min(1).optional().describe('Page size, default 10, capped at 100'),
  offset: z.number().int().min(0).optional().describe('Rows to skip, default 0'),
  subject: z.string().optional().describe('Case-insensitive substring of the subject'),
  party_name: z.string().optional(),
  party_email: z.string().optional(),
  party_tel: z.string().optional(),
  start_date: z.string().optional().describe('YYYY-MM-DD or RFC 3339; on created_at'),
  end_date: z.string().optional().describe('YYYY-MM-DD (whole day) or RFC 3339; on created_at'),
  tags: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .optional()
    .describe('Every pair must match'),
  format: z.enum(LIST_FORMATS).optional(),
});
