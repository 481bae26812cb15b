// MCP over Streamable HTTP at /mcp, beside REST on the same express app. One transport and one
// McpServer per session, so sessions are independent and many can run at once. A session is
// opened with an API key, keeps that key's scope, and answers only to that key.
// MCP_HTTP_STATELESS=true drops sessions: each POST gets its own server, built for the scope of the
// key it carries, and ends with its answer, so a balancer may send any request to any replica.
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Config } from '../config.js';
import { createAuth, type AuthInfo } from '../transport/auth.js';
import { createCors, MCP_CORS } from '../transport/cors.js';
import { sendError } from '../transport/errors.js';
import { createBodyGate } from '../transport/in-flight.js';
import { isInstance, ValidationError } from '../domain/errors.js';
import { checkParsedBody, jsonBodyVerify } from '../transport/json-body.js';
import type { Scope } from '../services/context.js';
import { buildMcpServer, type McpServerDeps } from './server.js';
import { subscriptionHubOf } from './subscriptions.js';

export const MCP_PATH = '/mcp';

interface Session {
  id: string;
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  scope: Scope;
  keyId: string | null;
  lastSeen: number;
  /** POSTs (tool calls, reads) of this session still being answered. */
  inFlight: number;
}

export interface McpHttpOptions extends McpServerDeps {
  config: Config;
  /** Sessions idle longer than this are closed (clients that vanished never send DELETE). */
  idleTimeoutMs?: number;
  /** Upper bound on open sessions of the instance (default config.mcp.maxSessions). */
  maxSessions?: number;
  /** Upper bound on open sessions of one read-write key (default config.mcp.sessionsPerKey). */
  sessionsPerKey?: number;
  /** Upper bound on open sessions of one read-only key (default config.mcp.sessionsPerReadOnlyKey). */
  sessionsPerReadOnlyKey?: number;
}

export interface McpHttp {
  /** Adds POST/GET/DELETE /mcp to the app (pass as buildApp's `mount`). */
  mount(app: Express): void;
  /** Open sessions, by scope, and the resources they are subscribed to (for /metrics and tests). */
  stats(): { sessions: number; read: number; write: number; subscriptions: number };
  /**
   * Closes every session `keep` refuses (a reload removed its key, or changed the key's scope);
   * resolves with how many were closed. Their next request gets 404 and a new session needs a valid key.
   */
  revoke(keep: (session: { keyId: string | null; scope: Scope }) => boolean): Promise<number>;
  /** Closes every session (instance stop); later requests get 503. */
  close(): Promise<void>;
}

const DEFAULT_IDLE_MS = 30 * 60_000;

/** A JSON-RPC error response for protocol-level problems (no valid session and the like). */
function rpcError(res: Response, status: number, code: number, message: string): void {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/** The SDK's AuthInfo for a resolved key: the key's digest id, never the key itself. */
const authOf = (info: AuthInfo) => ({ token: info.keyId ?? 'anonymous', clientId: info.keyId ?? 'anonymous', scopes: [info.scope] });

const sessionIdOf = (req: Request): string | undefined => {
  const v = req.headers['mcp-session-id'];
  return Array.isArray(v) ? v[0] : v;
};

/** The Streamable HTTP endpoint and its session table. */
export function createMcpHttp(opts: McpHttpOptions): McpHttp {
  const { config, log } = opts;
  const production = config.production;
  const idleMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_MS;
  const maxSessions = opts.maxSessions ?? config.mcp.maxSessions;
  const perKey = { write: opts.sessionsPerKey ?? config.mcp.sessionsPerKey, read: opts.sessionsPerReadOnlyKey ?? config.mcp.sessionsPerReadOnlyKey };
  const sessions = new Map<string, Session>();
  /** Initialize requests being answered, per key: they hold a slot before their session exists. */
  const opening = new Map<string | null, number>();
  let closing = false;

  const closeSession = async (s: Session, why: string) => {
    if (!sessions.delete(s.id)) return;
    log.info({ session: s.id, scope: s.scope, why }, 'mcp session closed');
    await s.server.close().catch(() => undefined);
  };

  const sweep = setInterval(
    () => {
      const cutoff = Date.now() - idleMs;
      for (const s of sessions.values()) if (s.inFlight === 0 && s.lastSeen < cutoff) void closeSession(s, 'idle');
    },
    Math.min(idleMs, 60_000),
  );
  sweep.unref();

  // The REST keys and the REST error format; read-only keys may POST here (scope limits tools
  // instead). An invalid key is a 403: MCP clients answer a 401 with OAuth; a missing key stays 401 (auth.ts).
  const auth = createAuth(config, log, { enforceMethods: false, invalidKey: 403 });
  const parseJson = express.json({ limit: config.rest.bodyLimit, verify: jsonBodyVerify(config.limits.maxElements) });
  const bodyGate = createBodyGate(config.rest.bodyLimit, opts.services.bodies);
  /**
   * The body, with JSON-RPC answers for what only a JSON-RPC client would get wrong, as the SDK's
   * transport gives them: 415 for another content type or charset, 400 -32700 for a body that
   * can't be read as JSON (a broken gzip stream included). An over-limit body stays the REST 413.
   */
  const json: RequestHandler = (req, res, next) => {
    // false: a body of another type; null: no body at all, which the transport answers itself.
    if (req.is('application/json') === false) {
      rpcError(res, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
      return;
    }
    parseJson(req, res, (parseErr?: unknown) => {
      const err = parseErr ?? checkParsedBody(req);
      const e = err as { status?: number; message?: string } | undefined;
      if (e?.status === 415) rpcError(res, 415, -32000, `Unsupported Media Type: ${e.message ?? 'the body must be UTF-8 JSON'}`);
      else if (isInstance(err, ValidationError)) rpcError(res, 400, -32700, `Parse error: ${err.message}`);
      else if (e?.status === 400) rpcError(res, 400, -32700, `Parse error: the body is not valid JSON (${e.message ?? 'unreadable'})`);
      else next(err);
    });
  };

  const cors = createCors(config, MCP_CORS);

  const available: RequestHandler = (req, res, next) => {
    if (closing) {
      sendError(req, res, 503, 'service_unavailable', 'The server is shutting down', { production });
      return;
    }
    next();
  };

  /** Hands the request to the SDK with the caller's identity as `req.auth` (extra.authInfo in handlers). */
  const handle = async (s: Session, req: Request, res: Response) => {
    s.lastSeen = Date.now();
    // A call that is still running keeps its session alive; idleness counts from its end. (The
    // long-lived GET stream does not count: a client that only listens is idle.)
    if (req.method === 'POST') {
      s.inFlight++;
      res.once('close', () => {
        s.inFlight--;
        s.lastSeen = Date.now();
      });
    }
    req.auth = authOf(res.locals.auth as AuthInfo);
    await s.transport.handleRequest(req, res, req.body);
  };

  /** The session named by the request, or an answer: 400 none given, 404 unknown, 403 another key's. */
  const existing = (req: Request, res: Response): Session | undefined => {
    const id = sessionIdOf(req);
    if (!id) {
      rpcError(res, 400, -32000, 'Bad Request: send an initialize request without Mcp-Session-Id, then use the id it returns');
      return undefined;
    }
    const s = sessions.get(id);
    if (!s) {
      // 404 tells the client to start a new session (MCP Streamable HTTP, "Session Management").
      rpcError(res, 404, -32001, 'Session not found: it expired or was closed; initialize a new one');
      return undefined;
    }
    const info = res.locals.auth as AuthInfo;
    if (info.keyId !== s.keyId) {
      log.warn({ session: id, keyId: info.keyId }, 'mcp session used with another key');
      sendError(req, res, 403, 'forbidden', 'This MCP session belongs to another API key', {
        hint: 'A session answers only to the key that opened it; initialize your own session',
        production,
      });
      return undefined;
    }
    return s;
  };

  const post: RequestHandler = async (req, res) => {
    if (sessionIdOf(req)) {
      const s = existing(req, res);
      if (s) await handle(s, req, res);
      return;
    }
    if (!isInitializeRequest(req.body)) {
      rpcError(res, 400, -32000, 'Bad Request: no Mcp-Session-Id; the first request of a session must be initialize');
      return;
    }
    const info = res.locals.auth as AuthInfo;
    if (!admit(info)) {
      const cap = perKey[info.scope];
      if (countOf(info.keyId) >= cap) {
        res.setHeader('Retry-After', '5');
        sendError(req, res, 429, 'too_many_sessions', `This key has ${cap} MCP sessions open, every one busy with a call; close one or retry later`, {
          hint: 'Close sessions you no longer use (HTTP DELETE /mcp with their Mcp-Session-Id); idle ones are reused automatically',
          production,
        });
      } else {
        sendError(req, res, 503, 'service_unavailable', `Too many open MCP sessions (${maxSessions}), every one busy with a call; retry later`, {
          production,
        });
      }
      return;
    }
    opening.set(info.keyId, (opening.get(info.keyId) ?? 0) + 1);
    let reserved = true;
    // The reservation ends when the session is registered or the initialize ends without one.
    const release = () => {
      if (!reserved) return;
      reserved = false;
      const n = (opening.get(info.keyId) ?? 1) - 1;
      if (n > 0) opening.set(info.keyId, n);
      else opening.delete(info.keyId);
    };
    try {
      await open(req, res, info, release);
    } finally {
      release();
    }
  };

  /** Sessions of a key, open or being opened. */
  const countOf = (keyId: string | null): number => {
    let n = opening.get(keyId) ?? 0;
    for (const s of sessions.values()) if (s.keyId === keyId) n++;
    return n;
  };

  /** The least recently used session without a call in progress among those `which` selects. */
  const idlest = (which: (s: Session) => boolean): Session | undefined => {
    let best: Session | undefined;
    for (const s of sessions.values()) if (s.inFlight === 0 && which(s) && (!best || s.lastSeen < best.lastSeen)) best = s;
    return best;
  };

  /**
   * Makes room for one more session of this key, or says there is none. A key at its cap gives up
   * its own idlest session; a full server takes the idlest session of the key holding the most.
   * Sessions busy with a call are never closed, so only busy keys are ever refused.
   */
  const admit = (info: AuthInfo): boolean => {
    if (countOf(info.keyId) >= perKey[info.scope]) {
      const victim = idlest((s) => s.keyId === info.keyId);
      if (!victim) return false;
      void closeSession(victim, 'evicted: the key opened a session beyond its cap');
    }
    let pending = 0;
    for (const n of opening.values()) pending += n;
    if (sessions.size + pending >= maxSessions) {
      const held = new Map<string | null, number>();
      for (const s of sessions.values()) held.set(s.keyId, (held.get(s.keyId) ?? 0) + 1);
      // The idle session whose key holds the most sessions; among those keys, the least recently used.
      let victim: Session | undefined;
      for (const s of sessions.values()) {
        if (s.inFlight > 0) continue;
        const more = victim ? held.get(s.keyId)! - held.get(victim.keyId)! : 1;
        if (more > 0 || (more === 0 && s.lastSeen < victim!.lastSeen)) victim = s;
      }
      if (!victim) return false;
      void closeSession(victim, 'evicted: the server is at its session cap');
    }
    return true;
  };

  /** Opens a session: the SDK answers the initialize and names the session. */
  const open = async (req: Request, res: Response, info: AuthInfo, registered: () => void) => {
    const who = { scope: info.scope, keyId: info.keyId, session: 'initializing' };
    let session: Session | undefined;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        who.session = id;
        session = { id, transport, server, scope: info.scope, keyId: info.keyId, lastSeen: Date.now(), inFlight: 0 };
        sessions.set(id, session);
        registered();
        log.info({ session: id, scope: info.scope, keyId: info.keyId }, 'mcp session opened');
      },
    });
    transport.onclose = () => {
      if (session) void closeSession(session, 'closed');
    };
    const server = buildMcpServer(opts, who);
    await server.connect(transport);
    req.auth = authOf(info);
    await transport.handleRequest(req, res, req.body);
    // An initialize the SDK refused (bad protocol version, malformed) leaves no session behind.
    if (!session) await server.close().catch(() => undefined);
  };

  /** Stateless mode: one throwaway server per POST, scoped by the key that request carries. */
  const statelessPost: RequestHandler = async (req, res) => {
    const info = res.locals.auth as AuthInfo;
    const server = buildMcpServer(opts, { scope: info.scope, keyId: info.keyId, session: `stateless-${randomUUID()}` });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once('close', () => void server.close().catch(() => undefined));
    await server.connect(transport);
    req.auth = authOf(info);
    await transport.handleRequest(req, res, req.body);
  };

  /** Stateless mode has no session to stream to or delete. */
  const noSessions: RequestHandler = (req, res) => {
    res.setHeader('Allow', 'POST, OPTIONS');
    sendError(
      req,
      res,
      405,
      'method_not_allowed',
      `${req.method} ${MCP_PATH} needs a session; this server runs MCP without sessions (MCP_HTTP_STATELESS)`,
      {
        hint: 'Send every request as a POST; there is no session to open, stream or close',
        production,
      },
    );
  };

  const getOrDelete: RequestHandler = async (req, res) => {
    const s = existing(req, res);
    if (s) await handle(s, req, res);
  };

  const methodNotAllowed: RequestHandler = (req, res) => {
    res.setHeader('Allow', 'GET, POST, DELETE, OPTIONS');
    sendError(req, res, 405, 'method_not_allowed', `${req.method} is not allowed on ${MCP_PATH}`, { production });
  };

  return {
    mount(app) {
      const route = app.route(MCP_PATH).all(cors, available);
      if (config.mcp.stateless) route.post(auth, bodyGate, json, statelessPost).get(auth, noSessions).delete(auth, noSessions);
      else route.post(auth, bodyGate, json, post).get(auth, getOrDelete).delete(auth, getOrDelete);
      route.all(methodNotAllowed);
    },
    stats() {
      let read = 0;
      for (const s of sessions.values()) if (s.scope === 'read') read++;
      return { sessions: sessions.size, read, write: sessions.size - read, subscriptions: subscriptionHubOf(opts.services).size() };
    },
    async revoke(keep) {
      const gone = [...sessions.values()].filter((s) => !keep(s));
      await Promise.all(gone.map((s) => closeSession(s, 'its key was removed or changed')));
      return gone.length;
    },
    async close() {
      closing = true;
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => closeSession(s, 'shutdown')));
    },
  };
}
