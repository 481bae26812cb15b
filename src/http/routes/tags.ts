import type { Router } from 'express';
import { stringParam, uuidParam } from '../../domain/queries.js';
import { ValidationError } from '../../domain/errors.js';
import type { Services } from '../../services/index.js';
import type { DiscoveryKind } from '../../services/discovery-service.js';
import { ctxOf, methodNotAllowed, q } from './util.js';

/** Tag routes and discovery (API.md "Tags", "Discovery"). */
export function registerTagRoutes(router: Router, services: Services) {
  const { tags, discovery } = services;

  router
    .route('/vcons/:uuid/tags')
    .get(async (req, res) => {
      const uuid = uuidParam(req.params.uuid);
      const key = stringParam('key', q(req, 'key'));
      if (key !== undefined) {
        res.json({ success: true, uuid, key, value: await tags.getOne(uuid, key, ctxOf(req, res)) });
        return;
      }
      res.json({ success: true, uuid, tags: await tags.get(uuid, ctxOf(req, res)) });
    })
    .delete(async (req, res) => {
      await tags.removeAll(uuidParam(req.params.uuid), ctxOf(req, res));
      res.status(204).end();
    })
    .all(methodNotAllowed);

  router
    .route('/vcons/:uuid/tags/:key')
    .put(async (req, res) => {
      const uuid = uuidParam(req.params.uuid);
      const body = req.body as unknown;
      if (!body || typeof body !== 'object' || Array.isArray(body) || !('value' in body)) {
        throw new ValidationError('Body must be a JSON object with a "value" field', [{ path: 'value', message: 'is required' }]);
      }
      const r = await tags.set(uuid, req.params.key, (body as { value: unknown }).value, ctxOf(req, res));
      res.json({ success: true, uuid, ...r });
    })
    .delete(async (req, res) => {
      await tags.remove(uuidParam(req.params.uuid), req.params.key, ctxOf(req, res));
      res.status(204).end();
    })
    .all(methodNotAllowed);

  router
    .route('/tags')
    .get(async (req, res) => {
      res.json({ success: true, ...(await tags.unique(ctxOf(req, res))) });
    })
    .all(methodNotAllowed);

  router
    .route('/tags/search')
    .get(async (req, res) => {
      res.json({
        success: true,
        ...(await tags.search({ tags: q(req, 'tags'), limit: q(req, 'limit'), offset: q(req, 'offset') }, ctxOf(req, res))),
      });
    })
    .all(methodNotAllowed);

  const discoveryRoute = (path: string, kind: DiscoveryKind) =>
    router
      .route(path)
      .get(async (req, res) => {
        const r = await discovery.values(kind, { include_counts: q(req, 'include_counts'), min_count: q(req, 'min_count') }, ctxOf(req, res));
        res.json({ success: true, ...r });
      })
      .all(methodNotAllowed);
  discoveryRoute('/discovery/attachments/purposes', 'attachment_purposes');
  discoveryRoute('/discovery/attachments/types', 'attachment_types');
  discoveryRoute('/discovery/analysis/types', 'analysis_types');
}
