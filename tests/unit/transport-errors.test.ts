// Both transports answer a failure with one mapping (src/transport/errors.ts): the MCP tool error's
// structured content and the REST body (less `success` and `request_id`) are the same object for
// the same thrown value, and the REST error handler writes exactly what toErrorBody returns.
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import { InvalidParameterError, NotFoundError, ValidationError } from '../../src/domain/errors.js';
import { createErrorHandler } from '../../src/http/error-handler.js';
import { createLogger } from '../../src/logger.js';
import { toToolError } from '../../src/mcp/result.js';
import { toErrorBody } from '../../src/transport/errors.js';
import { parseConfig } from '../../src/config.js';

const log = createLogger(parseConfig({ LOG_LEVEL: 'silent' }));
const opts = { production: false, log };

const THROWN: [string, () => unknown][] = [
  ['validation', () => new ValidationError('Invalid vCon', [{ path: 'parties', message: 'is required' }], 'see get_schema')],
  ['parameter', () => new InvalidParameterError('limit', 'must be at least 1')],
  ['not found', () => new NotFoundError('vcon', '00000000-0000-4000-8000-000000000001')],
  ['database down', () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })],
  ['bug', () => new TypeError('x is undefined')],
  ['a string', () => 'thrown text'],
  [
    'a hostile object',
    () => ({
      get message() {
        throw new Error('no');
      },
    }),
  ],
];

let server: Server;
let base = '';
beforeAll(async () => {
  const app = express();
  app.get('/throw/:i', (req) => {
    throw THROWN[Number(req.params.i)][1]();
  });
  app.use(createErrorHandler(opts));
  await new Promise<void>((resolve) => (server = app.listen(0, '127.0.0.1', () => resolve())));
  const addr = server.address();
  base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('one error mapping for REST and MCP', () => {
  it.each(THROWN.map(([name], i) => [name, i] as const))('%s: REST body and MCP tool error carry the same content', async (_name, i) => {
    const mapped = toErrorBody(THROWN[i][1](), opts)!;
    const res = await fetch(`${base}/throw/${i}`);
    const { success, request_id: _rid, ...rest } = (await res.json()) as Record<string, unknown>;
    expect(success).toBe(false);
    expect(res.status).toBe(mapped.status);
    expect(rest).toEqual(mapped.body);
    const tool = toToolError(THROWN[i][1](), opts);
    expect(tool.isError).toBe(true);
    expect(tool.structuredContent).toEqual(mapped.body);
  });

  it('keeps hints out of production on both', () => {
    const err = new ValidationError('Invalid vCon', undefined, 'a hint');
    expect(toErrorBody(err, { ...opts, production: true })!.body.hint).toBeUndefined();
    expect(toToolError(err, { ...opts, production: true }).structuredContent).not.toHaveProperty('hint');
  });
});
