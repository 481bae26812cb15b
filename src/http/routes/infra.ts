import type { Router } from 'express';
import type { Config } from '../../config.js';
import type { BuildInfo } from '../../version.js';
import type { Services } from '../../services/index.js';
import { healthBody } from '../../services/health-service.js';
import { buildOpenApiDocument } from '../openapi.js';
import { BUSY_RETRY_AFTER_S } from '../../domain/errors.js';

/** Routes that need no key: health, version, schema, openapi.json, examples (SPEC.md "Infrastructure"). */
export function registerInfraRoutes(router: Router, deps: { config: Config; services: Services; buildInfo: BuildInfo }) {
  const { services, buildInfo, config } = deps;

  router.get('/health', async (_req, res) => {
    const h = await services.health.check();
    res.setHeader('Cache-Control', 'no-store');
    if (h.state === 'busy') res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_S));
    res.status(h.healthy ? 200 : 503).json({ success: h.healthy, ...healthBody(h) });
  });

  router.get('/version', (_req, res) => {
    res.json({
      success: true,
      version: buildInfo.version,
      git_commit: buildInfo.gitCommit,
      build_time: buildInfo.buildTime,
      api_base_path: config.rest.basePath || '/',
    });
  });

  if (!config.rest.enabled) return;

  router.get('/schema', (_req, res) => {
    res.type('application/schema+json').send(JSON.stringify(services.meta.schema()));
  });

  let openapi: string | undefined;
  router.get('/openapi.json', (_req, res) => {
    openapi ??= JSON.stringify(buildOpenApiDocument(config, { version: buildInfo.version }));
    res.type('application/json').send(openapi);
  });

  router.get('/examples/:type', (req, res) => {
    res.json({ success: true, type: req.params.type, vcon: services.meta.example(req.params.type) });
  });
}
