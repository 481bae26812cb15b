import type { Router } from 'express';
import type { Config } from '../../config.js';
import type { BuildInfo } from '../../version.js';
import type { Services } from '../../services/index.js';
import { healthBody } from '../../services/health-service.js';
import { buildOpenApiDocument } from '../openapi.js';
import { BUSY_RETRY_AFTER_S } from '../../domain/errors.js';
import { methodNotAllowed } from './util.js';

/** Routes that need no key: health, version, schema, openapi.json, examples. */
export function registerInfraRoutes(router: Router, deps: { config: Config; services: Services; buildInfo: BuildInfo }) {
  const { services, buildInfo, config } = deps;

  // Another method on these paths is a 405 (with Allow), as on every other route, not a 404.
  router
    .route('/health')
    .get(async (_req, res) => {
      const h = await services.health.check();
      res.setHeader('Cache-Control', 'no-store');
      if (h.state === 'busy') res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_S));
      res.status(h.healthy ? 200 : 503).json({ success: h.healthy, ...healthBody(h) });
    })
    .all(methodNotAllowed);

  router
    .route('/version')
    .get((_req, res) => {
      res.json({
        success: true,
        version: buildInfo.version,
        git_commit: buildInfo.gitCommit,
        build_time: buildInfo.buildTime,
        api_base_path: config.rest.basePath || '/',
      });
    })
    .all(methodNotAllowed);

  if (!config.rest.enabled) return;

  router
    .route('/schema')
    .get((_req, res) => {
      res.type('application/schema+json').send(JSON.stringify(services.meta.schema()));
    })
    .all(methodNotAllowed);

  let openapi: string | undefined;
  router
    .route('/openapi.json')
    .get((_req, res) => {
      openapi ??= JSON.stringify(buildOpenApiDocument(config, { version: buildInfo.version }));
      res.type('application/json').send(openapi);
    })
    .all(methodNotAllowed);

  router
    .route('/examples/:type')
    .get((req, res) => {
      res.json({ success: true, type: req.params.type, vcon: services.meta.example(req.params.type) });
    })
    .all(methodNotAllowed);
}
