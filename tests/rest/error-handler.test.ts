// The REST error handler with everything JavaScript can throw: it never throws itself and never
// lets express answer with its HTML error page. A real express app and the real handler; routes
// throw (synchronously and through next) each shape of tests/fixtures/plugins/throws.mjs.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import express, { type RequestHandler } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import { createErrorHandler } from '../../src/http/error-handler.js';
import { createLogger, type Logger } from '../../src/logger.js';

interface ShapesModule {
  SHAPES: string[];
  thrown(shape: string): unknown;
}
const { SHAPES, thrown } = (await import(pathToFileURL(join(import.meta.dirname, '../fixtures/plugins/throws.mjs')).href)) as ShapesModule;

const silent = createLogger({ logLevel: 'silent', label: null, db: { schema: 'x' } } as Parameters<typeof createLogger>[0]);
/** A logger that fails on every call: the answer must not depend on logging working. */
const broken = new Proxy({} as Logger, {
  get: () => () => {
    throw new Error('log sink gone');
  },
});

async function serve(production: boolean, log: Logger): Promise<{ url: string; server: Server }> {
  const app = express();
  const sync: RequestHandler = (req) => {
    throw thrown(String(req.params.shape));
  };
  const viaNext: RequestHandler = (req, _res, next) => next(thrown(String(req.params.shape)));
  app.get('/sync/:shape', sync);
  app.get('/next/:shape', viaNext);
  // Details that JSON can't serialise: sending the mapped answer itself fails.
  app.get('/unsendable', () => {
    throw new AppError(400, 'validation_failed', 'bad', [{ path: 'x', message: 10n as unknown as string }]);
  });
  app.get('/after-headers', (_req, res) => {
    res.status(200).write('partial');
    throw new Error('late');
  });
  app.use(createErrorHandler({ production, log }));
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const apps: Record<string, { url: string; server: Server }> = {};
beforeAll(async () => {
  apps.dev = await serve(false, silent);
  apps.production = await serve(true, silent);
  apps.brokenLog = await serve(false, broken);
});
afterAll(async () => {
  for (const a of Object.values(apps)) {
    a.server.closeAllConnections();
    await new Promise((r) => a.server.close(r));
  }
});

/** Express treats a thrown or passed null/undefined as no error at all and moves on to the 404 route. */
const NOT_AN_ERROR = new Set(['null', 'undefined']);

describe('the REST error handler', () => {
  for (const app of ['dev', 'production', 'brokenLog']) {
    for (const how of ['sync', 'next']) {
      it(`answers every thrown shape in the one JSON format (${app}, ${how})`, async () => {
        for (const shape of SHAPES) {
          if (NOT_AN_ERROR.has(shape)) continue;
          const res = await fetch(`${apps[app].url}/${how}/${shape}`);
          const text = await res.text();
          const where = `${app} ${how} ${shape}: ${res.status} ${text.slice(0, 200)}`;
          expect(res.headers.get('content-type'), where).toMatch(/^application\/json/);
          expect(text, where).not.toMatch(/<html|<pre|<!DOCTYPE/i);
          const body = JSON.parse(text);
          expect(body.success, where).toBe(false);
          expect(typeof body.error, where).toBe('string');
          expect(typeof body.message, where).toBe('string');
          if (shape === 'unavailable') {
            expect([res.status, body.error], where).toEqual([503, 'database_unavailable']);
          } else {
            expect([res.status, body.error], where).toEqual([500, 'internal_error']);
            if (app === 'production') expect(body.message, where).toBe('An unexpected error occurred');
          }
        }
      });
    }
  }

  it('names the thrown value outside production, whatever its shape', async () => {
    const expected: Record<string, RegExp> = {
      'numeric-code': /numeric code/,
      'no-message': /Error/,
      'null-prototype': /cannot be printed/,
      'throwing-getters': /cannot be printed/,
      string: /a thrown string/,
      number: /42/,
      symbol: /Symbol\(thrown\)/,
      bigint: /10/,
    };
    for (const [shape, re] of Object.entries(expected)) {
      const body = (await (await fetch(`${apps.dev.url}/sync/${shape}`)).json()) as { message: string };
      expect(body.message, shape).toMatch(re);
    }
  });

  it('answers a fixed JSON 500 when sending the mapped answer fails', async () => {
    const res = await fetch(`${apps.dev.url}/unsendable`);
    expect(res.status).toBe(500);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ success: false, error: 'internal_error', message: 'An unexpected error occurred' });
  });

  it('ends a response whose headers were already sent instead of throwing', async () => {
    const res = await fetch(`${apps.dev.url}/after-headers`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('partial');
  });
});
