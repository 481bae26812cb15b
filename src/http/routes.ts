// The express routes, generated from the operation table (src/transport/operations.ts), and what
// every route shares: the service context of a request, its query, and 405 for other methods.
import type { Request, RequestHandler, Response, Router } from 'express';
import type { AuthInfo } from '../transport/auth.js';
import { ROUTES, type Method, type OpEnv, type Operation } from '../transport/operations.js';
import type { RequestCtx } from '../services/context.js';
import { AppError } from '../domain/errors.js';
import { admitted } from './admission.js';

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

/** Which routes a registration adds, by where they sit among the middlewares. */
export type RouteStage = 'open' | 'ungated' | 'gated';

const METHOD_ORDER: readonly Method[] = ['get', 'post', 'put', 'patch', 'delete'];

const stageOf = (o: Operation): RouteStage => (o.scope === 'none' ? 'open' : o.ungated ? 'ungated' : 'gated');

/**
 * Registers the routes of one stage, generated from the operation table: the open routes before
 * the key check, the ungated ones after the body parser, the rest each with a turn of the pool
 * (`admitted`). Each path answers its methods and 405 (with Allow) to any other.
 */
export function registerRoutes(router: Router, stage: RouteStage, env: OpEnv, opts: { restEnabled: boolean }): void {
  const paths = new Map<string, Operation[]>();
  for (const o of ROUTES) {
    if (stageOf(o) !== stage || !(opts.restEnabled || o.alwaysServed)) continue;
    paths.set(o.path, [...(paths.get(o.path) ?? []), o]);
  }
  for (const [path, ops] of paths) {
    const route = router.route(path);
    // In one order whatever the table's, so that Allow lists a path's methods the same way.
    for (const o of ops.toSorted((a, b) => METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method))) {
      const handler = handlerOf(o, env);
      route[o.method](stage === 'gated' ? admitted(env.services.admission, handler) : handler);
    }
    route.all(methodNotAllowed);
  }
}

function handlerOf(o: Operation, env: OpEnv): (req: Request, res: Response) => Promise<void> {
  return async (req, res) => {
    const input = { path: req.params as Record<string, string>, query: queryOf(req), body: req.body as unknown };
    const ctx = ctxOf(req, res);
    const call = () => o.call(input, ctx, env);
    if (o.rest) return o.rest({ req, res, input, ctx, env, call });
    const result = await call();
    if (o.reply) o.reply(result, res);
    else res.json({ success: true, ...(result as object) });
  };
}
