import type { Request, RequestHandler, Response } from 'express';
import type { Admission } from '../services/admission.js';

/**
 * Runs a route's handler with a turn of the database pool, given back when the handler is done
 * (its database work ends before it answers). Wrapped around the gated routes only, after auth and
 * body parsing, so neither an unauthenticated request nor a slow upload nor a 404/405 ever
 * occupies a connection's turn, and a request costs no listener or hook for it.
 */
export function admitted(admission: Admission, handler: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return async (req, res) => {
    const release = await admission.acquire();
    try {
      // The client may have gone while the request waited for its turn: nothing to answer.
      if (res.closed || res.socket?.destroyed !== false) return;
      await handler(req, res);
    } finally {
      release();
    }
  };
}
