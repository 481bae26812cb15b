// The OpenAPI 3.1 document of the REST API (GET /openapi.json), generated from the zod schemas the
// service validates with (domain/vcon.ts, and domain/params.ts for every query and body parameter)
// and the response schemas of domain/responses.ts, through a route table below. Nothing here
// restates a rule: tests/unit/params.test.ts checks that each parameter is the domain's object.
import { z } from 'zod';
import type { Config } from '../config.js';
import { EXAMPLES, EXAMPLE_TYPES } from '../domain/examples.js';
import * as P from '../domain/params.js';
import * as R from '../domain/responses.js';
import { ERROR_CODES, type ErrorStatus } from '../domain/responses.js';
import { Analysis, Attachment, Dialog, EncryptedVcon, Party, SignedVcon, Vcon, vconSchemas, type ValidationMode } from '../domain/vcon.js';

type Json = Record<string, unknown>;
type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The components every document holds: schema name → zod schema. */
const SCHEMAS: Record<string, z.ZodType> = {
  Vcon,
  Party,
  Dialog,
  Analysis,
  Attachment,
  SignedVcon,
  EncryptedVcon,
  StoredVcon: R.StoredVcon,
  ErrorDetail: R.ErrorDetail,
  Error: R.ErrorBody,
  ...Object.fromEntries(R.ERROR_STATUSES.map((s) => [`Error${s}`, R.errorBodyOf(s)])),
  Pagination: R.Pagination,
  HealthOk: R.HealthOk,
  HealthDown: R.HealthDown,
  VersionInfo: R.VersionInfo,
  JsonSchemaDocument: R.JsonSchemaDocument,
  OpenApiDocument: R.OpenApiDocument,
  ExampleResult: R.ExampleResult,
  Created: R.Created,
  Replaced: R.Replaced,
  BatchItem: R.BatchItem,
  BatchResult: R.BatchResult,
  BatchFailed: R.BatchFailed,
  ListItem: R.ListItem,
  VconList: R.VconList,
  VconResult: R.VconResult,
  Deleted: R.Deleted,
  AnalysisList: R.AnalysisList,
  AttachmentList: R.AttachmentList,
  DialogAppended: R.DialogAppended,
  AnalysisAppended: R.AnalysisAppended,
  AttachmentAppended: R.AttachmentAppended,
  TagMap: R.TagMap,
  TagValue: R.TagValue,
  UniqueTags: R.UniqueTags,
  TagSearchResult: R.TagSearchResult,
  DiscoveryResult: R.DiscoveryResult,
  SearchMatch: R.SearchMatch,
  SearchHit: R.SearchHit,
  HybridHit: R.HybridHit,
  SearchResults: R.SearchResults,
  HybridResults: R.HybridResults,
  DataResult: R.DataResult,
  ChangeEvent: R.ChangeEvent,
  ChangeEntry: R.ChangeEntry,
  ChangesPage: R.ChangesPage,
};
type SchemaName = keyof typeof SCHEMAS & string;

/** Query parameters whose value is JSON (OpenAPI `content` instead of `schema`). */
const JSON_PARAMS = new Set(['tags']);

/** Path parameters: the same domain schemas the routes parse them with. */
export const PATH_PARAMS: Record<string, z.ZodType> = { uuid: P.UuidParam, key: P.TagKey, type: P.ExampleArgs.shape.type };

interface Reply {
  description: string;
  schema?: SchemaName;
  contentType?: string;
  examples?: Record<string, { summary?: string; value: unknown }>;
}

interface Route {
  method: Method;
  /** Express-style path relative to the base path. */
  path: string;
  id: string;
  tag: string;
  summary: string;
  description?: string;
  /** The infrastructure routes that need no key. */
  open?: true;
  query?: z.ZodObject;
  /** A component name (the vCon itself, sent whole) or a domain body schema (documented as input). */
  body?: { schema: SchemaName | z.ZodType; description?: string; examples?: Record<string, { summary?: string; value: unknown }> };
  replies: Partial<Record<number, Reply>>;
  /** Error statuses of the route itself; auth, body and 500 errors are added from `auth` and `body`. */
  errors?: ErrorStatus[];
  /** Routes that exist only when the REST API is enabled. */
  rest?: boolean;
}

const vconExamples = Object.fromEntries(EXAMPLE_TYPES.map((t) => [t, { summary: `Example vCon "${t}"`, value: EXAMPLES[t] }]));

/** Every route under the base path. A test compares this table with the routes express registered. */
const ROUTES: Route[] = [
  // Infrastructure (no authentication)
  {
    method: 'get',
    path: '/health',
    id: 'getHealth',
    tag: 'infrastructure',
    open: true,
    summary: 'API and database health',
    description: 'Reports the active schema and the instance label. Never reveals database version, host or credentials.',
    replies: {
      200: { description: 'Healthy', schema: 'HealthOk' },
      503: {
        description: 'The database is not reachable (unhealthy) or every connection of the group is in use (busy, with Retry-After)',
        schema: 'HealthDown',
      },
    },
  },
  {
    method: 'get',
    path: '/version',
    id: 'getVersion',
    tag: 'infrastructure',
    open: true,
    summary: 'Version information',
    replies: { 200: { description: 'Version, commit, build time, base path', schema: 'VersionInfo' } },
  },
  {
    method: 'get',
    path: '/schema',
    id: 'getVconSchema',
    tag: 'infrastructure',
    open: true,
    rest: true,
    summary: 'The vCon JSON Schema (draft 2020-12), generated from the validator',
    replies: { 200: { description: 'JSON Schema document', schema: 'JsonSchemaDocument', contentType: 'application/schema+json' } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    id: 'getOpenApi',
    tag: 'infrastructure',
    open: true,
    rest: true,
    summary: 'This OpenAPI 3.1 document',
    replies: { 200: { description: 'OpenAPI document', schema: 'OpenApiDocument' } },
  },
  {
    method: 'get',
    path: '/examples/:type',
    id: 'getExample',
    tag: 'infrastructure',
    open: true,
    rest: true,
    summary: "An example vCon by type; each passes the service's own validation",
    replies: {
      200: {
        description: 'The example',
        schema: 'ExampleResult',
        examples: Object.fromEntries(EXAMPLE_TYPES.map((t) => [t, { value: { success: true, type: t, vcon: EXAMPLES[t] } }])),
      },
    },
    errors: [404],
  },

  // The change log
  {
    method: 'get',
    path: '/changes',
    id: 'listChanges',
    tag: 'changes',
    summary: 'A page of the change log, oldest first',
    description:
      'Every committed write of a vCon, once, in cursor order: created, updated (replace, PATCH), appended (dialog, analysis, attachment), tags_changed, deleted. A cursor never skips an entry that commits late. Resume with after=next_cursor.',
    query: P.ChangesQuery,
    replies: { 200: { description: 'A page', schema: 'ChangesPage' } },
    errors: [400, 410],
  },
  {
    method: 'get',
    path: '/changes/stream',
    id: 'streamChanges',
    tag: 'changes',
    summary: 'The change log as Server-Sent Events',
    description:
      'First a `ready` event whose id is the start cursor, then one event per change (id: its cursor; data: a ChangeEvent), comment heartbeats, a `retry:` hint, and an `end` event when the server shuts down. Resume with the Last-Event-ID header (wins) or ?after=. A client that does not read is disconnected.',
    query: P.ChangesStreamQuery,
    replies: { 200: { description: 'An event stream', schema: 'ChangeEvent', contentType: 'text/event-stream' } },
    errors: [400, 410],
  },

  // vCons
  {
    method: 'post',
    path: '/vcons',
    id: 'createVcon',
    tag: 'vcons',
    summary: 'Create a vCon, or replace the one with the same uuid',
    description: 'The body is the vCon itself. A missing uuid is assigned (v4), a missing created_at set to now.',
    query: P.WriteQuery,
    body: { schema: 'StoredVcon', examples: vconExamples },
    replies: { 201: { description: 'Created', schema: 'Created' }, 200: { description: 'Replaced: the uuid existed', schema: 'Replaced' } },
    errors: [400],
  },
  {
    method: 'post',
    path: '/vcons/batch',
    id: 'createVconBatch',
    tag: 'vcons',
    summary: `Create or replace 1 to ${R.BATCH_MAX} vCons; items are independent`,
    query: P.WriteQuery,
    body: {
      schema: P.BatchBody,
      examples: { two: { summary: 'Two example vCons', value: [EXAMPLES.minimal, EXAMPLES.chat] } },
    },
    replies: {
      201: { description: 'Every item stored', schema: 'BatchResult' },
      207: { description: 'Some items stored, some rejected', schema: 'BatchResult' },
      400: {
        description:
          'No item stored (the batch report with error validation_failed), or a bad request (error body: validation_failed, batch_empty, batch_too_large, invalid_json)',
        schema: 'BatchFailed',
      },
    },
  },
  {
    method: 'get',
    path: '/vcons',
    id: 'listVcons',
    tag: 'vcons',
    summary: 'List vCons, newest first (by latest tag change with tags=)',
    query: P.ListQuery,
    replies: { 200: { description: 'A page of vCons', schema: 'VconList' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/vcons/:uuid',
    id: 'getVcon',
    tag: 'vcons',
    summary: 'Read a vCon',
    query: P.GetVconQuery,
    replies: { 200: { description: 'The vCon as stored (after read hooks)', schema: 'VconResult' } },
    errors: [400, 404],
  },
  {
    method: 'patch',
    path: '/vcons/:uuid',
    id: 'updateVcon',
    tag: 'vcons',
    summary: 'Update subject, extensions, critical',
    query: P.WriteQuery,
    body: { schema: P.VconPatch },
    replies: { 200: { description: 'The full updated vCon', schema: 'VconResult' } },
    errors: [400, 404],
  },
  {
    method: 'delete',
    path: '/vcons/:uuid',
    id: 'deleteVcon',
    tag: 'vcons',
    summary: 'Delete a vCon and every derived row',
    replies: { 200: { description: 'Deleted', schema: 'Deleted' } },
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/vcons/:uuid/dialog',
    id: 'addDialog',
    tag: 'vcons',
    summary: 'Append a dialog',
    body: { schema: 'Dialog' },
    replies: { 201: { description: 'Appended at index', schema: 'DialogAppended' } },
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/vcons/:uuid/analysis',
    id: 'getAnalysis',
    tag: 'vcons',
    summary: 'Read the analyses, filtered by type',
    query: P.AnalysisQuery,
    replies: { 200: { description: 'Analyses', schema: 'AnalysisList' } },
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/vcons/:uuid/analysis',
    id: 'addAnalysis',
    tag: 'vcons',
    summary: 'Append an analysis',
    description: 'vendor is required, body must be a string, schema_version is refused (use schema).',
    body: { schema: 'Analysis' },
    replies: { 201: { description: 'Appended at index', schema: 'AnalysisAppended' } },
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/vcons/:uuid/attachments',
    id: 'getAttachments',
    tag: 'vcons',
    summary: 'Read the attachments, filtered by purpose and/or legacy type',
    query: P.AttachmentsQuery,
    replies: { 200: { description: 'Attachments', schema: 'AttachmentList' } },
    errors: [400, 404],
  },
  {
    method: 'post',
    path: '/vcons/:uuid/attachments',
    id: 'addAttachment',
    tag: 'vcons',
    summary: 'Append an attachment',
    body: { schema: 'Attachment' },
    replies: { 201: { description: 'Appended at index', schema: 'AttachmentAppended' } },
    errors: [400, 404],
  },

  // Tags and discovery
  {
    method: 'get',
    path: '/vcons/:uuid/tags',
    id: 'getTags',
    tag: 'tags',
    summary: 'All tags of a vCon, or one with key=',
    query: P.TagsQuery,
    replies: { 200: { description: 'TagMap without key, TagValue with key', schema: 'TagMap' } },
    errors: [400, 404],
  },
  {
    method: 'delete',
    path: '/vcons/:uuid/tags',
    id: 'deleteTags',
    tag: 'tags',
    summary: 'Remove every tag',
    replies: { 204: { description: 'Removed' } },
    errors: [400, 404],
  },
  {
    method: 'put',
    path: '/vcons/:uuid/tags/:key',
    id: 'setTag',
    tag: 'tags',
    summary: 'Set a tag',
    body: { schema: P.TagPut },
    replies: { 200: { description: 'The stored tag', schema: 'TagValue' } },
    errors: [400, 404],
  },
  {
    method: 'delete',
    path: '/vcons/:uuid/tags/:key',
    id: 'deleteTag',
    tag: 'tags',
    summary: 'Remove a tag (also when absent)',
    replies: { 204: { description: 'Removed' } },
    errors: [400, 404],
  },
  {
    method: 'get',
    path: '/tags',
    id: 'listTags',
    tag: 'tags',
    summary: 'Unique tag keys and values across the database',
    replies: { 200: { description: 'Keys with their values and counts', schema: 'UniqueTags' } },
  },
  {
    method: 'get',
    path: '/tags/search',
    id: 'searchTags',
    tag: 'tags',
    summary: 'vCons having every given tag, newest tag change first',
    query: P.TagSearchQuery,
    replies: { 200: { description: 'Matching uuids', schema: 'TagSearchResult' } },
    errors: [400],
  },
  ...(
    [
      ['/discovery/attachments/purposes', 'discoverAttachmentPurposes', 'Live attachment purposes'],
      ['/discovery/attachments/types', 'discoverAttachmentTypes', 'Legacy attachment types'],
      ['/discovery/analysis/types', 'discoverAnalysisTypes', 'Live analysis types'],
    ] as const
  ).map(([path, id, summary]): Route => ({
    method: 'get',
    path,
    id,
    tag: 'discovery',
    summary,
    query: P.DiscoveryQuery,
    replies: { 200: { description: 'Values with the number of vCons having each', schema: 'DiscoveryResult' } },
    errors: [400],
  })),

  // Search
  {
    method: 'get',
    path: '/vcons/search/content',
    id: 'searchContent',
    tag: 'search',
    summary: 'Keyword (full-text) search',
    query: P.SearchQuery,
    replies: { 200: { description: 'One result per vCon, best first', schema: 'SearchResults' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/vcons/search/semantic',
    id: 'searchSemantic',
    tag: 'search',
    summary: 'Embedding similarity search',
    query: P.VectorSearchQuery,
    replies: { 200: { description: 'One result per vCon, best first', schema: 'SearchResults' } },
    errors: [400],
  },
  {
    method: 'get',
    path: '/vcons/search/hybrid',
    id: 'searchHybrid',
    tag: 'search',
    summary: 'Reciprocal rank fusion of keyword and semantic search',
    query: P.VectorSearchQuery,
    replies: { 200: { description: 'One result per vCon, best first, with both ranks', schema: 'HybridResults' } },
    errors: [400],
  },

  // Database and analytics
  ...(
    [
      ['/database/shape', 'getDatabaseShape', 'Tables, columns, indexes, row estimates, sizes', undefined],
      ['/database/stats', 'getDatabaseStats', 'Scans, cache hit ratio, index usage', undefined],
      ['/database/size', 'getDatabaseSize', 'Sizes and recommendations', undefined],
      ['/database/health', 'getDatabaseHealth', 'Bloat, unused indexes, connections, recommendations', undefined],
      ['/analytics', 'getAnalytics', 'The full analytics dashboard', P.AnalyticsQuery],
      ['/analytics/growth', 'getAnalyticsGrowth', 'Growth trends', P.GrowthQuery],
      ['/analytics/content', 'getAnalyticsContent', 'Dialog, analysis, party and conversation metrics', P.DateRangeQuery],
      ['/analytics/tags', 'getAnalyticsTags', 'Tag analytics', P.TagAnalyticsQuery],
      ['/analytics/attachments', 'getAnalyticsAttachments', 'Attachment analytics', undefined],
    ] as const
  ).map(([path, id, summary, query]): Route => ({
    method: 'get',
    path,
    id,
    tag: path.startsWith('/analytics') ? 'analytics' : 'database',
    summary,
    query,
    replies: { 200: { description: "Figures of this instance's schema", schema: 'DataResult' } },
    errors: query ? [400] : [],
  })),
  {
    method: 'post',
    path: '/database/analyze',
    id: 'analyzeQuery',
    tag: 'database',
    summary: 'The plan of one read-only SELECT',
    description:
      'EXPLAIN (FORMAT JSON) in a read-only transaction with a statement timeout. Anything but one SELECT or WITH ... SELECT is refused. A POST, so read-only keys get 403.',
    body: {
      schema: P.AnalyzeBody,
      examples: { plan: { value: { query: 'select uuid from vcons order by created_at desc limit 10', analyze: false } } },
    },
    replies: { 200: { description: 'The plan', schema: 'DataResult' } },
    errors: [400],
  },
];

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

function buildParameters(route: Route): Json[] {
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

  const routes = ROUTES.filter((r) => config.rest.enabled || !r.rest);
  const paths: Record<string, Json> = {};
  for (const route of routes) {
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
        const media: Json = { schema: reply.schema === 'TagMap' ? { anyOf: [ref('TagMap'), ref('TagValue')] } : ref(reply.schema) };
        if (reply.examples) media.examples = reply.examples;
        r.content = { [reply.contentType ?? 'application/json']: media };
      }
      out[status] = r;
    }
    const errors = new Set<ErrorStatus>([...(route.errors ?? []), 500]);
    if (route.body) [400, 413, 415].forEach((s) => errors.add(s as ErrorStatus));
    if (!route.open) {
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
    if (route.open) op.security = [];
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
