// One declaration per operation: the express routes, the OpenAPI document and the MCP tools are all
// generated from src/transport/operations.ts. This checks that the three agree with the table and
// with each other: the same routes, methods, scopes, parameters and tools.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseConfig } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { buildOpenApiDocument, toOpenApiPath } from '../../src/http/openapi.js';
import { createLogger } from '../../src/logger.js';
import { TOOLS } from '../../src/mcp/tools.js';
import { toolsForScope } from '../../src/mcp/server.js';
import type { Services } from '../../src/services/index.js';
import { OPERATIONS, PATH_PARAMS, ROUTES, SCHEMAS, type Operation } from '../../src/transport/operations.js';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

function appOf(env: Record<string, string> = {}) {
  const config = parseConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...env });
  const app = buildApp({ config, log: createLogger(config), services: {} as Services, buildInfo: { version: '0', gitCommit: 'x', buildTime: 'y' } });
  return { config, app };
}

/** The routes express registered under the base path, as "METHOD /path", in registration order. */
function expressRoutes(env: Record<string, string> = {}): string[] {
  const { app } = appOf(env);
  const out: string[] = [];
  for (const layer of (app as any).router.stack) {
    for (const inner of layer.handle?.stack ?? []) {
      if (!inner.route) continue;
      for (const m of Object.keys(inner.route.methods)) if (METHODS.includes(m)) out.push(`${m.toUpperCase()} ${inner.route.path}`);
    }
  }
  return out;
}

/** The operations of an OpenAPI document as "METHOD /path" (express spelling) with their security. */
function documented(doc: any): Map<string, { security: unknown; parameters: any[]; requestBody: unknown }> {
  const out = new Map();
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    for (const m of Object.keys(item).filter((k) => METHODS.includes(k))) {
      out.set(`${m.toUpperCase()} ${p.replace(/\{([^}]+)\}/g, ':$1')}`, item[m]);
    }
  }
  return out;
}

const key = (o: Pick<Operation, 'method' | 'path'>) => `${o.method.toUpperCase()} ${o.path}`;
const pathParams = (path: string) => (path.match(/:([A-Za-z0-9_]+)/g) ?? []).map((p) => p.slice(1));

describe('express, OpenAPI and MCP are generated from one table', () => {
  it('registers exactly the routes of the table, and the document documents exactly them', () => {
    const table = ROUTES.map(key).sort();
    expect(expressRoutes().sort()).toEqual(table);
    const doc = buildOpenApiDocument(parseConfig({ API_KEYS: 'k' }), { version: '1' });
    expect([...documented(doc).keys()].sort()).toEqual(table);
    // With REST off only the operations served without it are routes (health, the probes, version).
    const always = ['GET /health', 'GET /livez', 'GET /readyz', 'GET /version'];
    expect(expressRoutes({ REST_API_ENABLED: 'false' }).sort()).toEqual(always);
    const off = buildOpenApiDocument(parseConfig({ API_KEYS: 'k', REST_API_ENABLED: 'false' }), { version: '1' });
    expect([...documented(off).keys()].sort()).toEqual(always);
  });

  it('registers literal paths before the parameterised paths they could be taken for', () => {
    const order = expressRoutes();
    expect(order.indexOf('POST /vcons/batch')).toBeLessThan(order.indexOf('GET /vcons/:uuid'));
  });

  it('has one id per operation and one name per tool', () => {
    const ids = ROUTES.map((o) => o.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ROUTES.map(key).length).toBe(new Set(ROUTES.map(key)).size);
    const names = TOOLS.map((t) => t.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('gives each scope its meaning on every surface', () => {
    const doc = buildOpenApiDocument(parseConfig({ API_KEYS: 'k' }), { version: '1' });
    const ops = documented(doc);
    for (const o of ROUTES) {
      // The key check is by method: read-only keys may GET. A declared scope says the same.
      if (o.scope !== 'none') expect(o.scope, key(o)).toBe(o.method === 'get' ? 'read' : 'write');
      const documentedOp = ops.get(key(o))!;
      expect(Array.isArray(documentedOp.security) && (documentedOp.security as unknown[]).length === 0, key(o)).toBe(o.scope === 'none');
    }
    const readOnly = new Set(toolsForScope('read').map((t) => t.name));
    for (const e of OPERATIONS) {
      if ('tool' in e) {
        expect(readOnly.has(e.tool.name), e.tool.name).toBe(e.tool.scope === 'read');
        continue;
      }
      for (const t of e.tools ?? []) expect(readOnly.has(t.name), t.name).toBe(e.scope !== 'write');
    }
  });

  it("gives each tool its route's path, body and query parameters, and the document the same ones", () => {
    const doc = buildOpenApiDocument(parseConfig({ API_KEYS: 'k' }), { version: '1' });
    const ops = documented(doc);
    const byName = new Map(TOOLS.map((t) => [t.name, t]));
    for (const o of ROUTES) {
      const parameters = (ops.get(key(o))!.parameters ?? []).map((p: any) => `${p.in} ${p.name}`);
      const declared = [...pathParams(o.path).map((n) => `path ${n}`), ...Object.keys(o.query?.shape ?? {}).map((n) => `query ${n}`)];
      expect(parameters, key(o)).toEqual(declared);
      expect(ops.get(key(o))!.requestBody !== undefined, key(o)).toBe(o.body !== undefined);
      for (const spec of o.tools ?? []) {
        const tool = byName.get(spec.name)!;
        const body = o.body && (typeof o.body.schema === 'string' ? SCHEMAS[o.body.schema] : o.body.schema);
        const expected: Record<string, unknown> = {};
        for (const n of pathParams(o.path)) expected[n] = PATH_PARAMS[n];
        if (body && spec.bodyArg) expected[spec.bodyArg.name] = body;
        else if (body) Object.assign(expected, (body as z.ZodObject).shape);
        for (const n of spec.pick ?? Object.keys(o.query?.shape ?? {})) expected[n] = o.query!.shape[n];
        expect(Object.keys(tool.input), spec.name).toEqual(Object.keys(expected));
        for (const [n, s] of Object.entries(tool.input)) expect(s === expected[n], `${spec.name}.${n}`).toBe(true);
        expect(tool.operations).toBe(o.operations);
      }
    }
  });

  it('offers every tool of the table, and no other', () => {
    const declared = OPERATIONS.flatMap((e) => ('tool' in e ? [e.tool.name] : (e.tools ?? []).map((t) => t.name)));
    expect(TOOLS.map((t) => t.name)).toEqual(declared);
    expect(declared.length).toBeGreaterThan(30);
  });

  it('answers 405 with the methods of the path in one order whatever the table says', async () => {
    // GET /vcons comes after POST /vcons in the table; Allow lists GET first all the same.
    const { app } = appOf({ API_AUTH_REQUIRED: 'false' });
    const layer = (app as any).router.stack.flatMap((l: any) => l.handle?.stack ?? []).find((l: any) => l.route?.path === '/vcons');
    expect(Object.keys(layer.route.methods).filter((m) => m !== '_all')).toEqual(['get', 'post']);
  });
});

describe('a generated route checks what its table entry says', () => {
  it('maps a tool call to the same call input as the route', async () => {
    const seen: unknown[] = [];
    const services = {
      vcons: { get: async (uuid: string, format: string) => (seen.push({ uuid, format }), { uuid }) },
    } as unknown as Services;
    const tool = TOOLS.find((t) => t.name === 'get_vcon')!;
    const r = await tool.run(
      { uuid: '00000000-0000-4000-8000-0000000000AA', format: 'metadata' },
      { transport: 'mcp', scope: 'read', keyId: null },
      {
        services,
        buildInfo: { version: '0', gitCommit: 'x', buildTime: 'y' },
        basePath: '',
      },
    );
    expect(r).toEqual({ vcon: { uuid: '00000000-0000-4000-8000-0000000000aa' } });
    expect(seen).toEqual([{ uuid: '00000000-0000-4000-8000-0000000000aa', format: 'metadata' }]);
  });
});

describe('the table', () => {
  it('names only component schemas that exist', () => {
    for (const o of ROUTES) {
      for (const reply of Object.values(o.replies)) {
        if (reply?.schema) expect(SCHEMAS, `${key(o)} ${reply.schema}`).toHaveProperty(reply.schema);
        if (reply?.orSchema) expect(SCHEMAS, `${key(o)} ${reply.orSchema}`).toHaveProperty(reply.orSchema);
      }
      if (typeof o.body?.schema === 'string') expect(SCHEMAS).toHaveProperty(o.body.schema);
    }
  });

  it('declares the OpenAPI document as the routes in table order', () => {
    const doc = buildOpenApiDocument(parseConfig({ API_KEYS: 'k' }), { version: '1' });
    const firstSeen = [...new Set(ROUTES.map((o) => toOpenApiPath(o.path)))];
    expect(Object.keys(doc.paths as object)).toEqual(firstSeen);
  });
});
