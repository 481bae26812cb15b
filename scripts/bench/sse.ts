// A small Server-Sent Events client over node:http, for GET /changes/stream: one socket per
// stream (no pool, so a thousand streams are a thousand connections), each event handed to a
// callback as it is parsed, nothing kept. The bench's changes section and the big feed test use it.
import http from 'node:http';

/** One event of the stream (comment lines are not events). */
export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
}

export interface EventStream {
  /** The response's status, once its headers arrived. */
  status: Promise<number>;
  /** Settles when the stream has ended: closed by the server, by close(), or failed. */
  ended: Promise<void>;
  /** Closes the connection (the server sees the client leave). */
  close(): void;
}

/**
 * Opens `url` as an event stream with `headers` (authorization, Last-Event-ID) and calls
 * `onEvent` for each event in order. Blocks are split at a blank line; `field: value` lines set
 * the event's fields, lines starting with ':' are comments.
 */
export function openEventStream(url: string, headers: Record<string, string>, onEvent: (e: SseEvent) => void): EventStream {
  let resolveStatus!: (n: number) => void;
  const status = new Promise<number>((r) => (resolveStatus = r));
  let req: http.ClientRequest | undefined;
  const ended = new Promise<void>((resolve) => {
    req = http.get(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      resolveStatus(res.statusCode ?? 0);
      res.setEncoding('utf8');
      let buf = '';
      res.on('data', (chunk: string) => {
        buf += chunk;
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const e: SseEvent = {};
          let any = false;
          for (const line of block.split('\n')) {
            if (line === '' || line.startsWith(':')) continue;
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'id' || field === 'event' || field === 'data') {
              e[field] = value;
              any = true;
            }
          }
          if (any) onEvent(e);
        }
      });
      res.on('close', () => resolve());
      res.on('error', () => resolve());
    });
    req.on('error', () => {
      resolveStatus(0);
      resolve();
    });
  });
  return { status, ended, close: () => req?.destroy() };
}

/** A change event's entry ({cursor, uuid, kind, time}), or undefined for ready/end events. */
export function changeOf(e: SseEvent): { cursor: string; uuid: string; kind: string } | undefined {
  if (e.event !== undefined || e.data === undefined) return undefined;
  return JSON.parse(e.data) as { cursor: string; uuid: string; kind: string };
}
