import type { RequestHandler } from 'express';
import type { Admission } from '../services/admission.js';

/**
 * Holds a turn of the database pool for the rest of the request (released when the response
 * closes, however it ends). Mounted after auth and body parsing, so neither an unauthenticated
 * request nor a slow upload ever occupies a connection's turn.
 */
export function createAdmissionGate(admission: Admission): RequestHandler {
  return (_req, res, next) => {
    admission.acquire().then((release) => {
      // The client may have gone while the request waited for its turn: its 'close' has fired
      // already and would never release the turn (a load generator's round end leaked the pool).
      if (res.closed || res.socket?.destroyed !== false) {
        release();
        return;
      }
      res.once('close', release);
      next();
    }, next);
  };
}
