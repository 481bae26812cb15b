import type { Router } from 'express';
import { parseBody, parseParams, parseUuid, TagPut, TagsQuery } from '../../domain/params.js';
import type { Services } from '../../services/index.js';
import type { DiscoveryKind } from '../../services/discovery-service.js';
import { ctxOf, methodNotAllowed, queryOf } from './util.js';

/** Tag routes and discovery (docs/api.md "Tags", "Discovery"). */
export function registerTagRoutes(router: Router, services: Services) {
  const { tags, discovery } = services;

  router
    .route('/vcons/:uuid/tags')
    .get(async (req, res) => {
      const uuid = parseUuid(req.params.uuid);
      const { key } = parseParams(TagsQuery, queryOf(req));
      if (key !== undefined) {
        res.json({ success: true, uuid, key, value: await tags.getOne(uuid, key, ctxOf(req, res)) });
        return;
      }
      res.json({ success: true, uuid, tags: await tags.get(uuid, ctxOf(req, res)) });
    })
    .delete(async (req, res) => {
      await tags.removeAll(parseUuid(req.params.uuid), ctxOf(req, res));
      res.status(204).end();
    })
    .all(methodNotAllowed);

  router
    .route('/vcons/:uuid/tags/:key')
    .put(async (req, res) => {
      const uuid = parseUuid(req.params.uuid);
      const r = await tags.set(uuid, req.params.key, parseBody(TagPut, req.body).value, ctxOf(req, res));
      res.json({ success: true, uuid, ...r });
    })
    .delete(async (req, res) => {
      await tags.remove(parseUuid(req.params.uuid), req.params.key, ctxOf(req, res));
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
        ...(await tags.search(queryOf(req), ctxOf(req, res))),
      });
    })
    .all(methodNotAllowed);

  const discoveryRoute = (path: string, kind: DiscoveryKind) =>
    router
      .route(path)
      .get(async (req, res) => {
        const r = await discovery.values(kind, queryOf(req), ctxOf(req, res));
        res.json({ success: true, ...r });
      })
      .all(methodNotAllowed);
  discoveryRoute('/discovery/attachments/purposes', 'attachment_purposes');
  discoveryRoute('/discovery/attachments/types', 'attachment_types');
  discoveryRoute('/discovery/analysis/types', 'analysis_types');
}
