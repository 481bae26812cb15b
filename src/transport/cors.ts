// CORS for both transports (CORS_ORIGIN): the configured origins, preflights answered here,
// before authentication. Each transport names its methods and the headers it adds.
import type { RequestHandler } from 'express';
import type { Config } from '../config.js';

export interface CorsPolicy {
  methods: readonly string[];
  /** Request headers besides Content-Type, Authorization and the configured key header. */
  allowHeaders?: readonly string[];
  /** Response headers besides the REST ones every answer carries. */
  exposeHeaders?: readonly string[];
}

const EXPOSED = ['X-Request-Id', 'X-Version', 'X-Git-Commit', 'X-Build-Time', 'WWW-Authenticate', 'X-Index-Pending'];

export const REST_CORS: CorsPolicy = { methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] };
export const MCP_CORS: CorsPolicy = {
  methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
  allowHeaders: ['Mcp-Session-Id', 'Mcp-Protocol-Version', 'Last-Event-Id'],
  exposeHeaders: ['Mcp-Session-Id'],
};

/** The CORS middleware of one transport. */
export function createCors(config: Config, policy: CorsPolicy): RequestHandler {
  const headers = ['Content-Type', 'Authorization', ...(policy.allowHeaders ?? [])];
  if (config.auth.header !== 'authorization') headers.push(config.auth.header);
  const allowHeaders = headers.join(', ');
  const methods = policy.methods.join(', ');
  const exposed = [...(policy.exposeHeaders ?? []), ...EXPOSED].join(', ');
  const origins = config.cors.origins;
  return (req, res, next) => {
    const origin = req.headers.origin;
    // Without an Origin header the request isn't cross-origin (curl, servers, same-origin): no CORS
    // headers to add, except Vary for caches when the answer depends on the origin.
    if (origin === undefined && req.method !== 'OPTIONS') {
      if (origins !== '*') res.setHeader('Vary', 'Origin');
      next();
      return;
    }
    if (origins === '*') {
      res.setHeader('Access-Control-Allow-Origin', '*');
    } else {
      res.vary('Origin');
      if (origin && origins.includes(origin)) res.setHeader('Access-Control-Allow-Origin', origin);
    }
    res.setHeader('Access-Control-Expose-Headers', exposed);
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', methods);
      res.setHeader('Access-Control-Allow-Headers', allowHeaders);
      res.setHeader('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  };
}
