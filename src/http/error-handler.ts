import type { ErrorRequestHandler, Request, Response } from 'express';
import { AppError, isDatabaseUnavailable, type ErrorDetail } from '../domain/errors.js';
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

interface BodyParserError {
  type?: string;
  status?: number;
  expose?: boolean;
  message: string;
}

/** Maps every error to the one format: typed AppErrors, body-parser errors, database outages. */
export function createErrorHandler(opts: { production: boolean; log: Logger }): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const production = opts.production;
    if (err instanceof AppError) {
      sendError(req, res, err.status, err.code, err.message, { details: err.details, hint: err.hint, production });
      return;
    }
    const bp = err as BodyParserError;
    switch (bp?.type) {
      case 'entity.parse.failed':
        sendError(req, res, 400, 'invalid_json', `Request body is not valid JSON: ${bp.message}`, {
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
        sendError(req, res, 415, 'unsupported_media_type', bp.message, { hint: 'Use UTF-8 JSON, optionally gzip-encoded', production });
        return;
      case 'request.aborted':
        return;
      case 'request.size.invalid':
      case 'stream.encoding.set':
        sendError(req, res, 400, 'invalid_json', bp.message, { production });
        return;
    }
    if (bp?.status && bp.status >= 400 && bp.status < 500 && bp.expose) {
      sendError(req, res, bp.status, bp.status === 413 ? 'payload_too_large' : 'invalid_parameter', bp.message, { production });
      return;
    }
    if (isDatabaseUnavailable(err)) {
      opts.log.warn({ err: (err as Error).message, req_id: res.getHeader('X-Request-Id') }, 'database unavailable');
      sendError(req, res, 503, 'database_unavailable', 'The database is not reachable; try again shortly', { production });
      return;
    }
    opts.log.error({ err, req_id: res.getHeader('X-Request-Id') }, 'unhandled error');
    sendError(
      req,
      res,
      500,
      'internal_error',
      production ? 'An unexpected error occurred' : `An unexpected error occurred: ${(err as Error)?.message ?? String(err)}`,
      { production },
    );
  };
}
