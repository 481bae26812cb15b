import type { ServerResponse } from 'node:http';
import type { Logger } from '../logger.js';

/**
 * Bounds how long a complete answer may wait for its client to take it: from the moment the
 * response is ended (its last byte handed to node) until node has passed all of it to the
 * operating system. A client that stops reading would otherwise keep the answer (up to the body
 * limit, per connection) in the process's memory for as long as it keeps the connection open.
 * Streams that never end (MCP's SSE) are not bounded: only ended responses are timed.
 */
export function createSendTimeout(ms: number, log: Logger) {
  return (res: ServerResponse): void => {
    res.once('prefinish', () => {
      // Everything already handed to the operating system (the usual case: node writes an ended
      // answer at once when the socket takes it): nothing is held for the client, nothing to time.
      if (!res.socket || res.socket.writableLength === 0) return;
      const timer = setTimeout(() => {
        log.warn({ send_timeout_ms: ms }, 'client did not take its answer within SEND_TIMEOUT_MS; connection closed');
        res.destroy();
      }, ms);
      const clear = () => clearTimeout(timer);
      res.once('finish', clear);
      res.once('close', clear);
    });
  };
}
