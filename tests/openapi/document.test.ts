import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { buildOpenApiDocument, documentedRoutes, toOpenApiPath } from '../../src/http/openapi.js';
import { createLogger } from '../../src/logger.js';
import { ERROR_CODES } from '../../src/domain/responses.js';
import { EXAMPLE_TYPES } from '../../src/domain/examples.js';
import type { Services } from '../../src/services/index.js';
import { checkOpenApiDocument, createResponseChecker } from '../helpers/openapi-check.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let doc: any;
beforeAll(async () => {
  s = await startTestServer();
  const r = await fetch(`${s.base}/openapi.json`);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  doc = await r.json();
});
afterAll(() => s?.close());

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** The routes express registered under the base path, as "METHOD /openapi/{path}". */
function registeredRoutes(env: Record<string, string> = {}): string[] {
  const config = parseConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...env });
  const app = buildApp({
    config,
    log: createLogger(config),
    services: {} as Services,
    buildInfo: { version: '0', gitCommit: 'x', buildTime: 'y' },
  }) as any;
  const out: string[] = [];
  for (const layer of app.router.stack) {
    for (const inner of layer.handle?.stack ?? []) {
      if (!inner.route) continue;
      for (const m of Object.keys(inner.route.methods)) if (METHODS.includes(m)) out.push(`${m.toUpperCase()} ${toOpenApiPath(inner.route.path)}`);
    }
  }
  return out.sort();
}

const documented = (d: any) =>
  Object.entries<any>(d.paths)
    .flatMap(([p, item]) =>
      Object.keys(item)
        .filter((m) => METHODS.includes(m))
        .map((m) => `${m.toUpperCase()} ${p}`),
    )
    .sort();

describe('GET /openapi.json', () => {
  it('is served without a key and validates structurally as OpenAPI 3.1', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(checkOpenApiDocument(doc)).toEqual([]);
  });

  it('documents every route express registered under the base path, and nothing else', () => {
    const routes = registeredRoutes();
    expect(routes.length).toBeGreaterThan(30);
    expect(documented(doc)).toEqual(routes);
    expect(
      documentedRoutes()
        .map((r) => `${r.method.toUpperCase()} ${toOpenApiPath(r.path)}`)
        .sort(),
    ).toEqual(routes);
  });

  it('uses the configured base path as its server, and Bearer security except on the open routes', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/api/v1' })]);
    expect(doc.components.securitySchemes).toEqual({ bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    const open = documented(doc).filter((r) => {
      const [m, p] = r.split(' ');
      return Array.isArray(doc.paths[p][m.toLowerCase()].security) && doc.paths[p][m.toLowerCase()].security.length === 0;
    });
    expect(open).toEqual(['GET /examples/{type}', 'GET /health', 'GET /livez', 'GET /openapi.json', 'GET /readyz', 'GET /schema', 'GET /version']);
    for (const r of documented(doc).filter((x) => !open.includes(x))) {
      const [m, p] = r.split(' ');
      expect(Object.keys(doc.paths[p][m.toLowerCase()].responses), r).toEqual(expect.arrayContaining(['401', '403', '500', '503']));
    }
  });

  it('declares the one error format with the codes of docs/api.md per status', () => {
    expect(doc.components.schemas.Error.required).toEqual(['success', 'error', 'message']);
    for (const [status, codes] of Object.entries(ERROR_CODES)) {
      expect(doc.components.schemas[`Error${status}`].properties.error.enum).toEqual(codes);
      expect(doc.components.responses[`Error${status}`].content['application/json'].schema).toEqual({ $ref: `#/components/schemas/Error${status}` });
    }
    expect(ERROR_CODES[400]).toEqual([
      'validation_failed',
      'invalid_json',
      'invalid_parameter',
      'batch_too_large',
      'batch_empty',
      'paging_cap_exceeded',
    ]);
    expect(doc.components.responses.Error401.headers['WWW-Authenticate']).toBeDefined();
  });

  it('carries the examples of /examples/:type, as served', async () => {
    const served = doc.paths['/examples/{type}'].get.responses['200'].content['application/json'].examples;
    const body = doc.paths['/vcons'].post.requestBody.content['application/json'].examples;
    expect(Object.keys(served)).toEqual(EXAMPLE_TYPES);
    for (const type of EXAMPLE_TYPES) {
      const r = await s.api(`/examples/${type}`, { key: null });
      expect(served[type].value).toEqual(r.body);
      expect(body[type].value).toEqual(r.body.vcon);
    }
  });

  it("is generated from the validator's schemas (same vocabulary as GET /schema)", async () => {
    const schema = (await s.api('/schema', { key: null })).body;
    expect(doc.components.schemas.Dialog.properties.type.enum).toEqual(schema.properties.dialog.items.properties.type.enum);
    expect(Object.keys(doc.components.schemas.Vcon.properties)).toEqual(Object.keys(schema.properties));
    expect(doc.components.schemas.Analysis.required).toEqual(['type', 'vendor']);
    expect(doc.info.version).toBe((await s.api('/version', { key: null })).body.version);
  });

  it('keeps the media type pattern meaningful without regex flags (multi-line parameters)', () => {
    expect(new RegExp(doc.components.schemas.Dialog.properties.mediatype.pattern, 'u').test('multipart/mixed;\n\tboundary="x"')).toBe(true);
  });
});

describe('document per configuration', () => {
  it('reflects API_KEY_HEADER, the base path and API_AUTH_REQUIRED', () => {
    const x = buildOpenApiDocument(parseConfig({ API_KEYS: 'k', API_KEY_HEADER: 'X-Api-Key', REST_API_BASE_PATH: '/v2/' }), { version: '1.2.3' });
    expect(checkOpenApiDocument(x)).toEqual([]);
    expect(x.servers).toEqual([expect.objectContaining({ url: '/v2' })]);
    expect((x.components as any).securitySchemes).toEqual({
      apiKeyAuth: expect.objectContaining({ type: 'apiKey', in: 'header', name: 'x-api-key' }),
    });
    expect(x.security).toEqual([{ apiKeyAuth: [] }]);
    expect(documented(x)).toEqual(registeredRoutes({ API_KEY_HEADER: 'x-api-key', REST_API_BASE_PATH: '/v2' }));

    const open = buildOpenApiDocument(parseConfig({ API_AUTH_REQUIRED: 'false', REST_API_BASE_PATH: '/' }), { version: '1' });
    expect(checkOpenApiDocument(open)).toEqual([]);
    expect(open.security).toEqual([]);
    expect(open.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect((open.paths as any)['/vcons'].get.responses['401']).toBeUndefined();
  });

  it('serves the document under a configured base path', async () => {
    const v2 = await startTestServer({ REST_API_BASE_PATH: '/v2', API_KEY_HEADER: 'x-api-key' });
    try {
      const r = await fetch(`${v2.instance.url}/v2/openapi.json`);
      expect(r.status).toBe(200);
      const d = (await r.json()) as any;
      expect(d.servers[0].url).toBe('/v2');
      expect(Object.keys(d.components.securitySchemes)).toEqual(['apiKeyAuth']);
    } finally {
      await v2.close();
    }
  });
});

describe('the structural checker', () => {
  const base = () => structuredClone(doc);

  it('finds unresolved refs, undeclared path parameters, missing responses, duplicate ids, bad versions', () => {
    const d = base();
    d.openapi = '3.0.3';
    d.paths['/vcons'].get.responses['200'].content['application/json'].schema = { $ref: '#/components/schemas/Nope' };
    d.paths['/vcons/{uuid}'].get.parameters = d.paths['/vcons/{uuid}'].get.parameters.filter((p: any) => p.in !== 'path');
    d.paths['/tags'].get.responses = {};
    d.paths['/version'].get.operationId = 'getHealth';
    d.paths['/health'].get.security = [{ nope: [] }];
    d.components.schemas.Party = { type: 'wat' };
    const problems = checkOpenApiDocument(d).join('\n');
    expect(problems).toMatch(/openapi: must be 3\.1\.x/);
    expect(problems).toMatch(/\$ref #\/components\/schemas\/Nope does not resolve/);
    expect(problems).toMatch(/path parameter \{uuid\} is not declared/);
    expect(problems).toMatch(/~1tags\/get: needs at least one response/);
    expect(problems).toMatch(/duplicate operationId getHealth/);
    expect(problems).toMatch(/undeclared scheme nope/);
    expect(problems).toMatch(/schemas\/Party.*does not compile/);
  });

  it('finds an example that does not match its schema', () => {
    const d = base();
    d.paths['/vcons'].post.requestBody.content['application/json'].examples.minimal.value = { uuid: 'not-a-uuid' };
    expect(checkOpenApiDocument(d).join('\n')).toMatch(/examples\/minimal: example does not match/);
  });
});

describe('the response checker', () => {
  it('refuses undeclared statuses, undeclared content types, wrong bodies and unknown operations', () => {
    const c = createResponseChecker(doc);
    const u = '0195a1c2-0000-4000-8000-000000000001';
    const ok = { success: true, uuid: u, deleted: true };
    expect(c.check({ method: 'DELETE', path: `/vcons/${u}`, status: 200, contentType: 'application/json; charset=utf-8', body: ok })).toEqual([]);
    expect(c.check({ method: 'DELETE', path: `/vcons/${u}`, status: 201, contentType: 'application/json', body: ok })[0]).toMatch(
      /status 201 not declared/,
    );
    expect(c.check({ method: 'DELETE', path: `/vcons/${u}`, status: 200, contentType: 'text/html', body: ok })[0]).toMatch(
      /content type text\/html not declared/,
    );
    expect(
      c.check({ method: 'DELETE', path: `/vcons/${u}`, status: 200, contentType: 'application/json', body: { ...ok, extra: 1 } }).join(),
    ).toMatch(/additional properties/);
    expect(
      c
        .check({
          method: 'GET',
          path: `/vcons/${u}`,
          status: 404,
          contentType: 'application/json',
          body: { success: false, error: 'nope', message: 'm' },
        })
        .join(),
    ).toMatch(/allowed values/);
    expect(c.check({ method: 'DELETE', path: `/vcons/${u}/tags`, status: 204, contentType: null, body: { x: 1 } }).join()).toMatch(
      /declares no body/,
    );
    expect(c.check({ method: 'GET', path: '/vcons/batch', status: 200, contentType: 'application/json', body: {} })[0]).toMatch(/no operation/);
    expect(c.findOperation('GET', '/vcons/search/content?q=x')).toMatchObject({ template: '/vcons/search/content' });
  });
});
