// One rule per parameter, by behaviour (tests/unit/params.test.ts checks it by identity): every
// query parameter of every REST route and every argument of every MCP tool, sent with a value its
// domain schema refuses, is answered with exactly the error that schema's parse gives.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseParams } from '../../src/domain/params.js';
import { routeSchemas } from '../../src/http/openapi.js';
import { TOOLS } from '../../src/mcp/tools.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';

const U = '00000000-0000-4000-8000-00000000a001';
/** Values tried in turn until the parameter's schema refuses one. */
const BAD: unknown[] = ['x', 5, '', '{bad', -1, 'a\u0000b', {}];
/** Tool arguments that are fields of their REST twin's body, not query parameters. */
const BODY_ARGS = new Set(['manage_tag.value', 'analyze_query.query', 'analyze_query.analyze']);
/** Valid values of the arguments a tool needs to get as far as parsing the one under test. */
// Valid values for the other arguments, documents included, so each call fails on the bad one only.
const FILL: Record<string, unknown> = {
  uuid: U,
  q: 'x',
  action: 'remove',
  key: 'k',
  query: 'select 1',
  type: 'minimal',
  vcon: { vcon: '0.3.0', parties: [] },
  updates: { subject: 'x' },
};

/** The error parseParams gives for `value` of one parameter, or undefined when the schema takes it. */
function expected(schema: z.ZodType, name: string, value: unknown): { error: string; message: string } | undefined {
  try {
    parseParams(z.object({ [name]: schema }), { [name]: value });
    return undefined;
  } catch (err) {
    const e = err as { code: string; message: string };
    return { error: e.code, message: e.message };
  }
}

function badValue(schema: z.ZodType, name: string, rest: boolean) {
  for (const value of BAD) {
    if (rest && typeof value !== 'string') continue;
    const want = expected(schema, name, value);
    if (want) return { value, want };
  }
  throw new Error(`no bad value for ${name}`);
}

let s: TestServer;
let mcp: HttpSession;
beforeAll(async () => {
  s = await startTestServer();
  mcp = await connectHttp(s.instance.url!, 'test-key-rw');
});
afterAll(async () => {
  await mcp?.close();
  await s?.close();
});

describe('each parameter answers with its domain schema’s error', () => {
  it('over REST', async () => {
    const seen: string[] = [];
    for (const route of routeSchemas()) {
      for (const [name, schema] of Object.entries(route.query?.shape ?? {}) as [string, z.ZodType][]) {
        const { value, want } = badValue(schema, name, true);
        const path = route.path.replace(':uuid', U).replace(':key', 'k').replace(':type', 'minimal');
        const query = new URLSearchParams(route.path.startsWith('/vcons/search/') ? { q: 'x' } : {});
        if (route.path === '/tags/search' && name !== 'tags') query.set('tags', '{"a":"b"}');
        query.set(name, value as string);
        const init = route.method === 'get' ? {} : { method: route.method.toUpperCase(), json: {} };
        const r = await s.api(`${path}?${query}`, init);
        expect({ status: r.status, error: r.body.error, message: r.body.message }, `${route.method} ${route.path} ${name}=${String(value)}`).toEqual({
          status: 400,
          ...want,
        });
        seen.push(`${route.path} ${name}`);
      }
    }
    expect(seen.length).toBeGreaterThan(40);
  });

  it('over MCP', async () => {
    const seen: string[] = [];
    for (const tool of TOOLS) {
      for (const [name, schema] of Object.entries(tool.input) as [string, z.ZodType][]) {
        // Documents (vcon, dialog, updates, ...) are bodies: their errors are validation_failed, tested elsewhere.
        if (schema instanceof z.ZodObject || schema instanceof z.ZodUnion) continue;
        const { value, want } = badValue(schema, name, false);
        const args: Record<string, unknown> = {};
        for (const k of Object.keys(tool.input)) if (k in FILL) args[k] = FILL[k];
        if (tool.name === 'search_by_tags' && name !== 'tags') args.tags = { a: 'b' };
        args[name] = value;
        // Fields of a REST body (the tag PUT's value, analyze's query) answer as bodies do.
        if (BODY_ARGS.has(`${tool.name}.${name}`)) want.error = 'validation_failed';
        if (tool.name === 'manage_tag' && name === 'value') args.action = 'set';
        const r = await mcp.call(tool.name, args);
        expect(
          { isError: r.isError, error: r.structuredContent?.error, message: r.structuredContent?.message },
          `${tool.name} ${name}=${JSON.stringify(value)}`,
        ).toEqual({
          isError: true,
          ...want,
        });
        seen.push(`${tool.name} ${name}`);
      }
    }
    expect(seen.length).toBeGreaterThan(40);
  });
});
