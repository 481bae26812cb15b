import type { RequestHandler } from 'express';
import type { Admission } from '../services/admission.js';
import { onAnswer } from '../transport/in-flight.js';

/**
 * Holds a turn of the database pool while the request works (released when its answer starts, or
 * when the response closes however it ends). Mounted after auth and body parsing, so neither an
 * unauthenticated request nor a slow upload ever occupies a connection's turn.
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
      onAnswer(res, release);
      next();
    }, next);
  };
}
