import type { Router } from 'express';
import type { Services } from '../../services/index.js';
import { ctxOf, methodNotAllowed, queryOf } from './util.js';

/** Keyword, semantic and hybrid search routes (API.md "Search"). */
export function registerSearchRoutes(router: Router, services: Services) {
  router
    .route('/vcons/search/content')
    .get(async (req, res) => {
      res.json({ success: true, ...(await services.search.content(queryOf(req), ctxOf(req, res))) });
    })
    .all(methodNotAllowed);
  router
    .route('/vcons/search/semantic')
    .get(async (req, res) => {
      res.json({ success: true, ...(await services.search.semantic(queryOf(req), ctxOf(req, res))) });
    })
    .all(methodNotAllowed);
  router
    .route('/vcons/search/hybrid')
    .get(async (req, res) => {
      res.json({ success: true, ...(await services.search.hybrid(queryOf(req), ctxOf(req, res))) });
    })
    .all(methodNotAllowed);
}
