// The OpenAPI 3.1 document of the REST API (GET /openapi.json), generated from the operation table
// (src/transport/operations.ts): its paths, parameters (the zod schemas of domain/params.ts), bodies
// and replies (domain/vcon.ts, domain/responses.ts). Nothing here restates a route or a rule.
import { z } from 'zod';
import type { Config } from '../config.js';
import * as R from '../domain/responses.js';
import { ERROR_CODES, type ErrorStatus } from '../domain/responses.js';
import { Party, vconSchemas, type ValidationMode } from '../domain/vcon.js';
import { JSON_PARAMS, PATH_PARAMS, ROUTES, SCHEMAS, type Operation, type Reply } from '../transport/operations.js';

type Json = Record<string, unknown>;

const ERROR_DESCRIPTIONS: Record<ErrorStatus, string> = {
  400: 'Bad request: validation failures list every problem in details',
  401: 'API key missing or invalid',
  403: 'Read-only key used with a non-read method, or a plugin refused the operation',
  404: 'Not found',
  405: 'Method not allowed on this path',
  410: 'The cursor is older than the change log keeps (CHANGES_RETENTION_HOURS); the message names the oldest cursor held',
  413: 'Request body over REST_API_BODY_LIMIT',
  415: 'Unsupported Content-Type or Content-Encoding',
  500: 'Internal error (production: only "An unexpected error occurred")',
  503: 'Authentication not configured, or the database (or embedding provider) unavailable',
};

const JSON_TYPES = ['application/json', 'application/vcon', 'application/vcon+json'];
const PROVENANCE_HEADERS = ['X-Request-Id', 'X-Version', 'X-Git-Commit', 'X-Build-Time'];

/** Express `:name` segments as OpenAPI `{name}`. */
export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): Json => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  return rest;
};

/** JSON Schemas of zod schemas by component name, in one registry so shared parts are $refs rather than copies. */
function componentsOf(named: Record<string, z.ZodType>): Record<string, Json> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const out = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'output',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> };
  const schemas: Record<string, Json> = {};
  for (const [id, s] of Object.entries(out.schemas)) {
    const { $schema: _s, $id: _i, ...rest } = s;
    schemas[id] = rest;
  }
  return schemas;
}

/**
 * The component schemas. The vCon and its items are the group's validation mode's (as GET /schema):
 * a group stores what its mode accepts, and every answer that holds a vCon or an item ($refs to
 * these, through StoredVcon) must be described by the document, a leniently stored one included.
 */
function buildComponentSchemas(mode: ValidationMode): Record<string, Json> {
  const schemas = componentsOf(SCHEMAS);
  if (mode === 'strict') return schemas;
  const m = vconSchemas(mode);
  const own = componentsOf({ Vcon: m.Vcon, Party, Dialog: m.Dialog, Analysis: m.Analysis, Attachment: m.Attachment });
  for (const id of ['Vcon', 'Dialog', 'Analysis', 'Attachment']) schemas[id] = { ...own[id], 'x-validation': mode };
  return schemas;
}

const ref = (name: string) => {
  if (!(name in SCHEMAS)) throw new Error(`openapi: no component schema ${name}`);
  return { $ref: `#/components/schemas/${name}` };
};

function buildParameters(route: Operation): Json[] {
  const params: Json[] = [];
  for (const name of route.path.match(/:([A-Za-z0-9_]+)/g)?.map((s) => s.slice(1)) ?? []) {
    const { description, ...schema } = toSchema(PATH_PARAMS[name], 'input');
    params.push({ name, in: 'path', required: true, ...(description ? { description } : {}), schema });
  }
  for (const [name, prop] of Object.entries(route.query?.shape ?? {}) as [string, z.ZodType][]) {
    const { description, ...schema } = toSchema(prop, 'input');
    const p: Json = { name, in: 'query', required: !prop.safeParse(undefined).success };
    if (description) p.description = description;
    if (JSON_PARAMS.has(name)) {
      p.description = [description, 'A JSON object of tag key to value, URL-encoded, e.g. {"status":"open"}.'].filter(Boolean).join('. ');
      p.content = { 'application/json': { schema } };
    } else {
      p.schema = schema;
    }
    params.push(p);
  }
  return params;
}

/** Builds the OpenAPI 3.1 document for this instance's configuration (base path, auth header). */
export function buildOpenApiDocument(config: Config, info: { version: string }): Json {
  const schemas = buildComponentSchemas(config.validation);
  const authRequired = config.auth.required;
  const bearer = config.auth.header === 'authorization';
  const schemeName = bearer ? 'bearerAuth' : 'apiKeyAuth';
  const securitySchemes: Json = bearer
    ? {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'A key from API_KEYS (read-write) or API_KEYS_READONLY (GET only), as Authorization: Bearer <key>',
        },
      }
    : {
        apiKeyAuth: {
          type: 'apiKey',
          in: 'header',
          name: config.auth.header,
          description: `A key from API_KEYS (read-write) or API_KEYS_READONLY (GET only), in the ${config.auth.header} header`,
        },
      };

  const headers = Object.fromEntries(PROVENANCE_HEADERS.map((h) => [h, { $ref: `#/components/headers/${h}` }]));
  const responses: Json = {};
  for (const status of R.ERROR_STATUSES) {
    responses[`Error${status}`] = {
      description: `${ERROR_DESCRIPTIONS[status]}. error: ${ERROR_CODES[status].join(', ')}`,
      headers: status === 401 ? { ...headers, 'WWW-Authenticate': { schema: { type: 'string', const: 'Bearer' } } } : headers,
      content: { 'application/json': { schema: ref(`Error${status}`) } },
    };
  }

  const routes = ROUTES.filter((r) => config.rest.enabled || r.alwaysServed);
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const open = route.scope === 'none';
    const op: Json = { operationId: route.id, tags: [route.tag], summary: route.summary };
    if (route.description) op.description = route.description;
    const parameters = buildParameters(route);
    if (parameters.length) op.parameters = parameters;
    if (route.body) {
      const schema = typeof route.body.schema === 'string' ? ref(route.body.schema) : toSchema(route.body.schema, 'input');
      const media: Json = { schema };
      if (route.body.examples) media.examples = route.body.examples;
      op.requestBody = { required: true, content: Object.fromEntries(JSON_TYPES.map((t) => [t, media])) };
    }
    const out: Json = {};
    for (const [status, reply] of Object.entries(route.replies) as [string, Reply][]) {
      const r: Json = { description: reply.description, headers };
      if (reply.schema) {
        const media: Json = { schema: reply.orSchema ? { anyOf: [ref(reply.schema), ref(reply.orSchema)] } : ref(reply.schema) };
        if (reply.examples) media.examples = reply.examples;
        r.content = { [reply.contentType ?? 'application/json']: media };
      }
      out[status] = r;
    }
    const errors = new Set<ErrorStatus>([...(route.errors ?? []), 500]);
    if (route.body) [400, 413, 415].forEach((s) => errors.add(s as ErrorStatus));
    if (!open) {
      if (authRequired) errors.add(401);
      errors.add(403);
      errors.add(503);
    }
    for (const status of [...errors].sort()) {
      const key = String(status);
      if (out[key]) {
        // A status with both a result and an error body (batch 400): either shape.
        const media = (out[key] as { content: Record<string, Json> }).content['application/json'];
        media.schema = { anyOf: [media.schema, ref(`Error${status}`)] };
      } else {
        out[key] = { $ref: `#/components/responses/Error${status}` };
      }
    }
    op.responses = out;
    if (open) op.security = [];
    paths[toOpenApiPath(route.path)] ??= {};
    paths[toOpenApiPath(route.path)][route.method] = op;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'vCon REST API',
      version: info.version,
      description: [
        'Ingest, read, search, update and delete vCon records (virtual conversation records).',
        'Every error has one body: {"success": false, "error": <code>, "message", "details"?, "hint"?, "request_id"}.',
        `Codes by status: ${R.ERROR_STATUSES.map((s) => `${s} ${ERROR_CODES[s].join('/')}`).join('; ')}.`,
        'A method a path does not serve answers 405 method_not_allowed; an unknown path 404 route_not_found.',
        'Every response carries X-Request-Id, X-Version, X-Git-Commit and X-Build-Time.',
        authRequired ? '' : 'Authentication is disabled on this instance (API_AUTH_REQUIRED=false).',
        config.validation === 'strict'
          ? ''
          : `This group's validation mode is ${config.validation} (VCON_VALIDATION): the Vcon, Dialog, Analysis and Attachment schemas are that mode's, as GET /schema, and each says so in x-validation.`,
      ]
        .filter(Boolean)
        .join('\n\n'),
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: config.rest.basePath || '/', description: 'This instance (relative to the URL this document was read from)' }],
    security: authRequired ? [{ [schemeName]: [] }] : [],
    tags: [
      { name: 'infrastructure', description: 'No authentication' },
      { name: 'vcons', description: 'vCon CRUD, batch, listing and sub-resources' },
      { name: 'tags' },
      { name: 'discovery', description: 'Discover the live attachment purposes and analysis types first, then filter' },
      { name: 'search' },
      { name: 'database' },
      { name: 'analytics' },
      { name: 'changes', description: 'The change log: what was written, in order, as pages or a stream' },
    ],
    paths,
    components: {
      schemas,
      responses,
      securitySchemes,
      headers: Object.fromEntries(PROVENANCE_HEADERS.map((h) => [h, { schema: { type: 'string' } }])),
    },
  };
}

/** The routes of the document, as express paths, for the coverage test. */
export const documentedRoutes = () => ROUTES.map((r) => ({ method: r.method, path: r.path }));

/** Each route's query and body schemas (a component's schema for a named body), for the identity test. */
export const routeSchemas = () =>
  ROUTES.map((r) => ({
    method: r.method,
    path: r.path,
    query: r.query,
    body: r.body && (typeof r.body.schema === 'string' ? SCHEMAS[r.body.schema] : r.body.schema),
  }));

export { PATH_PARAMS };
