// The hot write, `POST <base>/vcons` of one vCon, answered before express (for write throughput): express's
// router, its middlewares and body-parser cost ~140 µs of CPU per create of ~1.3 ms (bench, 32
// concurrent). Only the plain case is taken: no query string (wait_for goes to express), no Origin
// header, a write key, a JSON body of a type body-parser takes (UTF-8, no content encoding) with a
// length within the limit. Anything else goes to express untouched, so every refusal and every
// CORS answer keeps its one implementation. What the plain case does is what express's path does
// for it: the request id and build headers, Vary, the key check, the body read whole before a pool
// turn is taken, the service's create, the access log line, and errors (invalid JSON, validation,
// database busy or down) through the same handler.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createFastBasics, hasBody, type FastGet, type FastGetDeps } from './fast-get.js';
import { checkJsonValues } from '../domain/elements.js';
import { checkJsonBytes, checkUniqueMembers } from '../domain/exact-json.js';
import { withWarnings, type ValidationWarning } from '../domain/vcon.js';

/** The media types body.ts parses as JSON. */
const JSON_TYPES = new Set(['application/json', 'application/vcon', 'application/vcon+json']);

/** A JSON media type with no parameter but charset=utf-8 (any other charset is body-parser's to judge). */
function plainJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const [type, ...params] = contentType.toLowerCase().split(';');
  return JSON_TYPES.has(type.trim()) && params.every((p) => ['charset=utf-8', 'charset="utf-8"'].includes(p.trim()));
}

/**
 * The whole body as text (a leading BOM dropped, as body-parser's decoder does), once its JSON
 * values are counted (over `maxElements`: 413, as body-parser's verify answers on express's path)
 * and its bytes checked as body.ts checks them (not UTF-8, or a number a double can't hold: 400).
 */
function readText(req: IncomingMessage, length: number, maxElements: number): Promise<{ text: string; bytes: Buffer; members: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // One chunk (most bodies) is decoded as it is: concat would copy it into a new buffer first.
      const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
      let members: number;
      try {
        members = checkJsonValues(bytes, maxElements);
        checkJsonBytes(bytes);
      } catch (err) {
        reject(err as Error);
        return;
      }
      const text = bytes.toString('utf8');
      resolve({ text: text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, bytes, members });
    });
    // As raw-body: a client gone mid-body is 'aborted' (emitted before the ECONNRESET 'error').
    req.on('aborted', () => reject(Object.assign(new Error('request aborted'), { type: 'request.aborted' })));
    req.on('error', reject);
    // A client gone mid-body: express's handler answers nothing for this type, as for body-parser's.
    req.on('close', () => req.complete || reject(Object.assign(new Error('request aborted'), { type: 'request.aborted' })));
  });
}

/** The fast create of this instance, or undefined when it has nothing it can take (REST off, auth required with no key). */
export function createFastCreate(deps: FastGetDeps): FastGet | undefined {
  const { config, services, buildInfo } = deps;
  const noKeys = config.auth.keys.length === 0 && config.auth.readOnlyKeys.length === 0;
  if (!config.rest.enabled || (config.auth.required && noKeys)) return undefined;

  const path = `${config.rest.basePath}/vcons`;
  const limit = config.rest.bodyLimit;
  const authRequired = config.auth.required;
  const { resolveKey, headersOf, setCommonHeaders } = createFastBasics(config, buildInfo);
  const { vcons, admission, bodies } = services;

  const answer = async (req: IncomingMessage, res: ServerResponse, id: string, length: number, keyId: string | null) => {
    // The body counts into the bytes in flight from before it is read until the answer is written.
    const releaseBody = bodies.reserve(length);
    try {
      await create(req, res, id, length, keyId);
    } finally {
      releaseBody();
    }
  };

  const create = async (req: IncomingMessage, res: ServerResponse, id: string, length: number, keyId: string | null) => {
    const { text, bytes, members } = await readText(req, length, config.limits.maxElements);
    let doc: unknown;
    try {
      // As body-parser: an empty text (a body of just a BOM) is {}.
      doc = text.length === 0 ? {} : JSON.parse(text);
    } catch (err) {
      // As body-parser reports it (the same message), for the same 400 invalid_json.
      throw Object.assign(err as Error, { type: 'entity.parse.failed', status: 400 });
    }
    // As body.ts: a field name repeated in one object (the parse kept only the last) is a 400.
    checkUniqueMembers(doc, members, bytes);
    const release = await admission.acquire();
    let r: { uuid: string; created: boolean; warnings: ValidationWarning[] };
    try {
      // As the gate: a client gone while its request waited for a turn gets nothing.
      if (res.closed || res.socket?.destroyed !== false) return;
      r = await vcons.create(doc, { transport: 'rest', scope: 'write', keyId, requestId: id });
    } finally {
      release();
    }
    if (res.closed) return;
    const body = JSON.stringify({ success: true, uuid: r.uuid, created: r.created, ...withWarnings(r.warnings) });
    res.writeHead(
      r.created ? 201 : 200,
      headersOf(id, ['Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(body))]),
    );
    res.end(body);
  };

  return (req, res, fail) => {
    const h = req.headers;
    const length = Number(h['content-length']);
    if (req.method !== 'POST' || req.url !== path || h.origin !== undefined || !plainJson(h['content-type'])) return false;
    if (!(length > 0 && length <= limit) || h['transfer-encoding'] !== undefined || !hasBody(req)) return false;
    if (h['content-encoding'] !== undefined && h['content-encoding'].toLowerCase() !== 'identity') return false;
    const auth = authRequired ? resolveKey(req) : { scope: 'write', keyId: null };
    if (auth?.scope !== 'write') return false;
    const id = deps.requestId(h['x-request-id']);
    const start = performance.now();
    res.once('close', () => deps.logRequest(res, 'POST', path, id, start));
    answer(req, res, id, length, auth.keyId).catch((err: unknown) => {
      setCommonHeaders(res, id);
      fail(err);
    });
    return true;
  };
}
