// A request body's share of the bytes in flight, and when the request gives it back: when its
// answer starts, not when the client has taken the answer. (A pool turn is held around the route's
// handler instead: src/http/admission.ts.)
import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { bodyBytesOf, type BodyBudget } from '../services/body-budget.js';

/**
 * Calls `fn` once, when the response starts (its head is written) or closes, whichever comes
 * first. Every route reads the database before it writes its answer, so the start of the answer is
 * where a request's work on its body ends; a client that never reads the answer must not hold its
 * body's share of the bytes in flight until it goes.
 */
function onAnswer(res: ServerResponse, fn: () => void): void {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    fn();
  };
  res.once('close', once);
  // Every way of answering (end, write, flushHeaders, express's send) writes the head through writeHead.
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
    once();
    return writeHead.apply(this, args);
  } as ServerResponse['writeHead'];
}

/**
 * Counts the request's body into the bytes in flight before any of it is read (after auth: an
 * unauthenticated request never counts), until its answer starts. Over the bound: 503 server_busy
 * with Retry-After; node then reads the unread body and drops it chunk by chunk, so the client
 * gets the answer (a connection closed on a body still arriving is reset, answer unread).
 */
export function createBodyGate(bodyLimit: number, budget: BodyBudget): RequestHandler {
  return (req, res, next) => {
    // A request without a body (every GET) holds nothing: no hook on its answer.
    const bytes = bodyBytesOf(req.headers, bodyLimit);
    if (bytes > 0) onAnswer(res, budget.reserve(bytes));
    next();
  };
}
