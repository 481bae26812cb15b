import express, { type RequestHandler } from 'express';
import type { Config } from '../config.js';
import { AppError } from '../domain/errors.js';
import { checkParsedBody, jsonBodyVerify } from '../transport/json-body.js';
import { sendError } from '../transport/errors.js';

const JSON_TYPES = new Set(['application/json', 'application/vcon', 'application/vcon+json']);

const mediaType = (header: string | undefined) => (header ?? '').split(';')[0].trim().toLowerCase();

/** JSON bodies only (with the vCon media types), gzip accepted, explicit size limit; others 415. */
export function createBodyParser(config: Config): RequestHandler {
  const json = express.json({
    limit: config.rest.bodyLimit,
    type: (req) => JSON_TYPES.has(mediaType(req.headers['content-type'])),
    inflate: true,
    // A bare string, number or null is valid JSON: the route answers that it wants an object
    // (validation_failed), instead of body-parser calling it malformed (invalid_json).
    strict: false,
    // The body's values are counted before the parse (over VCON_MAX_ELEMENTS, 413 without parsing
    // it); bytes that are not UTF-8 and numbers a double can't hold would be stored altered: refused.
    verify: jsonBodyVerify(config.limits.maxElements),
  });
  return (req, res, next) => {
    const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (!hasBody) {
      next(); // GETs and empty bodies: nothing to parse
      return;
    }
    if (!JSON_TYPES.has(mediaType(req.headers['content-type']))) {
      sendError(req, res, 415, 'unsupported_media_type', `Unsupported Content-Type "${req.headers['content-type'] ?? '(none)'}"`, {
        hint: 'Send application/json, application/vcon or application/vcon+json',
        production: config.production,
      });
      return;
    }
    json(req, res, (err?: unknown) => {
      // A decompression failure (bad gzip/deflate/br data) reaches us as a bare zlib error with no
      // body-parser `type`: it is an unreadable body, not a bad parameter.
      const encoding = req.headers['content-encoding'];
      if (err instanceof Error && !('type' in err) && encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        next(
          new AppError(
            400,
            'invalid_json',
            `Request body could not be decompressed (Content-Encoding: ${encoding}): ${err.message}`,
            undefined,
            'Send the gzip of a JSON document, or drop Content-Encoding',
          ),
        );
        return;
      }
      // A field name repeated in one object: the parse kept only the last (400 naming it).
      next((err as Error | undefined) ?? checkParsedBody(req));
    });
  };
}
