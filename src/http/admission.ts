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
      res.once('close', release);
      next();
    }, next);
  };
}
