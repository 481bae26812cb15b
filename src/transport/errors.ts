// The one mapping from anything thrown to the error format of docs/api.md, shared by name by both
// transports: REST sends it as the body ({success: false, ...}, http/error-handler.ts), MCP as a
// tool error's structured content or a JSON-RPC error's data (mcp/result.ts). Never throws.
import type { Request, Response } from 'express';
import { AppError, BUSY_RETRY_AFTER_S, databaseErrorOf, describeThrown, isInstance, propOf, type ErrorDetail } from '../domain/errors.js';
import type { Logger } from '../logger.js';

/** The error body of docs/api.md without the REST envelope's `success` and `request_id`. */
export interface ErrorContent {
  [key: string]: unknown;
  error: string;
  message: string;
  details?: ErrorDetail[];
  hint?: string;
}

/** The REST error body: the content plus `success: false` and the request id. */
export interface ErrorBody extends ErrorContent {
  success: false;
  request_id?: string;
}

export interface ErrorMapOptions {
  production: boolean;
  log: Logger;
  /** Fields every log line of this mapping carries (the request id). */
  logFields?: Record<string, unknown>;
  /** The request path, named in the answer to an undecodable one. */
  path?: string;
}

/** The answer when mapping an error failed: fixed text, nothing left to throw. */
const BARE_500 = (): { status: number; body: ErrorContent } => ({
  status: 500,
  body: { error: 'internal_error', message: 'An unexpected error occurred' },
});

/** Logs without ever throwing: the answer must not depend on the log sink. */
export function logQuietly(log: Logger, level: 'warn' | 'error', obj: object, msg: string): void {
  try {
    log[level](obj, msg);
  } catch {
    // nothing better to do with a failing logger here
  }
}

const content = (error: string, message: string, production: boolean, extra: { details?: ErrorDetail[]; hint?: string } = {}): ErrorContent => {
  const body: ErrorContent = { error, message };
  if (extra.details?.length) body.details = extra.details;
  if (extra.hint && !production) body.hint = extra.hint;
  return body;
};

function map(err: unknown, opts: ErrorMapOptions): { status: number; body: ErrorContent } | null {
  const { production, log } = opts;
  if (isInstance(err, AppError)) return { status: err.status, body: content(err.code, err.message, production, err) };
  const message = describeThrown(err);
  // Body-parser errors (REST only; MCP receives parsed JSON-RPC).
  switch (propOf(err, 'type')) {
    case 'entity.parse.failed':
      return {
        status: 400,
        body: content('invalid_json', `Request body is not valid JSON: ${message}`, production, {
          hint: 'Send a JSON document with Content-Type: application/json',
        }),
      };
    case 'entity.too.large':
      return {
        status: 413,
        body: content('payload_too_large', 'Request body exceeds the size limit', production, {
          hint: 'Raise REST_API_BODY_LIMIT or split the request (batch of up to 100 vCons)',
        }),
      };
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return { status: 415, body: content('unsupported_media_type', message, production, { hint: 'Use UTF-8 JSON, optionally gzip-encoded' }) };
    case 'request.aborted':
      return null;
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return { status: 400, body: content('invalid_json', message, production) };
  }
  // The router's decodeURIComponent of a path parameter (`/vcons/%FF`).
  if (isInstance(err, URIError)) {
    return {
      status: 400,
      body: content('invalid_parameter', `The request path is not valid percent-encoded UTF-8: ${(opts.path ?? '').slice(0, 200)}`, production, {
        details: [{ path: 'path', message: 'is not valid percent-encoded UTF-8' }],
      }),
    };
  }
  const status = propOf(err, 'status') ?? propOf(err, 'statusCode');
  if (typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500 && propOf(err, 'expose') === true) {
    return { status, body: content(status === 413 ? 'payload_too_large' : 'invalid_parameter', message, production) };
  }
  // Busy (pool wait bound, SQLSTATE class 53) or unreachable: 503 with its own code.
  const dbErr = databaseErrorOf(err);
  if (dbErr) {
    logQuietly(log, 'warn', { err: message, code: dbErr.code, ...opts.logFields }, dbErr.code.replace('_', ' '));
    return { status: dbErr.status, body: content(dbErr.code, dbErr.message, production, dbErr) };
  }
  logQuietly(log, 'error', { err: isInstance(err, Error) ? err : message, ...opts.logFields }, 'unhandled error');
  return {
    status: 500,
    body: content('internal_error', production ? 'An unexpected error occurred' : `An unexpected error occurred: ${message}`, production),
  };
}

/**
 * Any thrown value (of any shape) as a status and the error content of docs/api.md: typed errors keep
 * their code and status, body-parser and router errors become 4xx, database outages 503, the rest
 * 500. null when there is nobody to answer (the client aborted the request). Never throws.
 */
export function toErrorBody(err: unknown, opts: ErrorMapOptions): { status: number; body: ErrorContent } | null {
  try {
    return map(err, opts);
  } catch {
    return BARE_500();
  }
}

/** Writes the REST error body for a status and content; `hint` only outside production. */
export function sendErrorBody(req: Request, res: Response, status: number, c: ErrorContent): void {
  const body: ErrorBody = { success: false, ...c };
  body.request_id = String(res.getHeader('X-Request-Id') ?? req.headers['x-request-id'] ?? '');
  // The code, for the request metrics (read when the response ends).
  res.locals.errorCode = c.error;
  if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
  if ((c.error === 'database_busy' || c.error === 'server_busy') && !res.headersSent) res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_S));
  if (!res.headersSent) res.status(status).json(body);
  else res.end();
}

/** The one error format of docs/api.md, from its parts (auth, routing, the MCP endpoint's own refusals). */
export function sendError(
  req: Request,
  res: Response,
  status: number,
  error: string,
  message: string,
  opts: { details?: ErrorDetail[]; hint?: string; production: boolean },
): void {
  sendErrorBody(req, res, status, content(error, message, opts.production, opts));
}
