import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Scope } from '../services/context.js';
import { sendError } from './errors.js';

export interface AuthInfo {
  scope: Scope;
  /** A short digest of the key, to bind MCP sessions and correlate logs without logging the key. */
  keyId: string | null;
}

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const digest = (s: string) => createHash('sha256').update(s).digest();

/** Extracts the presented key from the configured header; Bearer scheme is case-insensitive. */
export function readKey(req: Pick<Request, 'headers'>, header: string): string | undefined {
  const raw = req.headers[header];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value) return undefined;
  if (header === 'authorization') {
    const m = /^\s*bearer\s+(\S+)\s*$/i.exec(value);
    return m?.[1];
  }
  return value.trim() || undefined;
}

/** The id of a key in logs and MCP sessions: a short digest, never the key. */
export const keyIdOf = (key: string) => digest(key).toString('hex').slice(0, 16);

/**
 * Resolves keys to scopes with constant-time comparison of digests (every key is compared). It
 * follows a reload: lists replaced in `config.auth` are read on the next call.
 */
export function createKeyResolver(config: Config) {
  let lists: { rw: string[]; ro: string[] } | undefined;
  let ro: Buffer[] = [];
  let rw: Buffer[] = [];
  const anyMatch = (d: Buffer, list: Buffer[]) => list.reduce((hit, k) => timingSafeEqual(d, k) || hit, false);
  // Keys already verified, so a hot client doesn't pay a digest per request. Only configured keys
  // get in (the map can't grow past them); unknown keys always take the constant-time path.
  const verified = new Map<string, AuthInfo>();
  return (key: string): AuthInfo | undefined => {
    if (lists?.rw !== config.auth.keys || lists.ro !== config.auth.readOnlyKeys) {
      lists = { rw: config.auth.keys, ro: config.auth.readOnlyKeys };
      ro = lists.ro.map(digest);
      rw = lists.rw.map(digest);
      verified.clear();
    }
    const known = verified.get(key);
    if (known) return known;
    const d = digest(key);
    const keyId = d.toString('hex').slice(0, 16);
    // A key in both lists is read-only: the narrower scope wins.
    const scope: Scope | undefined = anyMatch(d, ro) ? 'read' : anyMatch(d, rw) ? 'write' : undefined;
    if (!scope) return undefined;
    const info: AuthInfo = Object.freeze({ scope, keyId });
    verified.set(key, info);
    return info;
  };
}

// Shared by REST and the MCP endpoint: the same keys, scopes and refusals on both transports.

/**
 * Authentication for REST (and /mcp): 401 missing/invalid, 403 read-only key on a write method,
 * 503 when auth is required and no key is configured. Sets res.locals.auth.
 *
 * `invalidKey: 403` (the MCP endpoint): a key that was sent but is none of the group's is a 403
 * without `WWW-Authenticate`. MCP clients (the SDK's with an auth provider, the official Inspector)
 * take a 401 as the start of OAuth discovery, which this server does not offer, and would report
 * an OAuth failure instead of the key problem; a 403 lets them show the body ("API key invalid").
 * A missing key stays 401 with `WWW-Authenticate: Bearer` on every endpoint: that is the signal
 * that credentials are needed at all.
 */
export function createAuth(config: Config, _log: Logger, opts: { enforceMethods?: boolean; invalidKey?: 401 | 403 } = {}): RequestHandler {
  const resolve = createKeyResolver(config);
  const production = config.production;
  const header = config.auth.header;
  const how = header === 'authorization' ? 'Authorization: Bearer <key>' : `${header}: <key>`;
  const enforceMethods = opts.enforceMethods ?? true;
  const invalidStatus = opts.invalidKey ?? 401;
  return (req, res, next) => {
    if (!config.auth.required) {
      res.locals.auth = { scope: 'write', keyId: null } satisfies AuthInfo;
      next();
      return;
    }
    if (config.auth.keys.length === 0 && config.auth.readOnlyKeys.length === 0) {
      sendError(req, res, 503, 'auth_not_configured', 'Authentication is required but no API key is configured', {
        hint: 'Set API_KEYS (and API_KEYS_READONLY), or API_AUTH_REQUIRED=false for a closed network',
        production,
      });
      return;
    }
    const key = readKey(req, header);
    if (!key) {
      sendError(req, res, 401, 'unauthorized', 'API key missing', { hint: `Send ${how}`, production });
      return;
    }
    const auth = resolve(key);
    if (!auth) {
      sendError(req, res, invalidStatus, 'unauthorized', 'API key invalid', {
        hint: `Send a key listed in API_KEYS or API_KEYS_READONLY as ${how}`,
        production,
      });
      return;
    }
    if (enforceMethods && auth.scope === 'read' && !READ_METHODS.has(req.method)) {
      sendError(req, res, 403, 'forbidden', `A read-only key may not ${req.method}`, {
        hint: 'Use a key from API_KEYS for writes',
        production,
      });
      return;
    }
    res.locals.auth = auth;
    next();
  };
}
