// Reading GET /changes/stream in tests: the events parsed so far, and a way to close it.
import { KEY } from './server.js';

export interface Event {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
}

/** An open SSE connection: the events parsed so far, and a way to close it. */
export function openChangeStream(base: string, query = '', headers: Record<string, string> = {}, key = KEY) {
  const events: Event[] = [];
  const comments: string[] = [];
  const aborter = new AbortController();
  let status = 0;
  let ended = false;
  const done = (async () => {
    const res = await fetch(`${base}/changes/stream${query}`, { headers: { authorization: `Bearer ${key}`, ...headers }, signal: aborter.signal });
    status = res.status;
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let at: number;
      while ((at = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, at);
        buf = buf.slice(at + 2);
        const e: Event = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments.push(line);
          else {
            const i = line.indexOf(':');
            (e as Record<string, string>)[line.slice(0, i)] = line.slice(i + 1).trimStart();
          }
        }
        if (Object.keys(e).length > 0) events.push(e);
      }
    }
    ended = true;
  })().catch(() => undefined);
  return {
    events,
    comments,
    status: () => status,
    ended: () => ended,
    changes: () => events.filter((e) => e.event === undefined && e.data).map((e) => ({ id: e.id!, ...JSON.parse(e.data!) })),
    close: async () => {
      aborter.abort();
      await done;
    },
  };
}
