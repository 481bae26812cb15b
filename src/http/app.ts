import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import express, { type Express, type RequestHandler, type Router } from 'express';
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
import { createBodyGate } from '../transport/in-flight.js';
import { registerRoutes } from './routes.js';
import { buildOpenApiDocument } from './openapi.js';
import type { OpEnv } from '../transport/operations.js';
import { registerMetricsRoute } from './metrics.js';
import type { Metrics } from '../services/metrics.js';

export interface AppDeps {
  config: Config;
  log: Logger;
  services: Services;
  buildInfo: BuildInfo;
  /** Extra routes mounted at the server root, before REST and the 404 handler (the MCP endpoint). */
  mount?: (app: Express) => void;
  /** Request figures and GET /metrics at the server root; none without. */
  metrics?: Metrics;
}

/** The route template of an answered request, for the metrics (never the raw path: unbounded labels). */
function routeOf(req: IncomingMessage): string {
  const r = (req as { route?: { path?: unknown } }).route;
  return typeof r?.path === 'string' ? r.path : 'unmatched';
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id: the client's X-Request-Id when it is a sane token, else a new one. */
function requestId(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** An event stream (the MCP session stream, GET /changes/stream): open until the client leaves. */
const isEventStream = (method: string, res: ServerResponse) =>
  method === 'GET' && res.headersSent && String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');

/**
 * The access log line of one request: 5xx error, 4xx warn, else info. A request aborted before its
 * answer was complete warns; an event stream the client closed is how such a stream ends, so info.
 */
function logRequest(log: Logger, res: ServerResponse, method: string, url: string, id: string, start: number): void {
  const status = res.statusCode;
  const aborted = !res.writableFinished;
  const streamClosed = aborted && isEventStream(method, res);
  const level = status >= 500 ? 'error' : status >= 400 || (aborted && !streamClosed) ? 'warn' : 'info';
  if (!log.isLevelEnabled(level)) return;
  // Paths only: query strings can carry emails and phone numbers (party filters).
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  log[level](
    { req: { id, method, path }, res: { statusCode: status }, responseTime: Math.round(performance.now() - start) },
    streamClosed ? 'stream closed by the client' : aborted ? 'request aborted' : 'request completed',
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
  const metrics = deps.metrics;
  const { version, gitCommit, buildTime } = buildInfo;
  // The access line holds the request's id, method and path, its status and time: nothing the
  // root logger's redaction paths name. pino runs the redaction on every line (a copy of the
  // logged object each time), so the access line goes through a child with the same bindings,
  // level and destination and no redaction: the same bytes, without that work per request.
  const access = log.child({}, { redact: [] });
  // One middleware for the request id, the build headers and the access log line. The line is
  // written when the response ends: no child logger per request (pino-http built one for every
  // request, whether or not anything logged through it). The request figures (GET /metrics) are
  // taken in the same listener, by route template, when the response closes.
  app.use((req, res, next) => {
    const id = requestId(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', id);
    res.setHeader('X-Version', version);
    res.setHeader('X-Git-Commit', gitCommit);
    res.setHeader('X-Build-Time', buildTime);
    const logged = req.url !== health;
    if (logged || metrics) {
      const start = performance.now();
      res.once('close', () => {
        if (logged) logRequest(access, res, req.method, req.originalUrl, id, start);
        if (metrics) {
          const code = (res.locals as { errorCode?: string }).errorCode;
          metrics.observe(req.method, routeOf(req), res.statusCode, (performance.now() - start) / 1000, code);
        }
      });
    }
    next();
  });
  // Mounted before REST so that a root base path ('') can't put /mcp behind REST's method rules.
  deps.mount?.(app);
  // GET /metrics is the scraper's, not the REST API's: at the server root whatever the base path
  // (where Prometheus looks), with its own key rule (METRICS_KEY too), so it is outside the
  // operation table and the OpenAPI document.
  if (metrics) registerMetricsRoute(app, { config, metrics });

  const base = config.rest.basePath;
  const api: Router = express.Router({ strict: false });
  let openapi: string | undefined;
  const env: OpEnv = {
    services,
    buildInfo,
    basePath: config.rest.basePath,
    openapi: () => (openapi ??= JSON.stringify(buildOpenApiDocument(config, { version: buildInfo.version }))),
  };
  const restEnabled = config.rest.enabled;
  api.use(createCors(config, REST_CORS));
  registerRoutes(api, 'open', env, { restEnabled });
  if (restEnabled) {
    api.use(createAuth(config, log));
    api.use(createBodyGate(config.rest.bodyLimit, services.bodies));
    api.use(createBodyParser(config));
    registerRoutes(api, 'ungated', env, { restEnabled });
    registerRoutes(api, 'gated', env, { restEnabled });
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

/**
 * The HTTP server of an app, whose requests and responses node builds straight on express's own
 * prototypes (`app.request`, `app.response`): express sets each request's and response's prototype
 * to those on arrival, and V8 does nothing when an object already has the prototype it is given.
 * Swapping the prototype of every request and response (what express does to node's plain ones)
 * changed their maps and dropped the inline caches of every function that touched them: measured
 * on `GET /vcons/:uuid`, 2.05–2.24 M instructions a request before, 1.26–1.32 M after (callgrind),
 * and 511–665 → 229–299 µs of CPU in pairs under the same load (docs/architecture.md).
 */
export function createAppServer(app: Express, base: NodeHttpTypes = { IncomingMessage, ServerResponse }): Server {
  // node's own constructors (plain functions in node 22 to 26) on objects whose prototype is
  // express's. Not a subclass: that would put one more prototype in between, which express would
  // swap out again; not Reflect.construct with express's prototype as new.target either: measured
  // at twice the instructions of the plain call. Should a later node make them classes (which can't
  // be called on an object), the server is node's plain one: slower, never broken.
  if (isClass(base.IncomingMessage) || isClass(base.ServerResponse)) return createServer(app);
  const NodeRequest = base.IncomingMessage as unknown as (this: IncomingMessage, socket: Socket) => void;
  const NodeResponse = base.ServerResponse as unknown as (this: ServerResponse, req: IncomingMessage, options?: unknown) => void;
  function Request(this: IncomingMessage, socket: Socket) {
    NodeRequest.call(this, socket);
  }
  Request.prototype = app.request;
  function Response(this: ServerResponse, req: IncomingMessage, options?: unknown) {
    NodeResponse.call(this, req, options);
  }
  Response.prototype = app.response;
  return createServer(
    { IncomingMessage: Request as unknown as typeof IncomingMessage, ServerResponse: Response as unknown as typeof ServerResponse },
    app,
  );
}

/** The request and response constructors a server is built from (node's; a test may pass others). */
export interface NodeHttpTypes {
  IncomingMessage: typeof IncomingMessage;
  ServerResponse: typeof ServerResponse;
}

const isClass = (f: unknown) => typeof f === 'function' && /^class\b/.test(Function.prototype.toString.call(f));
