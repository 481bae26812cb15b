// resources/subscribe for vCon resources (protocol revision 2025-11-25, the one the SDK serves):
// a session subscribed to vcon://v1/vcons/{uuid} (or one of its parts) is sent
// notifications/resources/updated when the change log shows a change of that vCon. A notification
// is a hint to read the resource again; the change log (list_changes, GET /changes) is the record.
import { ErrorCode, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { parseUuid } from '../domain/params.js';
import type { RequestCtx } from '../services/context.js';
import type { Services } from '../services/index.js';
import { RESOURCE_PREFIX } from './resources.js';
import { ProtocolError, toProtocolError, type ResultOptions } from './result.js';

/** A vCon resource: its uuid (whatever its form; checked after) and the part, if any. */
const VCON_URI = new RegExp(`^${RESOURCE_PREFIX.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}vcons/([^/]*)(/(dialog|analysis|attachments|tags))?$`);

/** The subscriptions of one process: one follower of the change log, however many sessions watch. */
export interface SubscriptionHub {
  /** Calls `notify` on every change of the vCon from now on (a write acknowledged after this resolves is seen); returns the unsubscribe. */
  subscribe(uuid: string, notify: () => void): Promise<() => void>;
  /** Subscribed (session, uri) pairs now. */
  size(): number;
}

function createHub(services: Services): SubscriptionHub {
  const watchers = new Map<string, Set<() => void>>();
  let count = 0;
  let following: { abort: AbortController; started: Promise<void> } | undefined;

  function follow(): Promise<void> {
    if (following) return following.started;
    const abort = new AbortController();
    let started!: () => void;
    let failed!: (err: unknown) => void;
    const ready = new Promise<void>((resolve, reject) => ((started = resolve), (failed = reject)));
    following = { abort, started: ready };
    void (async () => {
      try {
        // From the end of the log as of now (after=now): every write acknowledged before the subscribe answer is below it.
        const start = await services.changes.openStream({ after: 'now' }, undefined);
        started();
        await services.changes.follow(
          start,
          async (entries) => {
            for (const e of entries) for (const notify of watchers.get(e.uuid) ?? []) notify();
          },
          abort.signal,
        );
      } catch (err) {
        failed(err);
      } finally {
        if (following?.abort === abort) following = undefined;
      }
    })();
    return ready;
  }

  return {
    async subscribe(uuid, notify) {
      let set = watchers.get(uuid);
      if (!set) watchers.set(uuid, (set = new Set()));
      set.add(notify);
      count++;
      const unsubscribe = () => {
        if (!set.delete(notify)) return;
        count--;
        if (set.size === 0) watchers.delete(uuid);
        if (watchers.size === 0) following?.abort.abort();
      };
      try {
        await follow();
      } catch (err) {
        unsubscribe();
        throw err;
      }
      return unsubscribe;
    },
    size: () => count,
  };
}

const hubs = new WeakMap<Services, SubscriptionHub>();
/** The hub of an instance's services (every session of the process shares it). */
export function subscriptionHubOf(services: Services): SubscriptionHub {
  let hub = hubs.get(services);
  if (!hub) hubs.set(services, (hub = createHub(services)));
  return hub;
}

export interface SubscriptionDeps {
  services: Services;
  opts: ResultOptions;
  ctxOf(requestId: string | number): RequestCtx;
  /** MCP_MAX_SUBSCRIPTIONS: uris one session may watch at once. */
  max: number;
}

const SUBSCRIBABLE = `only ${RESOURCE_PREFIX}vcons/{uuid} and its /dialog, /analysis, /attachments, /tags can be subscribed`;

/** Serves resources/subscribe and resources/unsubscribe on one server; its subscriptions end when it closes. */
export function registerSubscriptions(server: McpServer, deps: SubscriptionDeps): void {
  const { services, opts, ctxOf, max } = deps;
  const hub = subscriptionHubOf(services);
  // The session's subscriptions by uri, each held from the request on: a second subscribe of a uri
  // whose first is still being answered shares it, and it counts against the cap at once.
  const mine = new Map<string, Promise<() => void>>();
  const release = (p: Promise<() => void> | undefined) =>
    void p?.then(
      (unsubscribe) => unsubscribe(),
      () => undefined,
    );
  // Outside the request handler: the notifier a subscription keeps must not hold the request's
  // `extra` (its headers, signal and senders); it added ~2 KB of heap per subscription when it did.
  const watch = async (uri: string, uuid: string, ctx: RequestCtx): Promise<() => void> => {
    // Only an existing vCon the caller may read can be watched (plugin read hooks apply, as to a resource read).
    try {
      await services.admission.run(() => services.vcons.get(uuid, 'metadata', ctx));
    } catch (err) {
      throw toProtocolError(err, opts);
    }
    return hub.subscribe(uuid, () => {
      server.server.sendResourceUpdated({ uri }).catch(() => undefined);
    });
  };
  server.server.registerCapabilities({ resources: { subscribe: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, async (req, extra) => {
    const { uri } = req.params;
    const m = VCON_URI.exec(uri);
    if (!m) throw new McpError(ErrorCode.InvalidParams, `uri: ${SUBSCRIBABLE}, got ${JSON.stringify(uri)}`);
    let uuid: string;
    try {
      uuid = parseUuid(m[1]).toLowerCase();
    } catch {
      throw new McpError(
        ErrorCode.InvalidParams,
        `uri: ${JSON.stringify(uri)} names no vCon (${JSON.stringify(m[1])} is not a uuid); ${SUBSCRIBABLE}`,
      );
    }
    let held = mine.get(uri);
    if (!held) {
      if (mine.size >= max) {
        const message = `this session is subscribed to ${mine.size} resources, the limit (MCP_MAX_SUBSCRIPTIONS=${max}); unsubscribe from one first`;
        throw new ProtocolError(ErrorCode.InvalidRequest, `too_many_subscriptions: ${message}`, { error: 'too_many_subscriptions', message });
      }
      held = watch(uri, uuid, ctxOf(extra.requestId));
      mine.set(uri, held);
    }
    try {
      await held;
    } catch (err) {
      if (mine.get(uri) === held) mine.delete(uri);
      throw err;
    }
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (req) => {
    release(mine.get(req.params.uri));
    mine.delete(req.params.uri);
    return {};
  });
  const previous = server.server.onclose;
  server.server.onclose = () => {
    for (const held of mine.values()) release(held);
    mine.clear();
    previous?.();
  };
}
