// Typed errors thrown by services and mapped once per transport (one mapping in transport/errors.ts, wrapped by http/error-handler.ts and mcp/result.ts).
// Codes are the machine-readable `error` values of API.md.

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

export class InvalidParameterError extends AppError {
  constructor(readonly parameter: string, problem: string, hint?: string) {
    super(400, 'invalid_parameter', `${parameter}: ${problem}`, [{ path: parameter, message: problem }], hint);
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
  '53300', // too_many_connections
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
