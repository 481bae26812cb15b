// Typed errors thrown by services and mapped once per transport (one mapping in transport/errors.ts, wrapped by http/error-handler.ts and mcp/result.ts).
// Codes are the machine-readable `error` values of docs/api.md.
import { z } from 'zod';

export interface ErrorDetail {
  path: string;
  message: string;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly hint?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends AppError {
  constructor(message: string, details?: ErrorDetail[], hint?: string) {
    super(400, 'validation_failed', message, details, hint);
  }
}

/** A ValidationError for `what` listing every problem, the first three in its message. */
export function invalid(what: string, details: ErrorDetail[]): ValidationError {
  const head = details
    .slice(0, 3)
    .map((d) => `${d.path}: ${d.message}`)
    .join('; ');
  const more = details.length > 3 ? ` (and ${details.length - 3} more)` : '';
  return new ValidationError(`Invalid ${what}: ${head}${more}`, details);
}

export class InvalidParameterError extends AppError {
  constructor(
    readonly parameter: string,
    problem: string,
    hint?: string,
    details: ErrorDetail[] = [{ path: parameter, message: problem }],
  ) {
    super(400, 'invalid_parameter', `${parameter}: ${problem}`, details, hint);
  }
}

export class NotFoundError extends AppError {
  constructor(kind: 'vcon' | 'tag' | 'example' | 'route', id: string, hint?: string) {
    const what = { vcon: 'vCon', tag: 'tag', example: 'example', route: 'route' }[kind];
    // The example list is useful to everyone, so it goes in the message, not only the hint.
    super(404, `${kind}_not_found`, `${what} ${id} not found${kind === 'example' && hint ? `. ${hint}` : ''}`, undefined, hint);
  }
}

export class ForbiddenError extends AppError {
  constructor(message: string, hint?: string) {
    super(403, 'forbidden', message, undefined, hint);
  }
}

/** Formats zod-style paths as `dialog[0].type`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out ? `.${String(seg)}` : String(seg);
  }
  return out || '(root)';
}

/** What `issueDetails` reads of a zod issue. */
interface Issue {
  code: string;
  path: readonly PropertyKey[];
  message: string;
  keys?: readonly string[];
  issues?: readonly Issue[];
}

/**
 * Zod issues as docs/api.md details, every problem with its path: an unknown field is named by its
 * own path, and a bad record key reports the key's own problem (not the record's).
 */
export function issueDetails(issues: readonly Issue[], prefix: readonly PropertyKey[] = []): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const issue of issues) {
    const at = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys' && issue.keys) {
      for (const key of issue.keys) out.push({ path: formatPath([...at, key]), message: issue.message });
    } else if (issue.code === 'invalid_key' && issue.issues?.length) {
      out.push({ path: formatPath(at), message: issue.issues[0].message });
    } else {
      out.push({ path: formatPath(at), message: issue.message });
    }
  }
  return out;
}

const article = (t: string) => (t === 'null' || t === 'undefined' ? t : `${/^[aeiou]/.test(t) ? 'an' : 'a'} ${t}`);

/** What a value is, in the words of a message ("a number", "an object", "an array", "null"). */
const kindOf = (v: unknown): string => article(v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** A required string's message: missing, and present with another type, are different problems. */
export const stringError =
  (required: string, wrongType: string) =>
  (i: { input: unknown }): string =>
    i.input === undefined ? required : `${wrongType}, not ${kindOf(i.input)}`;

/**
 * zod's message for a value of the wrong type, where a schema says nothing of its own, in the words
 * of the others ("must be a string, not a number"; "is required" when absent). Through zod's own
 * error customisation: a schema's or check's `error` still wins over it.
 */
export function wrongTypeMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== 'invalid_type') return undefined;
  return issue.input === undefined ? 'is required' : `must be ${article(issue.expected)}, not ${kindOf(issue.input)}`;
}
z.config({ customError: wrongTypeMessage });

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up)
]);

/** `instanceof` for any thrown value: a proxy's getPrototypeOf trap may throw. */
export function isInstance<T>(err: unknown, cls: abstract new (...args: never[]) => T): err is T {
  try {
    return err instanceof cls;
  } catch {
    return false;
  }
}

/** A property of any thrown value, or undefined (null, primitives, a getter or proxy that throws). */
export function propOf(err: unknown, key: string): unknown {
  if ((typeof err !== 'object' && typeof err !== 'function') || err === null) return undefined;
  try {
    return (err as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** A one-line description of any thrown value (Error or not, message or not); never throws. */
export function describeThrown(err: unknown): string {
  const message = propOf(err, 'message');
  if (typeof message === 'string' && message !== '') return message;
  try {
    return typeof err === 'string' ? err : String(err);
  } catch {
    // Object.create(null), a proxy that throws, a symbol's description gone wrong
    return 'a value that cannot be printed';
  }
}

/** True when an error means "the database is not reachable right now" (→ 503, not 500). */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = propOf(err, 'code');
  if (typeof code !== 'string') return false;
  return UNAVAILABLE_CODES.has(code) || code.startsWith('08');
}

/**
 * True when PostgreSQL is up but out of capacity: SQLSTATE class 53 (insufficient resources,
 * e.g. 53300 too many connections). The caller should retry shortly, not page anyone.
 */
export function isDatabaseCapacity(err: unknown): boolean {
  const code = propOf(err, 'code');
  return typeof code === 'string' && code.length === 5 && code.startsWith('53');
}

/** Seconds a client is asked to wait (Retry-After) when the database is busy. */
export const BUSY_RETRY_AFTER_S = 1;

/**
 * 503 database_identity: the instance's database role no longer pins its own schema (or no longer
 * owns it), so it serves nothing until that is put right (vcon-launch start or provision).
 */
export class DatabaseIdentityError extends AppError {
  constructor(message: string) {
    super(
      503,
      'database_identity',
      message,
      undefined,
      "restart the group with vcon-launch start (it realigns the group's role), or run vcon-launch provision",
    );
  }
}

/**
 * 503 database_busy: every pooled connection stayed in use for longer than the queue bound, or
 * PostgreSQL refused a connection for capacity. Distinct from database_unavailable (unreachable).
 */
export class DatabaseBusyError extends AppError {
  readonly retryAfterS = BUSY_RETRY_AFTER_S;
  constructor(message = 'The database is busy (every connection of this group is in use); retry shortly', hint?: string) {
    super(503, 'database_busy', message, undefined, hint);
  }
}

/**
 * 503 server_busy: the process is at one of its own bounds (the bytes of request bodies it reads at
 * once), not the database. Retry shortly, as for database_busy.
 */
export class ServerBusyError extends AppError {
  readonly retryAfterS = BUSY_RETRY_AFTER_S;
  constructor(message: string, hint?: string) {
    super(503, 'server_busy', message, undefined, hint);
  }
}

/**
 * Why the database refuses the group's role, in words that name no role, host or password (they
 * are shown by the unauthenticated /health): undefined when the error is not such a refusal.
 * SQLSTATE 28000/28P01 come at login, 3D000 when the database is gone, 42501 when CONNECT on the
 * database was revoked.
 */
export function databaseRefusalOf(err: unknown): string | undefined {
  const code = propOf(err, 'code');
  if (typeof code !== 'string') return undefined;
  const message = describeThrown(err);
  if (code === '28P01') return "the database refuses the group's role: password authentication failed (the role's password changed?)";
  if (code === '28000') {
    if (/not permitted to log in/i.test(message)) return "the database refuses the group's role: it may not log in (NOLOGIN)";
    if (/role .* does not exist/i.test(message)) return "the database refuses the group's role: the role does not exist";
    if (/pg_hba/i.test(message)) return "the database refuses the group's role: no pg_hba.conf entry admits it";
    return "the database refuses the group's role (invalid authorization)";
  }
  if (code === '3D000') return 'the database refuses the connection: the database does not exist';
  if (code === '42501' && /permission denied for database/i.test(message)) {
    return "the database refuses the group's role: it lacks CONNECT on the database";
  }
  return undefined;
}

/** 503 database_refused: the database answers but will not let the group's role in (see databaseRefusalOf). */
export class DatabaseRefusedError extends AppError {
  constructor(reason: string) {
    super(
      503,
      'database_refused',
      `${reason.charAt(0).toUpperCase()}${reason.slice(1)}`,
      undefined,
      "fix the role (ALTER ROLE … LOGIN PASSWORD …) or run vcon-launch provision; the server's log names the role",
    );
  }
}

/**
 * The typed error for a database failure that is not the request's fault (busy, unreachable or
 * refusing the group's role), or undefined for anything else. One mapping for both transports.
 */
export function databaseErrorOf(err: unknown): AppError | undefined {
  if (isInstance(err, AppError)) return undefined;
  const refusal = databaseRefusalOf(err);
  if (refusal) return new DatabaseRefusedError(refusal);
  if (isDatabaseCapacity(err)) {
    return new DatabaseBusyError(
      'The database is at its connection limit; retry shortly',
      'Lower DB_POOL_MAX of the groups or put PgBouncer in front (docs/deployment.md "Many groups on one database")',
    );
  }
  if (isDatabaseUnavailable(err)) return new AppError(503, 'database_unavailable', 'The database is not reachable; try again shortly');
  return undefined;
}
