import type { Response, Router } from 'express';
import type { Services } from '../../services/index.js';
import type { SearchResponse } from '../../services/search-service.js';
import { ctxOf, methodNotAllowed, queryOf } from './util.js';

/** A search's answer; X-Index-Pending repeats its `index.pending` (vCons written before it it could not see). */
function sendResults(res: Response, r: SearchResponse): void {
  if (r.index) res.setHeader('X-Index-Pending', String(r.index.pending));
  res.json({ success: true, ...r });
}

/** Keyword, semantic and hybrid search routes (docs/api.md "Search"). */
export function registerSearchRoutes(router: Router, services: Services) {
  for (const kind of ['content', 'semantic', 'hybrid'] as const) {
    router
      .route(`/vcons/search/${kind}`)
      .get(async (req, res) => sendResults(res, await services.search[kind](queryOf(req), ctxOf(req, res))))
      .all(methodNotAllowed);
  }
}
