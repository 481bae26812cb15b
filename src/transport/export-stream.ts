// GET /vcons/export's answer: every vCon of the group as NDJSON, one stored document per line, in
// uuid order (resumable with `?after=<last uuid>`). REST-only (a stream is no tool result);
// declared with the other operations in operations.ts.
import type { Request, Response } from 'express';
import { ExportQuery, parseParams } from '../domain/params.js';
import type { RequestCtx } from '../services/context.js';
import type { Services } from '../services/index.js';

/**
 * Streams the group's vCons to one client. The route is mounted before the admission gate: the
 * stream takes a pool turn for each page it reads, not for its whole length, and reads the next
 * page only once the client has taken the last one (memory stays at about a page, whatever the
 * group's size).
 */
export async function streamExport(_req: Request, res: Response, query: Record<string, unknown>, ctx: RequestCtx, services: Services): Promise<void> {
  const { vcons, admission } = services;
  const { after } = parseParams(ExportQuery, query);
  const closed = new AbortController();
  res.once('close', () => closed.abort());
  // The first page before the headers: a database outage is still a 503 in the one error format.
  let page = await admission.run(() => vcons.exportPage(after, ctx));
  res.writeHead(200, { 'Content-Type': 'application/x-ndjson; charset=utf-8', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
  try {
    while (page.length > 0 && !closed.signal.aborted) {
      let text = '';
      for (const v of page) text += `${v.text}\n`;
      if (!res.write(text)) await drained(res, closed.signal);
      const last = page[page.length - 1].uuid;
      page = closed.signal.aborted ? [] : await admission.run(() => vcons.exportPage(last, ctx));
    }
    res.end();
  } catch {
    // Headers are sent: the client sees a cut stream (no final newline-terminated end) and resumes with ?after=.
    res.destroy();
  }
}

/** Resolves when the response can take more, or when the client has gone. */
function drained(res: Response, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    signal.addEventListener('abort', done);
  });
}
