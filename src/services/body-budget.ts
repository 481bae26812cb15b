// The bytes of request bodies one process reads and works on at once. Each body is held in memory
// several times over while it is handled (the bytes read, the text, the parsed document, the
// statement's parameters), and node keeps what it grew to: 50 concurrent 14 MB creates took a
// process from 256 MB to 2.7 GB of RSS and left it at 2.1 GB. A body is counted from before its
// first byte is read until its answer starts; a body that would pass the bound is refused at once
// with server_busy, unread, instead of being queued with everything it costs.
import { ServerBusyError } from '../domain/errors.js';

export interface BodyBudgetStats {
  /** BODY_IN_FLIGHT_LIMIT in bytes. */
  limit: number;
  /** Bytes of the bodies being read or worked on now. */
  in_flight: number;
  /** The most bytes in flight at once since start. */
  peak: number;
  /** Bodies refused with server_busy since start. */
  refused: number;
}

export function createBodyBudget(limit: number) {
  let inFlight = 0;
  let peak = 0;
  let refused = 0;
  return {
    /** Counts `bytes` in and answers the function that counts them out (once), or throws ServerBusyError. */
    reserve(bytes: number): () => void {
      if (bytes <= 0) return () => {};
      if (inFlight + bytes > limit) {
        refused++;
        throw new ServerBusyError(
          `The server is busy reading other request bodies (${inFlight} of ${limit} bytes in flight; this one is ${bytes}); retry shortly`,
          'Send fewer large bodies at once, or raise BODY_IN_FLIGHT_LIMIT with VCON_MEMORY_LIMIT',
        );
      }
      inFlight += bytes;
      if (inFlight > peak) peak = inFlight;
      let done = false;
      return () => {
        if (done) return;
        done = true;
        inFlight -= bytes;
      };
    },
    stats: (): BodyBudgetStats => ({ limit, in_flight: inFlight, peak, refused }),
  };
}

export type BodyBudget = ReturnType<typeof createBodyBudget>;

/**
 * The bytes a request's body is counted as: its Content-Length, or the body limit when the length
 * is not known before reading (chunked) or not what it inflates to (Content-Encoding). 0 for no
 * body, and for a length over the limit (refused with 413 before it is read).
 */
export function bodyBytesOf(headers: { [name: string]: string | string[] | undefined }, bodyLimit: number): number {
  const length = Number(headers['content-length'] ?? 0);
  const encoding = headers['content-encoding'];
  const encoded = typeof encoding === 'string' && encoding.toLowerCase() !== 'identity';
  if (headers['transfer-encoding'] !== undefined || (encoded && length > 0)) return length > bodyLimit ? 0 : bodyLimit;
  return length > bodyLimit ? 0 : length;
}
