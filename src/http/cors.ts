import type { RequestHandler } from 'express';
import type { Config } from '../config.js';

const METHODS = 'GET, POST, PUT, PATCH, DELETE, OPTIONS';
const EXPOSED = 'X-Request-Id, X-Version, X-Git-Commit, X-Build-Time, WWW-Authenticate';

/** CORS per SPEC.md; preflights are answered here, before authentication. */
export function createCors(config: Config): RequestHandler {
  const headers = ['Content-Type', 'Authorization'];
  if (config.auth.header !== 'authorization') headers.push(config.auth.header);
  const allowHeaders = headers.join(', ');
  const origins = config.cors.origins;
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origins === '*') {
      res.setHeader('Access-Control-Allow-Origin', '*');
    } else {
      res.vary('Origin');
      if (origin && origins.includes(origin)) res.setHeader('Access-Control-Allow-Origin', origin);
    }
    res.setHeader('Access-Control-Expose-Headers', EXPOSED);
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', METHODS);
      res.setHeader('Access-Control-Allow-Headers', allowHeaders);
      res.setHeader('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  };
}
