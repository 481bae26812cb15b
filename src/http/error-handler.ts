// REST's wrapping of the shared error mapping (src/transport/errors.ts): an express error handler
// that answers in the one format of docs/api.md, never throws and never lets express answer with HTML.
import type { ErrorRequestHandler, Response } from 'express';
import { describeThrown } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import { logQuietly, sendErrorBody, toErrorBody } from '../transport/errors.js';

/** The answer when even writing the mapped error failed: fixed JSON, written by hand. */
const BARE_500 = JSON.stringify({ success: false, error: 'internal_error', message: 'An unexpected error occurred' });

function lastResort(res: Response, log: Logger, failure: unknown): void {
  logQuietly(log, 'error', { err: describeThrown(failure) }, 'the error handler failed; answered a bare 500');
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

/**
 * Maps every error to the one format: typed AppErrors, body-parser and router errors, database
 * outages. It never throws and never lets express answer with its HTML page.
 */
export function createErrorHandler(opts: { production: boolean; log: Logger }): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    try {
      const mapped = toErrorBody(err, { ...opts, path: req.path, logFields: { req_id: res.getHeader('X-Request-Id') } });
      if (mapped) sendErrorBody(req, res, mapped.status, mapped.body);
    } catch (failure) {
      lastResort(res, opts.log, failure);
    }
  };
}
