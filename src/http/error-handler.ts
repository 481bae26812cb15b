import type { ErrorRequestHandler, Request, Response } from 'express';
import { AppError, describeThrown, isDatabaseUnavailable, isInstance, propOf, type ErrorDetail } from '../domain/errors.js';
import type { Logger } from '../logger.js';

export interface ErrorBody {
  success: false;
  error: string;
  message: string;
  details?: ErrorDetail[];
  hint?: string;
  request_id?: string;
}

/** The one error format of API.md; `hint` only outside production. */
export function sendError(
  req: Request,
  res: Response,
  status: number,
  error: string,
  message: string,
  opts: { details?: ErrorDetail[]; hint?: string; production: boolean },
): void {
  const body: ErrorBody = { success: false, error, message };
  if (opts.details?.length) body.details = opts.details;
  if (opts.hint && !opts.production) body.hint = opts.hint;
  body.request_id = String(res.getHeader('X-Request-Id') ?? req.headers['x-request-id'] ?? '');
  if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
  if (!res.headersSent) res.status(status).json(body);
  else res.end();
}

/** The answer when mapping an error failed: fixed JSON, written by hand (nothing left to throw). */
const BARE_500 = JSON.stringify({ success: false, error: 'internal_error', message: 'An unexpected error occurred' });

function lastResort(res: Response, log: Logger, failure: unknown): void {
  note(log, 'error', { err: describeThrown(failure) }, 'the error handler failed; answered a bare 500');
  try {
    if (!res.headersSent) {
      res.statusCode = 500;
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.end(BARE_500);
    } else {
      res.end();
    }
  } catch {
    res.destroy();
  }
}

/** Logs without ever throwing: the answer must not depend on the log sink. */
function note(log: Logger, level: 'warn' | 'error', obj: object, msg: string): void {
  try {
    log[level](obj, msg);
  } catch {
    // nothing better to do with a failing logger here
  }
}

/** Maps one thrown value (of any shape) to the one format. */
function answer(err: unknown, req: Request, res: Response, opts: { production: boolean; log: Logger }): void {
  const production = opts.production;
  if (isInstance(err, AppError)) {
    sendError(req, res, err.status, err.code, err.message, { details: err.details, hint: err.hint, production });
    return;
  }
  const type = propOf(err, 'type');
  const message = describeThrown(err);
  switch (type) {
    case 'entity.parse.failed':
      sendError(req, res, 400, 'invalid_json', `Request body is not valid JSON: ${message}`, {
        hint: 'Send a JSON document with Content-Type: application/json',
        production,
      });
      return;
    case 'entity.too.large':
      sendError(req, res, 413, 'payload_too_large', 'Request body exceeds the size limit', {
        hint: 'Raise REST_API_BODY_LIMIT or split the request (batch of up to 100 vCons)',
        production,
      });
      return;
    case 'encoding.unsupported':
    case 'charset.unsupported':
      sendError(req, res, 415, 'unsupported_media_type', message, { hint: 'Use UTF-8 JSON, optionally gzip-encoded', production });
      return;
    case 'request.aborted':
      return;
    case 'request.size.invalid':
    case 'stream.encoding.set':
      sendError(req, res, 400, 'invalid_json', message, { production });
      return;
  }
  // The router's decodeURIComponent of a path parameter (`/vcons/%FF`).
  if (isInstance(err, URIError)) {
    sendError(req, res, 400, 'invalid_parameter', `The request path is not valid percent-encoded UTF-8: ${req.path.slice(0, 200)}`, {
      details: [{ path: 'path', message: 'is not valid percent-encoded UTF-8' }],
      production,
    });
    return;
  }
  const status = propOf(err, 'status') ?? propOf(err, 'statusCode');
  if (typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500 && propOf(err, 'expose') === true) {
    sendError(req, res, status, status === 413 ? 'payload_too_large' : 'invalid_parameter', message, { production });
    return;
  }
  if (isDatabaseUnavailable(err)) {
    note(opts.log, 'warn', { err: message, req_id: res.getHeader('X-Request-Id') }, 'database unavailable');
    sendError(req, res, 503, 'database_unavailable', 'The database is not reachable; try again shortly', { production });
    return;
  }
  note(opts.log, 'error', { err: isInstance(err, Error) ? err : message, req_id: res.getHeader('X-Request-Id') }, 'unhandled error');
  sendError(req, res, 500, 'internal_error', production ? 'An unexpected error occurred' : `An unexpected error occurred: ${message}`, { production });
}

/**
 * Maps every error to the one format: typed AppErrors, body-parser and router errors, database
 * outages. It never throws and never lets express answer with its HTML page.
 */
export function createErrorHandler(opts: { production: boolean; log: Logger }): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    try {
      answer(err, req, res, opts);
    } catch (failure) {
      lastResort(res, opts.log, failure);
    }
  };
}
