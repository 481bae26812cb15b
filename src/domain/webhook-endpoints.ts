// How a webhook endpoint is named where its URL must not be shown (it may carry credentials or
// tokens): by an id derived from the URL, or by the URL without credentials and query. Shared by
// the server (routes, logs, /health) and the launcher (`vcon-launch status`).
import { createHash } from 'node:crypto';

/** A stable id of an endpoint, that names it in routes and logs without showing its URL. */
export const endpointId = (url: string) => `ep_${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;

/** The URL with any credentials and query removed. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

/** An endpoint as /health reports it: by id, never by URL (/health needs no key). */
export interface EndpointHealth {
  /** ep_ and 12 hex digits, as in GET /webhooks and the server's log lines. */
  id: string;
  state: 'active' | 'failing' | 'throttled' | 'disabled';
  failing_since: string | null;
  disabled_at: string | null;
  disabled_reason: string | null;
  /** What the last failed attempt came to, in words that name no host or address ("answered 500", "connection refused"). */
  last_error: string | null;
  last_error_at: string | null;
}
