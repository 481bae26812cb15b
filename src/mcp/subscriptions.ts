// resources/subscribe for vCon resources (protocol revision 2025-11-25, the one the SDK serves):
// a session subscribed to vcon://v1/vcons/{uuid} (or one of its parts) is sent
// notifications/resources/updated when the change log shows a change of that vCon. A notification
// is a hint to read the resource again; the change log (list_changes, GET /changes) is the record.
import { ErrorCode, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Services } from '../services/index.js';
import { RESOURCE_PREFIX } from './resources.js';

const VCON_URI = new RegExp(
  `^${RESOURCE_PREFIX.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}vcons/([0-9a-fA-F-]{36})(/(dialog|analysis|attachments|tags))?$`,
);

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

/** Serves resources/subscribe and resources/unsubscribe on one server; its subscriptions end when it closes. */
export function registerSubscriptions(server: McpServer, services: Services): void {
  const hub = subscriptionHubOf(services);
  const mine = new Map<string, () => void>();
  server.server.registerCapabilities({ resources: { subscribe: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    const { uri } = req.params;
    const m = VCON_URI.exec(uri);
    if (!m)
      throw new McpError(
        ErrorCode.InvalidParams,
        `uri: only ${RESOURCE_PREFIX}vcons/{uuid} and its /dialog, /analysis, /attachments, /tags can be subscribed, got ${JSON.stringify(uri)}`,
      );
    if (!mine.has(uri)) {
      const unsubscribe = await hub.subscribe(m[1].toLowerCase(), () => {
        server.server.sendResourceUpdated({ uri }).catch(() => undefined);
      });
      mine.set(uri, unsubscribe);
    }
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, (req) => {
    mine.get(req.params.uri)?.();
    mine.delete(req.params.uri);
    return {};
  });
  const previous = server.server.onclose;
  server.server.onclose = () => {
    for (const unsubscribe of mine.values()) unsubscribe();
    mine.clear();
    previous?.();
  };
}
