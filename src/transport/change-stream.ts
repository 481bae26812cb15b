// GET /changes/stream's answer: the change log as Server-Sent Events (API: docs/api.md "Changes").
// REST-only (MCP reads the log with list_changes); declared with the other operations in operations.ts.
import type { Request, Response } from 'express';
import type { ChangeEntry } from '../domain/changes.js';
import type { Services } from '../services/index.js';

/** How often an idle stream sends a comment line, so proxies and clients see it alive. */
export const HEARTBEAT_MS = 15_000;
/** The reconnection delay a stream suggests to EventSource clients (its `retry:` field). */
export const RETRY_MS = 2_000;
/** Bytes a stream may have queued for a client that does not read; past this it is dropped. */
export const STREAM_BUFFER_BYTES = 1024 * 1024;
/** How long a stream waits for a client to take what is queued before dropping it. */
export const DRAIN_TIMEOUT_MS = 30_000;

/** An event of the stream: its id is the cursor, its data the thin entry (no key id). */
const eventOf = (e: ChangeEntry) => `id: ${e.cursor}\ndata: ${JSON.stringify({ cursor: e.cursor, uuid: e.uuid, kind: e.kind, time: e.time })}\n\n`;

/**
 * Streams the change log to one client until it leaves or the server shuts down. The route is
 * mounted before the admission gate: a stream lives for hours and must not hold one of the pool's
 * turns; its reads are short queries.
 */
export async function streamChanges(req: Request, res: Response, query: Record<string, unknown>, changes: Services['changes']): Promise<void> {
  const start = await changes.openStream(query, req.get('Last-Event-ID'));
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    // nginx buffers responses unless told not to.
    'X-Accel-Buffering': 'no',
  });
  // The first event carries the start cursor as its id: a client that reconnects before any
  // change arrives resumes from here, not from wherever its new request would start.
  res.write(`retry: ${RETRY_MS}\nevent: ready\nid: ${start.after}\ndata: ${JSON.stringify({ cursor: start.after.toString() })}\n\n`);
  const aborted = new AbortController();
  res.on('close', () => aborted.abort());
  const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  /** Writes a run of events; a client that lets STREAM_BUFFER_BYTES pile up, or does not drain in time, is dropped. */
  const deliver = async (entries: ChangeEntry[]) => {
    let text = '';
    for (const e of entries) text += eventOf(e);
    if (res.write(text)) return;
    if (res.writableLength > STREAM_BUFFER_BYTES) throw new Error('client does not read');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('client does not read')), DRAIN_TIMEOUT_MS);
      const done = () => {
        clearTimeout(timer);
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  };
  try {
    await changes.follow(start, deliver, aborted.signal);
    if (!aborted.signal.aborted) res.end(`event: end\ndata: ${JSON.stringify({ reason: 'shutdown' })}\n\n`);
  } catch {
    // A client that does not read, or a failed read of the log: the client reconnects with its Last-Event-ID.
    res.destroy();
  } finally {
    clearInterval(heartbeat);
  }
}
