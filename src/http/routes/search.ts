import type { Router } from 'express';
import type { Services } from '../../services/index.js';
import { ctxOf, queryOf } from './util.js';

/** Keyword, semantic and hybrid search routes (API.md "Search"). */
export function registerSearchRoutes(router: Router, services: Services) {
  router.get('/vcons/search/content', async (req, res) => {
    res.json({ success: true, ...(await services.search.content(queryOf(req), ctxOf(req, res))) });
  });
  router.get('/vcons/search/semantic', async (req, res) => {
    res.json({ success: true, ...(await services.search.semantic(queryOf(req), ctxOf(req, res))) });
  });
  router.get('/vcons/search/hybrid', async (req, res) => {
    res.json({ success: true, ...(await services.search.hybrid(queryOf(req), ctxOf(req, res))) });
  });
}
