import type { Router } from 'express';
import type { Services } from '../../services/index.js';
import { ctxOf, methodNotAllowed, queryOf } from './util.js';

/**
 * Database introspection and analytics routes (docs/api.md "Database and analytics"): thin wrappers
 * answering `{"success": true, "data": {...}}`. POST /database/analyze is a POST, so read-only
 * keys get 403 from the auth layer (read-only keys may only GET, HEAD and OPTIONS) although it never writes.
 */
export function registerDatabaseRoutes(router: Router, services: Services) {
  const { database, analytics } = services;

  const get = (path: string, fn: (query: Record<string, string | undefined>, ctx: ReturnType<typeof ctxOf>) => Promise<unknown>) =>
    router
      .route(path)
      .get(async (req, res) => {
        res.json({ success: true, data: await fn(queryOf(req), ctxOf(req, res)) });
      })
      .all(methodNotAllowed);

  get('/database/shape', (_q, ctx) => database.shape(ctx));
  get('/database/stats', (_q, ctx) => database.stats(ctx));
  get('/database/size', (_q, ctx) => database.size(ctx));
  get('/database/health', (_q, ctx) => database.health(ctx));

  router
    .route('/database/analyze')
    .post(async (req, res) => {
      res.json({ success: true, data: await database.analyze(req.body as unknown, ctxOf(req, res)) });
    })
    .all(methodNotAllowed);

  get('/analytics', (q, ctx) => analytics.all(q, ctx));
  get('/analytics/growth', (q, ctx) => analytics.growth(q, ctx));
  get('/analytics/content', (q, ctx) => analytics.content(q, ctx));
  get('/analytics/tags', (q, ctx) => analytics.tags(q, ctx));
  get('/analytics/attachments', (q, ctx) => analytics.attachments(q, ctx));
}
