// One rule per parameter: every query, path and body parameter of the REST routes and every
// MCP tool argument is the very zod object of src/domain (params.ts, or vcon.ts for documents),
// compared by identity. A schema written again in openapi.ts or tools.ts, even one that reads the
// same, is a different object and fails here.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as params from '../../src/domain/params.js';
import * as documents from '../../src/domain/vcon.js';
import { StoredVcon } from '../../src/domain/responses.js';
import { PATH_PARAMS, routeSchemas } from '../../src/http/openapi.js';
import { TOOLS, type ToolDef } from '../../src/mcp/tools.js';

const isZod = (v: unknown): v is z.ZodType => v instanceof z.ZodType;

/** The domain's schemas: params.ts's queries, bodies and parameters, and the document schemas. */
const DOMAIN_SCHEMAS = new Set<unknown>([...Object.values(params).filter(isZod), ...Object.values(documents).filter(isZod), StoredVcon]);
/** Every parameter of the domain: the schemas above and each field of the objects among them. */
const DOMAIN_PARAMS = new Set<unknown>([
  ...DOMAIN_SCHEMAS,
  ...[...DOMAIN_SCHEMAS].flatMap((s) => (s instanceof z.ZodObject ? Object.values(s.shape) : [])),
]);

/** The REST operation each tool mirrors: its arguments are that route's query, path and body parameters. */
const TOOL_ROUTES: Record<string, string> = {
  create_vcon: 'post /vcons',
  get_vcon: 'get /vcons/:uuid',
  list_vcons: 'get /vcons',
  list_changes: 'get /changes',
  search_vcons: 'get /vcons',
  update_vcon: 'patch /vcons/:uuid',
  delete_vcon: 'delete /vcons/:uuid',
  add_dialog: 'post /vcons/:uuid/dialog',
  add_analysis: 'post /vcons/:uuid/analysis',
  add_attachment: 'post /vcons/:uuid/attachments',
  get_analysis: 'get /vcons/:uuid/analysis',
  get_attachments: 'get /vcons/:uuid/attachments',
  discover_attachment_purposes: 'get /discovery/attachments/purposes',
  discover_attachment_types: 'get /discovery/attachments/types',
  discover_analysis_types: 'get /discovery/analysis/types',
  get_tags: 'get /vcons/:uuid/tags',
  manage_tag: 'put /vcons/:uuid/tags/:key',
  remove_all_tags: 'delete /vcons/:uuid/tags',
  get_unique_tags: 'get /tags',
  search_by_tags: 'get /tags/search',
  search_vcons_content: 'get /vcons/search/content',
  search_vcons_semantic: 'get /vcons/search/semantic',
  search_vcons_hybrid: 'get /vcons/search/hybrid',
  get_database_shape: 'get /database/shape',
  get_database_stats: 'get /database/stats',
  get_database_size: 'get /database/size',
  get_database_health: 'get /database/health',
  analyze_query: 'post /database/analyze',
  get_analytics: 'get /analytics',
  get_growth_analytics: 'get /analytics/growth',
  get_content_analytics: 'get /analytics/content',
  get_tag_analytics: 'get /analytics/tags',
  get_attachment_analytics: 'get /analytics/attachments',
  get_schema: 'get /schema',
  get_examples: 'get /examples/:type',
  get_version: 'get /version',
  get_health: 'get /health',
};
/** Arguments a tool has beyond its route's parameters (the route says it with its method). */
const TOOL_ONLY_ARGS: Record<string, string[]> = { manage_tag: ['action'] };

const routes = new Map(routeSchemas().map((r) => [`${r.method} ${r.path}`, r]));
const pathParams = (path: string) => (path.match(/:([A-Za-z0-9_]+)/g) ?? []).map((p) => p.slice(1));

/** Where each REST parameter of a route is not the domain's schema. */
function routeProblems(route: ReturnType<typeof routeSchemas>[number]): string[] {
  const at = `${route.method} ${route.path}`;
  const out: string[] = [];
  if (route.query && !DOMAIN_SCHEMAS.has(route.query)) out.push(`${at}: query is not a schema of src/domain`);
  for (const [name, schema] of Object.entries(route.query?.shape ?? {})) {
    if (!DOMAIN_PARAMS.has(schema)) out.push(`${at}: query parameter ${name} is not the domain's schema`);
  }
  if (route.body && !DOMAIN_SCHEMAS.has(route.body)) out.push(`${at}: body is not a schema of src/domain`);
  for (const name of pathParams(route.path)) {
    if (!DOMAIN_PARAMS.has(PATH_PARAMS[name])) out.push(`${at}: path parameter ${name} is not the domain's schema`);
  }
  return out;
}

/** Where each argument of a tool is not the schema its REST route parses the same parameter with. */
function toolProblems(tool: Pick<ToolDef, 'name' | 'input'>): string[] {
  const route = routes.get(TOOL_ROUTES[tool.name]);
  if (!route) return [`${tool.name}: no REST route listed in TOOL_ROUTES`];
  const out: string[] = [];
  for (const [name, schema] of Object.entries(tool.input)) {
    if (!DOMAIN_PARAMS.has(schema)) {
      out.push(`${tool.name}.${name}: not a schema of src/domain`);
      continue;
    }
    if (TOOL_ONLY_ARGS[tool.name]?.includes(name)) continue;
    const body = route.body instanceof z.ZodObject ? route.body.shape : {};
    // The route's own schema for this parameter: query, body field, path segment, or the body whole.
    const twin = route.query?.shape[name] ?? body[name] ?? (pathParams(route.path).includes(name) ? PATH_PARAMS[name] : route.body);
    // manage_tag's value is optional (remove needs none): the same schema, wrapped.
    const own = schema instanceof z.ZodOptional && !(twin instanceof z.ZodOptional) ? schema.unwrap() : schema;
    if (own !== twin) out.push(`${tool.name}.${name}: not the schema ${route.method.toUpperCase()} ${route.path} parses it with`);
  }
  return out;
}

describe('one schema per parameter', () => {
  it('every REST query, path and body parameter is the schema of src/domain', () => {
    expect([...routes.values()].flatMap(routeProblems)).toEqual([]);
    // The routes that take parameters do declare them (an undeclared query would pass vacuously).
    expect(routes.get('get /vcons')?.query).toBe(params.ListQuery);
    expect(routes.get('get /vcons/search/semantic')?.query).toBe(params.VectorSearchQuery);
    expect(routes.get('post /database/analyze')?.body).toBe(params.AnalyzeBody);
    expect(routes.get('patch /vcons/:uuid')?.body).toBe(params.VconPatch);
  });

  it('every MCP tool argument is the schema its REST twin parses the same parameter with', () => {
    expect(TOOLS.flatMap(toolProblems)).toEqual([]);
    expect(Object.keys(TOOL_ROUTES).sort()).toEqual(TOOLS.map((t) => t.name).sort());
  });

  it('a hand-written copy fails, even one that reads the same', () => {
    const copy = { name: 'search_vcons', input: { ...params.ListQuery.shape, limit: z.number().int().min(1).optional() } };
    expect(toolProblems(copy)).toEqual(['search_vcons.limit: not a schema of src/domain']);
    // A domain schema of another parameter is caught too: search_by_tags' limit has another default.
    const wrong = { name: 'search_vcons', input: { ...params.ListQuery.shape, limit: params.TagSearchQuery.shape.limit } };
    expect(toolProblems(wrong)).toEqual(['search_vcons.limit: not the schema GET /vcons parses it with']);
    const route = { ...routes.get('get /vcons')!, query: params.ListQuery.extend({ offset: z.number().int().min(0) }) };
    expect(routeProblems(route)).toEqual([
      'get /vcons: query is not a schema of src/domain',
      "get /vcons: query parameter offset is not the domain's schema",
    ]);
  });
});

describe('the one mapping of zod issues', () => {
  it('names the parameter and the problem as invalid_parameter, REST strings and MCP values alike', () => {
    for (const raw of [{ limit: '0' }, { limit: 0 }]) {
      expect(() => params.parseParams(params.ListQuery, raw)).toThrow(
        expect.objectContaining({
          status: 400,
          code: 'invalid_parameter',
          message: 'limit: must be ≥ 1, got 0',
          details: [{ path: 'limit', message: 'must be ≥ 1, got 0' }],
        }),
      );
    }
    expect(params.parseParams(params.ListQuery, { limit: '500', offset: '3', tags: '{"a":1}' })).toMatchObject({
      limit: 100,
      offset: 3,
      tags: { a: '1' },
    });
    expect(params.parseParams(params.ListQuery, { limit: 7, tags: { a: true } })).toMatchObject({ limit: 7, tags: { a: 'true' } });
  });

  it('reports a bad tag key by its own path and problem, and every bad parameter in details', () => {
    expect(() => params.parseParams(params.ListQuery, { tags: '{"a:b":"x"}', offset: '-1' })).toThrow(
      expect.objectContaining({
        code: 'invalid_parameter',
        details: [
          { path: 'offset', message: 'must be ≥ 0, got -1' },
          { path: 'tags.a:b', message: 'tag key must not contain ":"' },
        ],
      }),
    );
  });

  it('reports one problem per mistake: no extra "nothing to update" or "blank" after the real one', () => {
    expect(() => params.parseBody(params.VconPatch, { parties: [] })).toThrow(
      expect.objectContaining({
        code: 'validation_failed',
        details: [{ path: 'parties', message: expect.stringContaining('is not an updatable field') }],
      }),
    );
    expect(() => params.parseBody(params.VconPatch, {})).toThrow(
      expect.objectContaining({ details: [{ path: '(root)', message: 'nothing to update: send subject, extensions or critical' }] }),
    );
    expect(() => params.parseParams(params.SearchQuery, { q: '' })).toThrow(
      expect.objectContaining({ details: [{ path: 'q', message: 'must be at least 1 character(s)' }] }),
    );
    expect(() => params.parseParams(params.SearchQuery, { q: '  ' })).toThrow(
      expect.objectContaining({ details: [{ path: 'q', message: 'must not be blank' }] }),
    );
  });

  it('says a missing uuid is required instead of quoting "undefined"', () => {
    expect(() => params.parseUuid(undefined)).toThrow(
      expect.objectContaining({ code: 'invalid_parameter', message: 'uuid: is required: a UUID (8-4-4-4-12 hexadecimal digits)' }),
    );
    expect(() => params.parseUuid('nope')).toThrow(expect.objectContaining({ message: expect.stringContaining('got "nope"') }));
  });

  it("words zod's wrong-type issues through zod's error API, a schema's own message first", () => {
    // The message is zod's issue message itself, set by z.config({ customError }) in domain/errors.ts.
    expect(z.string().safeParse(5).error?.issues[0].message).toBe('must be a string, not a number');
    expect(z.object({ a: z.number() }).safeParse({}).error?.issues[0].message).toBe('is required');
    expect(z.array(z.string()).safeParse({}).error?.issues[0].message).toBe('must be an array, not an object');
    expect(z.string({ error: 'own words' }).safeParse(null).error?.issues[0].message).toBe('own words');
    expect(() => params.parseBody(params.TagPut, { value: [] })).toThrow(
      expect.objectContaining({ details: [{ path: 'value', message: 'must be a string, number or boolean' }] }),
    );
  });

  it('answers bodies with validation_failed naming each unknown field', () => {
    expect(() => params.parseBody(params.AnalyzeBody, { query: 'select 1', explain: true, x: 1 })).toThrow(
      expect.objectContaining({
        code: 'validation_failed',
        message: 'explain: is not a known field (query, analyze)',
        details: [
          { path: 'explain', message: 'is not a known field (query, analyze)' },
          { path: 'x', message: 'is not a known field (query, analyze)' },
        ],
      }),
    );
  });
});
