import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response, type Router } from 'express';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { BuildInfo } from '../version.js';
import { NotFoundError } from '../domain/errors.js';
import type { Services } from '../services/index.js';
import { createErrorHandler } from './error-handler.js';
import { createAuth } from '../transport/auth.js';
import { createCors, REST_CORS } from '../transport/cors.js';
import { sendError } from '../transport/errors.js';
import { createBodyParser } from './body.js';
import { createAdmissionGate } from './admission.js';
import { registerInfraRoutes } from './routes/infra.js';
import { registerVconRoutes } from './routes/vcons.js';
import { registerTagRoutes } from './routes/tags.js';
import { registerSearchRoutes } from './routes/search.js';
import { registerDatabaseRoutes } from './routes/database.js';

export interface AppDeps {
  config: Config;
  log: Logger;
  services: Services;
  buildInfo: BuildInfo;
  /** Extra routes mounted at the server root, before REST and the 404 handler (the MCP endpoint). */
  mount?: (app: Express) => void;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The access log line of one request: 5xx error, 4xx warn, else info; aborted requests warn. */
function logRequest(log: Logger, req: Request, res: Response, id: string, start: number): void {
  const status = res.statusCode;
  const aborted = !res.writableFinished;
  const level = status >= 500 ? 'error' : status >= 400 || aborted ? 'warn' : 'info';
  if (!log.isLevelEnabled(level)) return;
  // Paths only: query strings can carry emails and phone numbers (party filters).
  const q = req.originalUrl.indexOf('?');
  const path = q < 0 ? req.originalUrl : req.originalUrl.slice(0, q);
  log[level](
    { req: { id, method: req.method, path }, res: { statusCode: status }, responseTime: Math.round(performance.now() - start) },
    aborted ? 'request aborted' : 'request completed',
  );
}

/** Builds the express app of one instance: REST under the base path, MCP beside it. */
export function buildApp(deps: AppDeps): Express {
  const { config, log, services, buildInfo } = deps;
  const app = express();
  // From config, not NODE_ENV of the process: a launcher standby receives its group's env by IPC.
  app.set('env', config.nodeEnv);
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  const health = `${config.rest.basePath}/health`;
  const { version, gitCommit, buildTime } = buildInfo;
  // One middleware for the request id, the build headers and the access log line. The line is
  // written by the root logger when the response ends: no child logger per request (pino-http
  // built one for every request, whether or not anything logged through it).
  app.use((req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', id);
    res.setHeader('X-Version', version);
    res.setHeader('X-Git-Commit', gitCommit);
    res.setHeader('X-Build-Time', buildTime);
    if (req.url !== health) {
      const start = performance.now();
      res.once('close', () => logRequest(log, req, res, id, start));
    }
    next();
  });
  // Mounted before REST so that a root base path ('') can't put /mcp behind REST's method rules.
  deps.mount?.(app);

  const base = config.rest.basePath;
  const api: Router = express.Router({ strict: false });
  api.use(createCors(config, REST_CORS));
  registerInfraRoutes(api, { config, services, buildInfo });
  if (config.rest.enabled) {
    api.use(createAuth(config, log));
    api.use(createBodyParser(config));
    api.use(createAdmissionGate(services.admission));
    registerVconRoutes(api, services);
    registerTagRoutes(api, services);
    registerSearchRoutes(api, services);
    registerDatabaseRoutes(api, services);
  }
  app.use(base || '/', api);

  app.use(((req, res) => {
    const err = new NotFoundError('route', `${req.method} ${req.path}`);
    sendError(req, res, 404, err.code, `No route for ${req.method} ${req.path}`, {
      hint: `REST routes live under ${base || '/'}`,
      production: config.production,
    });
  }) as RequestHandler);
  app.use(createErrorHandler({ production: config.production, log }));
  return app;
}
