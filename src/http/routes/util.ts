import type { Request, RequestHandler, Response } from 'express';
import type { AuthInfo } from '../../transport/auth.js';
import type { RequestCtx } from '../../services/context.js';
import { AppError } from '../../domain/errors.js';

/** The service context of a REST request: the key's scope, never the key itself. */
export function ctxOf(req: Request, res: Response): RequestCtx {
  const auth = res.locals.auth as AuthInfo | undefined;
  return {
    transport: 'rest',
    scope: auth?.scope ?? 'read',
    keyId: auth?.keyId ?? null,
    requestId: String(res.getHeader('X-Request-Id') ?? ''),
  };
}

/** 405 for a known path with a method it doesn't serve, with the `Allow` header HTTP requires. */
export const methodNotAllowed: RequestHandler = (req, res) => {
  const methods = Object.keys((req.route as { methods?: Record<string, boolean> } | undefined)?.methods ?? {})
    .filter((m) => m !== '_all')
    .map((m) => m.toUpperCase());
  if (methods.includes('GET')) methods.push('HEAD');
  const allowed = [...methods, 'OPTIONS'].join(', ');
  res.setHeader('Allow', allowed);
  throw new AppError(405, 'method_not_allowed', `${req.method} is not allowed on ${req.path}; allowed: ${allowed}`);
};

/** The first value of a query parameter (repeated parameters are not merged). */
export function q(req: Request, name: string): string | undefined {
  const v = (req.query as Record<string, unknown>)[name];
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined;
  return typeof v === 'string' ? v : undefined;
}

/** All query parameters as single strings. */
export function queryOf(req: Request): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const k of Object.keys(req.query as object)) out[k] = q(req, k);
  return out;
}
