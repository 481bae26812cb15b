// The hot read, `GET <base>/vcons/<uuid>`, answered before express (for read throughput): express's
// handle (the prototype swap of req and res, the router's layers) cost more CPU than the rest of
// the answer, ~270 µs per request against ~110 µs without it (bench, 32 concurrent). Only the
// plain case is taken here; anything else (another method or path, a query string, an Origin
// header, a missing or unknown key, read hooks) goes to express untouched, so every refusal and
// every CORS answer keeps its one implementation. What the plain case does is what express's
// path does for it: the request id and build headers, Vary, the key check, a pool turn, the
// access log line, and errors (unknown vCon, database busy or down) through the same handler.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { Services } from '../services/index.js';
import type { BuildInfo } from '../version.js';
import { UUID_RE } from '../domain/vcon.js';
import { createKeyResolver, readKey } from '../transport/auth.js';

/** `/vcons/` plus the 36 characters of a uuid. */
const UUID_LENGTH = 36;

export interface FastGetDeps {
  config: Config;
  services: Services;
  buildInfo: BuildInfo;
  /** The request id of an incoming X-Request-Id, or a new one (shared with express's path). */
  requestId: (incoming: string | string[] | undefined) => string;
  /** The access log line (shared with express's path). */
  logRequest: (res: ServerResponse, method: string, path: string, id: string, start: number) => void;
}

/** Takes a request (true) or leaves it untouched (false); an error of one it took goes to `fail`. */
export type FastGet = (req: IncomingMessage, res: ServerResponse, fail: (err: unknown) => void) => boolean;

/**
 * What every fast path shares with express's: the key check, and the headers express's path sets
 * before a route runs (request id, build headers, Vary when CORS has an origin list).
 */
export function createFastBasics(config: Config, buildInfo: BuildInfo) {
  const header = config.auth.header;
  const resolve = createKeyResolver(config);
  const vary = config.cors.origins !== '*';
  const build = ['X-Version', buildInfo.version, 'X-Git-Commit', buildInfo.gitCommit, 'X-Build-Time', buildInfo.buildTime];
  return {
    /** The key's scope and id, or undefined for no key or an unknown one. */
    resolveKey: (req: IncomingMessage) => {
      const key = readKey(req, header);
      return key === undefined ? undefined : resolve(key);
    },
    /** The headers of an answer, in express's order, then `more`. */
    headersOf: (id: string, more: string[]) => {
      const headers = ['X-Request-Id', id, ...build];
      if (vary) headers.push('Vary', 'Origin');
      headers.push(...more);
      return headers;
    },
    /** The same headers set one by one (before an error goes to express's handler). */
    setCommonHeaders: (res: ServerResponse, id: string) => {
      res.setHeader('X-Request-Id', id);
      for (let i = 0; i < build.length; i += 2) res.setHeader(build[i], build[i + 1]);
      if (vary) res.setHeader('Vary', 'Origin');
    },
  };
}

/** Whether a request carries a body (its length, or chunked). */
export const hasBody = (req: IncomingMessage) => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/**
 * The fast path of this instance, or undefined when it has nothing it can take (REST off, a plugin
 * with read hooks, auth required with no key configured).
 */
export function createFastGet(deps: FastGetDeps): FastGet | undefined {
  const { config, services, buildInfo } = deps;
  const hasReadHooks = services.plugins.some((p) => p.hooks?.beforeRead || p.hooks?.afterRead);
  const noKeys = config.auth.keys.length === 0 && config.auth.readOnlyKeys.length === 0;
  if (!config.rest.enabled || hasReadHooks || (config.auth.required && noKeys)) return undefined;

  const prefix = `${config.rest.basePath}/vcons/`;
  const length = prefix.length + UUID_LENGTH;
  const authRequired = config.auth.required;
  const { resolveKey, headersOf, setCommonHeaders } = createFastBasics(config, buildInfo);
  const { vcons, admission } = services;

  const answer = async (res: ServerResponse, uuid: string, id: string) => {
    const release = await admission.acquire();
    let text: string | undefined;
    try {
      // As the gate: a client gone while its request waited for a turn gets nothing.
      if (res.closed || res.socket?.destroyed !== false) return;
      text = await vcons.getText(uuid);
    } finally {
      // The pool's work is done: the turn goes back before the answer is written.
      release();
    }
    // getText gives no text only when a plugin has read hooks, and those turn this path off; should
    // that ever change, the request gets an error answer, never silence.
    if (text === undefined) throw new Error('the fast path read no text (a plugin with read hooks?)');
    if (res.closed) return;
    const body = `{"success":true,"vcon":${text}}`;
    res.writeHead(200, headersOf(id, ['Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(body))]));
    res.end(body);
  };

  return (req, res, fail) => {
    const url = req.url;
    const h = req.headers;
    const take =
      req.method === 'GET' &&
      url !== undefined &&
      url.length === length &&
      url.startsWith(prefix) &&
      UUID_RE.test(url.slice(prefix.length)) &&
      h.origin === undefined &&
      // A body is the body parser's to judge (415, 400, 413 on express's path), even on a GET.
      !hasBody(req) &&
      (!authRequired || resolveKey(req) !== undefined);
    if (!take) return false;
    const id = deps.requestId(h['x-request-id']);
    const start = performance.now();
    res.once('close', () => deps.logRequest(res, 'GET', url, id, start));
    answer(res, url.slice(prefix.length).toLowerCase(), id).catch((err: unknown) => {
      // The headers the error answer carries on express's path, then its error handler.
      setCommonHeaders(res, id);
      fail(err);
    });
    return true;
  };
}
