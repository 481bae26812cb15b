// Every operation of the REST API and the MCP surface, declared once. From this table
// src/http/routes.ts registers the express routes, src/http/openapi.ts writes the OpenAPI document
// and src/mcp/tools.ts builds the MCP tools: a route, its documentation and its tool cannot
// disagree. Parameters and bodies are the zod schemas of src/domain/params.ts (and documents those
// of domain/vcon.ts), replies those of domain/responses.ts. How to add a parameter or an operation:
// docs/architecture.md "Operations".
import type { Request, Response } from 'express';
import { z } from 'zod';
import { EXAMPLES, EXAMPLE_TYPES } from '../domain/examples.js';
import * as P from '../domain/params.js';
import * as R from '../domain/responses.js';
import type { ErrorStatus } from '../domain/responses.js';
import { Analysis, Attachment, Dialog, EncryptedVcon, Party, SignedVcon, Vcon, withWarnings } from '../domain/vcon.js';
import { BUSY_RETRY_AFTER_S } from '../domain/errors.js';
import type { RequestCtx } from '../services/context.js';
import type { DiscoveryKind } from '../services/discovery-service.js';
import { healthBody } from '../services/health-service.js';
import type { Services } from '../services/index.js';
import type { SubResource } from '../services/vcon-service.js';
import type { BuildInfo } from '../version.js';
import { streamChanges } from './change-stream.js';
import { streamExport } from './export-stream.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The envelope of GET /vcons/:uuid around a stored document's bytes. */
const VCON_OPEN = Buffer.from('{"success":true,"vcon":');
const VCON_CLOSE = Buffer.from('}');

/** The named schemas of the OpenAPI document (its components): name → zod schema. */
export const SCHEMAS = {
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
  ...(Object.fromEntries(R.ERROR_STATUSES.map((s) => [`Error${s}`, R.errorBodyOf(s)])) as unknown as Record<`Error${ErrorStatus}`, z.ZodType>),
  Pagination: R.Pagination,
  HealthOk: R.HealthOk,
  HealthDown: R.HealthDown,
  Liveness: R.Liveness,
  Readiness: R.Readiness,
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
  WebhookList: R.WebhookList,
  WebhookFailedList: R.WebhookFailedList,
  WebhookReplayed: R.WebhookReplayed,
  Done: R.Done,
} satisfies Record<string, z.ZodType>;
export type SchemaName = keyof typeof SCHEMAS;

/** Path parameters (`:name` in a path): the domain schemas each call parses them with. */
export const PATH_PARAMS: Record<string, z.ZodType> = {
  uuid: P.UuidParam,
  key: P.TagKey,
  type: P.ExampleArgs.shape.type,
  endpoint: P.EndpointParam,
  delivery: P.DeliveryParam,
};

/** Query parameters whose value is JSON (OpenAPI `content` instead of `schema`). */
export const JSON_PARAMS = new Set(['tags']);

/** A call's input, the same from REST and MCP: path parameters, query parameters and body, unparsed. */
export interface OpInput {
  path: Record<string, unknown>;
  query: Record<string, unknown>;
  body: unknown;
}

/** What a call needs besides its input and the caller's context. */
export interface OpEnv {
  services: Services;
  buildInfo: BuildInfo;
  /** REST base path, reported by version. */
  basePath: string;
  /** The OpenAPI document as text (REST only: the document is REST's). */
  openapi?: () => string;
}

/** One documented reply of a route: its status's description and body. */
export interface Reply {
  description: string;
  schema?: SchemaName;
  /** Either of two bodies (GET /vcons/:uuid/tags: the map, or one tag with key=). */
  orSchema?: SchemaName;
  contentType?: string;
  examples?: Record<string, { summary?: string; value: unknown }>;
}

/** The tool of an operation on MCP: its arguments are the route's path, body and query parameters. */
export interface ToolSpec {
  name: string;
  title: string;
  /** Written for an AI assistant: what it does, when to use it, what comes back. */
  description: string;
  annotations: { readOnlyHint: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint: false };
  /**
   * The argument that carries the body whole (create_vcon's `vcon`), with what it is for the
   * error when it is missing; without it, the body's fields are arguments themselves (analyze_query).
   */
  bodyArg?: { name: string; what: string };
  /** Only these query parameters, in this order (list_vcons: the paging of GET /vcons). */
  pick?: readonly string[];
}

/** What a custom REST answer gets: the request and response, and the operation's own call. */
export interface RestCall<T> {
  req: Request;
  res: Response;
  input: OpInput;
  ctx: RequestCtx;
  env: OpEnv;
  call: () => Promise<T>;
}

export interface Operation<T = unknown> {
  method: Method;
  /** Express-style path relative to the base path. */
  path: string;
  /** The OpenAPI operationId. */
  id: string;
  tag: string;
  summary: string;
  description?: string;
  /** none: no key needed (infrastructure); read: any key; write: a read-write key (every non-GET). */
  scope: 'none' | 'read' | 'write';
  /** Served when the REST API is disabled too (REST_API_ENABLED=false); others need it. */
  alwaysServed?: true;
  /** Mounted before the admission gate: holds no turn of the pool (the change stream). */
  ungated?: true;
  query?: z.ZodObject;
  /** A component name (the document sent whole) or a domain body schema (documented as input). */
  body?: { schema: SchemaName | z.ZodType; examples?: Record<string, { summary?: string; value: unknown }> };
  replies: Partial<Record<number, Reply>>;
  /** Error statuses of the operation itself; auth, body and 500 errors follow from scope and body. */
  errors?: ErrorStatus[];
  /** The service operations behind it (`group.method`), for the REST/MCP parity test. */
  operations: readonly string[];
  /** The service call: its result is MCP's structured content and, with `success: true`, REST's body. */
  call: (input: OpInput, ctx: RequestCtx, env: OpEnv) => Promise<T>;
  /** REST's answer when it is not 200 with `{success: true, ...result}`. */
  reply?: (result: T, res: Response) => void;
  /** REST's whole answer, for what a result and a reply can't say (a stream, a stored text). */
  rest?: (c: RestCall<T>) => Promise<void>;
  /** The operation as an MCP tool (or two, over different parameters). */
  tools?: readonly ToolSpec[];
}

/** An MCP tool with no REST twin of its shape (manage_tag is PUT and DELETE of a tag in one). */
export interface ToolOnly {
  tool: ToolSpec & {
    /** Arguments, each a domain schema. */
    input: z.ZodRawShape;
    scope: 'read' | 'write';
    operations: readonly string[];
    run: (args: Record<string, unknown>, ctx: RequestCtx, env: OpEnv) => Promise<Record<string, unknown>>;
  };
}

export type Entry = Operation | ToolOnly;

/** Declares an operation, keeping its call's result type for its reply. */
const op = <T>(o: Operation<T>): Operation => o as unknown as Operation;

const READ = { readOnlyHint: true, openWorldHint: false } as const;
const ADD = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;
const OVERWRITE = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false } as const;

/** `?wait_for=search` of the writes: the answer comes after the written vCons are indexed. */
const writeOptions = (query: Record<string, unknown>) => ({ waitFor: P.parseParams(P.WriteQuery, query).wait_for });

/** The request id of a REST answer (set by the first middleware). */
const requestIdOf = (res: Response) => String(res.getHeader('X-Request-Id') ?? '');

const vconExamples = Object.fromEntries(EXAMPLE_TYPES.map((t) => [t, { summary: `Example vCon "${t}"`, value: EXAMPLES[t] }]));

/** POST of one dialog, analysis or attachment: 201 with the index it was stored at. */
function append(section: SubResource, item: 'dialog' | 'analysis' | 'attachment', schema: SchemaName, extra: Partial<Operation>, tool: ToolSpec) {
  return op({
    method: 'post',
    path: `/vcons/:uuid/${section}`,
    tag: 'vcons',
    id: '',
    summary: '',
    scope: 'write',
    body: { schema },
    replies: { 201: { description: 'Appended at index', schema: `${schema}Appended` as SchemaName } },
    errors: [400, 404],
    operations: ['vcons.append'],
    ...extra,
    call: async ({ path, body }, ctx, { services }) => {
      const r = await services.vcons.append(P.parseUuid(path.uuid), section, body, ctx);
      return { uuid: r.uuid, index: r.index, [item]: r.item, ...withWarnings(r.warnings) };
    },
    reply: (r, res) => void res.status(201).json({ success: true, ...r }),
    tools: [{ ...tool, annotations: ADD, bodyArg: { name: item, what: `the ${item} object` } }],
  });
}

const EndpointPath = z.object({ endpoint: P.EndpointParam });
const DeliveryPath = z.object({ delivery: P.DeliveryParam });

/** A webhook POST that changes state: a read-write key's, 400 on a malformed id, 404 on an unknown one. */
const webhookAction = (
  path: string,
  id: string,
  summary: string,
  schema: SchemaName,
  operation: string,
  run: (path: Record<string, unknown>, services: Services) => Promise<Record<string, unknown>>,
) =>
  op({
    method: 'post',
    path,
    id,
    tag: 'changes',
    scope: 'write',
    summary: `${summary}; needs a read-write key`,
    replies: { 200: { description: 'Done', schema } },
    errors: [400, 404],
    operations: [operation],
    call: ({ path }, _ctx, { services }) => run(path, services),
  });

/** A discovery route and tool: the live values of one field with their vCon counts. */
const discovery = (path: string, id: string, summary: string, kind: DiscoveryKind, tool: Omit<ToolSpec, 'annotations'>) =>
  op({
    method: 'get',
    path,
    id,
    tag: 'discovery',
    summary,
    scope: 'read',
    query: P.DiscoveryQuery,
    replies: { 200: { description: 'Values with the number of vCons having each', schema: 'DiscoveryResult' } },
    errors: [400],
    operations: ['discovery.values'],
    call: ({ query }, ctx, { services }) => services.discovery.values(kind, query, ctx),
    tools: [{ ...tool, annotations: READ }],
  });

/** A search route and tool; X-Index-Pending repeats the answer's `index.pending`. */
const search = (
  kind: 'content' | 'semantic' | 'hybrid',
  o: Pick<Operation, 'id' | 'summary' | 'query' | 'replies'>,
  tool: Omit<ToolSpec, 'annotations'>,
) =>
  op({
    method: 'get',
    path: `/vcons/search/${kind}`,
    tag: 'search',
    scope: 'read',
    errors: [400],
    operations: [`search.${kind}`],
    ...o,
    call: async ({ query }, ctx, { services }) => ({ ...(await services.search[kind](query, ctx)) }),
    reply: (r, res) => {
      if (r.index) res.setHeader('X-Index-Pending', String(r.index.pending));
      res.json({ success: true, ...r });
    },
    tools: [{ ...tool, annotations: READ }],
  });

/** A database or analytics figure: `{data}` of this instance's schema. */
const figures = (
  path: string,
  id: string,
  summary: string,
  query: z.ZodObject | undefined,
  operation: `${'database' | 'analytics'}.${string}`,
  run: (services: Services, query: Record<string, unknown>, ctx: RequestCtx) => Promise<unknown>,
  tool: Omit<ToolSpec, 'annotations'>,
) =>
  op({
    method: 'get',
    path,
    id,
    tag: path.startsWith('/analytics') ? 'analytics' : 'database',
    summary,
    scope: 'read',
    query,
    replies: { 200: { description: "Figures of this instance's schema", schema: 'DataResult' } },
    errors: query ? [400] : [],
    operations: [operation],
    call: async ({ query: q }, ctx, { services }) => ({ data: await run(services, q, ctx) }),
    tools: [{ ...tool, annotations: READ }],
  });

/** Every operation, in the order of the OpenAPI document (and of the MCP tool list). */
export const OPERATIONS: readonly Entry[] = [
  // Infrastructure (no key)
  op({
    method: 'get',
    path: '/health',
    id: 'getHealth',
    tag: 'infrastructure',
    scope: 'none',
    alwaysServed: true,
    summary: 'API and database health',
    description: 'Reports the active schema and the instance label. Never reveals database version, host or credentials.',
    replies: {
      200: { description: 'Healthy', schema: 'HealthOk' },
      503: {
        description: 'The database is not reachable (unhealthy) or every connection of the group is in use (busy, with Retry-After)',
        schema: 'HealthDown',
      },
    },
    operations: ['health.check'],
    call: async (_i, _ctx, { services }) => healthBody(await services.health.check()),
    reply: (h, res) => {
      res.setHeader('Cache-Control', 'no-store');
      if (h.status === 'busy') res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_S));
      res.status(h.status === 'healthy' ? 200 : 503).json({ success: h.status === 'healthy', ...h });
    },
    tools: [
      {
        name: 'get_health',
        title: 'Server health',
        description: 'Whether the database is reachable, which schema (group) this server serves, its instance label and uptime.',
        annotations: READ,
      },
    ],
  }),
  // Kubernetes-style probes, REST-only (no tools): /livez answers while the process can answer at
  // all (a database outage must not restart every pod), /readyz says what /health says, in short.
  op({
    method: 'get',
    path: '/livez',
    id: 'getLiveness',
    tag: 'infrastructure',
    scope: 'none',
    alwaysServed: true,
    summary: 'Liveness: the process answers (200 even while the database is down)',
    description: 'For liveness probes: a database outage must not restart the instance. Readiness is /readyz.',
    replies: { 200: { description: 'Alive', schema: 'Liveness' } },
    operations: [],
    call: async () => ({ status: 'alive' as const, uptime_s: Math.round(process.uptime()) }),
    reply: (r, res) => {
      res.setHeader('Cache-Control', 'no-store');
      res.json({ success: true, ...r });
    },
  }),
  op({
    method: 'get',
    path: '/readyz',
    id: 'getReadiness',
    tag: 'infrastructure',
    scope: 'none',
    alwaysServed: true,
    summary: 'Readiness: what /health says about the database, in short',
    replies: {
      200: { description: 'Ready: the database answered', schema: 'Readiness' },
      503: {
        description: 'Not ready: the database is unreachable, refuses the role, or the pool is full (busy, with Retry-After)',
        schema: 'Readiness',
      },
    },
    operations: ['health.check'],
    call: async (_i, _ctx, { services }) => services.health.check(),
    reply: (h, res) => {
      res.setHeader('Cache-Control', 'no-store');
      if (h.state === 'busy') res.setHeader('Retry-After', String(BUSY_RETRY_AFTER_S));
      res.status(h.healthy ? 200 : 503).json({ success: h.healthy, status: h.state, reason: h.reason });
    },
  }),
  op({
    method: 'get',
    path: '/version',
    id: 'getVersion',
    tag: 'infrastructure',
    scope: 'none',
    alwaysServed: true,
    summary: 'Version information',
    replies: { 200: { description: 'Version, commit, build time, base path', schema: 'VersionInfo' } },
    operations: ['version'],
    call: async (_i, _ctx, { buildInfo, basePath }) => ({
      version: buildInfo.version,
      git_commit: buildInfo.gitCommit,
      build_time: buildInfo.buildTime,
      api_base_path: basePath || '/',
    }),
    tools: [
      {
        name: 'get_version',
        title: 'Server version',
        description: 'The version, git commit and build time of this vCon server, and its REST base path.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'get',
    path: '/schema',
    id: 'getVconSchema',
    tag: 'infrastructure',
    scope: 'none',
    summary: 'The vCon JSON Schema (draft 2020-12), generated from the validator',
    replies: { 200: { description: 'JSON Schema document', schema: 'JsonSchemaDocument', contentType: 'application/schema+json' } },
    operations: ['meta.schema'],
    call: async (_i, _ctx, { services }) => services.meta.schema(),
    reply: (schema, res) => void res.type('application/schema+json').send(JSON.stringify(schema)),
    tools: [
      {
        name: 'get_schema',
        title: 'vCon JSON Schema',
        description: 'The JSON Schema (2020-12) of a vCon as this service validates it: what create_vcon and the add_* tools accept.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'get',
    path: '/openapi.json',
    id: 'getOpenApi',
    tag: 'infrastructure',
    scope: 'none',
    summary: 'This OpenAPI 3.1 document',
    replies: { 200: { description: 'OpenAPI document', schema: 'OpenApiDocument' } },
    operations: [],
    call: async (_i, _ctx, { openapi }) => openapi!(),
    reply: (text, res) => void res.type('application/json').send(text),
  }),
  op({
    method: 'get',
    path: '/examples/:type',
    id: 'getExample',
    tag: 'infrastructure',
    scope: 'none',
    summary: "An example vCon by type; each passes the service's own validation",
    replies: {
      200: {
        description: 'The example',
        schema: 'ExampleResult',
        examples: Object.fromEntries(EXAMPLE_TYPES.map((t) => [t, { value: { success: true, type: t, vcon: EXAMPLES[t] } }])),
      },
    },
    errors: [404],
    operations: ['meta.example'],
    call: async ({ path }, _ctx, { services }) => {
      const { type } = P.parseParams(P.ExampleArgs, path);
      return { type, vcon: services.meta.example(type) };
    },
    tools: [
      {
        name: 'get_examples',
        title: 'Example vCons',
        description: `A complete, valid example vCon of one kind (${EXAMPLE_TYPES.join(', ')}), to copy when building a vCon for create_vcon. Returns {type, vcon}.`,
        annotations: READ,
      },
    ],
  }),

  // The change log
  op({
    method: 'get',
    path: '/changes',
    id: 'listChanges',
    tag: 'changes',
    scope: 'read',
    summary: 'A page of the change log, oldest first',
    description:
      'Every committed write of a vCon, once, in cursor order: created, updated (replace, PATCH), appended (dialog, analysis, attachment), tags_changed, deleted. A cursor never skips an entry that commits late. Resume with after=next_cursor.',
    query: P.ChangesQuery,
    replies: { 200: { description: 'A page', schema: 'ChangesPage' } },
    errors: [400, 410],
    operations: ['changes.page'],
    call: async ({ query }, _ctx, { services }) => ({ ...(await services.changes.page(query)) }),
    tools: [
      {
        name: 'list_changes',
        title: 'Read the change log',
        description:
          'What was written to this group, oldest first: each entry has cursor, uuid, kind (created, updated, appended, tags_changed, deleted), ' +
          'time and key_id. Pass after=next_cursor of the previous call to read on; every change appears once, none is skipped. ' +
          'kinds filters (comma-separated). Returns {data, next_cursor, has_more}; read a vCon itself with get_vcon.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'get',
    path: '/changes/stream',
    id: 'streamChanges',
    tag: 'changes',
    scope: 'read',
    ungated: true,
    summary: 'The change log as Server-Sent Events',
    description:
      'First a `ready` event whose id is the start cursor, then one event per change (id: its cursor; data: a ChangeEvent), comment heartbeats, a `retry:` hint, and an `end` event when the server shuts down. Resume with the Last-Event-ID header (wins) or ?after=. A client that does not read is disconnected.',
    query: P.ChangesStreamQuery,
    replies: { 200: { description: 'An event stream', schema: 'ChangeEvent', contentType: 'text/event-stream' } },
    errors: [400, 410],
    operations: ['changes.openStream'],
    // REST-only: a stream is no tool result; MCP reads the log with list_changes.
    call: () => Promise.reject(new Error('GET /changes/stream is answered by its stream')),
    rest: ({ req, res, input, env }) => streamChanges(req, res, input.query, env.services.changes),
  }),

  // Webhooks: REST-only, they are the operator's configuration (WEBHOOK_URLS), not a tool's business.
  op({
    method: 'get',
    path: '/webhooks',
    id: 'listWebhooks',
    tag: 'changes',
    scope: 'read',
    summary: 'The webhook endpoints (WEBHOOK_URLS), their state and delivery counts',
    replies: { 200: { description: 'The endpoints', schema: 'WebhookList' } },
    errors: [],
    operations: ['webhooks.list'],
    call: async (_input, _ctx, { services }) => ({ data: await services.webhooks.list() }),
  }),
  op({
    method: 'get',
    path: '/webhooks/failed',
    id: 'listFailedDeliveries',
    tag: 'changes',
    scope: 'read',
    summary: 'Deliveries whose attempts ran out, newest first',
    query: P.WebhookFailedQuery,
    replies: { 200: { description: 'Failed deliveries', schema: 'WebhookFailedList' } },
    errors: [400],
    operations: ['webhooks.failed'],
    call: async ({ query }, _ctx, { services }) => ({ data: await services.webhooks.failed(query) }),
  }),
  webhookAction(
    '/webhooks/failed/:delivery/replay',
    'replayDelivery',
    'Send a failed delivery again (same webhook-id, a fresh schedule)',
    'WebhookReplayed',
    'webhooks.replayDelivery',
    async (path, s) => ({ replayed: await s.webhooks.replayDelivery(P.parseParams(DeliveryPath, path).delivery) }),
  ),
  webhookAction(
    '/webhooks/:endpoint/replay',
    'replayEndpoint',
    'Send every failed delivery of an endpoint again',
    'WebhookReplayed',
    'webhooks.replayEndpoint',
    async (path, s) => ({ replayed: await s.webhooks.replayEndpoint(P.parseParams(EndpointPath, path).endpoint) }),
  ),
  webhookAction(
    '/webhooks/:endpoint/enable',
    'enableWebhook',
    'Enable a disabled endpoint again: it receives what was written meanwhile',
    'Done',
    'webhooks.enable',
    async (path, s) => {
      await s.webhooks.enable(P.parseParams(EndpointPath, path).endpoint);
      return {};
    },
  ),

  // vCons
  op({
    method: 'post',
    path: '/vcons',
    id: 'createVcon',
    tag: 'vcons',
    scope: 'write',
    summary: 'Create a vCon, or replace the one with the same uuid',
    description: 'The body is the vCon itself. A missing uuid is assigned (v4), a missing created_at set to now.',
    query: P.WriteQuery,
    body: { schema: 'StoredVcon', examples: vconExamples },
    replies: { 201: { description: 'Created', schema: 'Created' }, 200: { description: 'Replaced: the uuid existed', schema: 'Replaced' } },
    errors: [400],
    operations: ['vcons.create'],
    call: async ({ query, body }, ctx, { services }) => {
      const r = await services.vcons.create(body, ctx, writeOptions(query));
      return { uuid: r.uuid, created: r.created, ...withWarnings(r.warnings) };
    },
    reply: (r, res) => void res.status(r.created ? 201 : 200).json({ success: true, ...r }),
    tools: [
      {
        name: 'create_vcon',
        title: 'Create or replace a vCon',
        description:
          'Store a vCon (virtual conversation record: parties, dialog, analysis, attachments). Pass the vCon object itself as `vcon`. ' +
          'A missing uuid is assigned and returned; a missing created_at is set to now. If a vCon with the same uuid exists it is replaced ' +
          '(created: false). Use get_examples for valid shapes. Returns {uuid, created}.',
        annotations: OVERWRITE,
        bodyArg: { name: 'vcon', what: 'the vCon object itself' },
      },
    ],
  }),
  op({
    method: 'post',
    path: '/vcons/batch',
    id: 'createVconBatch',
    tag: 'vcons',
    scope: 'write',
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
    // REST-only by specification: batch ingestion is not a tool.
    operations: ['vcons.batch'],
    call: ({ query, body }, ctx, { services }) => services.vcons.batch(body, ctx, writeOptions(query)),
    reply: (r, res) => {
      if (r.created + r.updated === 0) {
        // Nothing stored: still the batch report, but also a proper error body (one error format).
        res.status(400).json({
          ...r,
          error: 'validation_failed',
          message: `No vCon was stored: all ${r.total} item(s) failed validation (see results)`,
          request_id: requestIdOf(res),
        });
        return;
      }
      res.status(r.failed === 0 ? 201 : 207).json(r);
    },
  }),
  op({
    method: 'get',
    path: '/vcons',
    id: 'listVcons',
    tag: 'vcons',
    scope: 'read',
    summary: 'List vCons, newest first (by latest tag change with tags=)',
    query: P.ListQuery,
    replies: { 200: { description: 'A page of vCons', schema: 'VconList' } },
    errors: [400],
    operations: ['vcons.list'],
    call: ({ query }, ctx, { services }) => services.vcons.list(query, ctx),
    tools: [
      {
        name: 'list_vcons',
        title: 'List vCons',
        description:
          'Page through vCons, newest first. Use limit/offset to page (has_more tells whether another page exists). format=metadata (default) ' +
          'gives uuid, subject, dates and counts; ids_only gives uuids; full gives whole documents. To filter by subject, party, date or tags ' +
          'use search_vcons. Returns {data, pagination: {limit, offset, has_more}}.',
        annotations: READ,
        pick: ['limit', 'offset', 'format'],
      },
      {
        name: 'search_vcons',
        title: 'Find vCons by metadata',
        description:
          'Filter vCons by subject (substring), party name, email or phone (substring), created_at date range (start_date/end_date, ' +
          'YYYY-MM-DD or RFC 3339) and tags (object of key to value; every pair must match). All filters combine with AND. ' +
          'For words inside conversations use search_vcons_content or search_vcons_semantic. Returns {data, pagination}.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'get',
    path: '/vcons/export',
    id: 'exportVcons',
    tag: 'vcons',
    scope: 'read',
    // A stream of the whole group: it takes its pool turn per page, not for its whole length.
    ungated: true,
    summary: 'Every vCon of the group as NDJSON (one stored document per line, in uuid order)',
    description:
      'A stream for backups and moving a tenant: read-only keys may use it. Memory stays constant whatever the size; a cut stream resumes with ?after=<the uuid of the last complete line>. `vcon-launch import` reads the result back.',
    query: P.ExportQuery,
    replies: { 200: { description: 'One vCon per line, each exactly as stored', schema: 'StoredVcon', contentType: 'application/x-ndjson' } },
    errors: [400],
    operations: ['vcons.exportPage'],
    // REST-only: a stream is no tool result; MCP reads vCons with list_vcons and get_vcon.
    call: () => Promise.reject(new Error('GET /vcons/export is answered by its stream')),
    rest: ({ req, res, input, ctx, env }) => streamExport(req, res, input.query, ctx, env.services),
  }),
  op({
    method: 'get',
    path: '/vcons/:uuid',
    id: 'getVcon',
    tag: 'vcons',
    scope: 'read',
    summary: 'Read a vCon',
    query: P.GetVconQuery,
    replies: { 200: { description: 'The vCon as stored (after read hooks)', schema: 'VconResult' } },
    errors: [400, 404],
    operations: ['vcons.get'],
    call: async ({ path, query }, ctx, { services }) => {
      const { format } = P.parseParams(P.GetVconQuery, query);
      return { vcon: await services.vcons.get(P.parseUuid(path.uuid), format, ctx) };
    },
    rest: async ({ res, input, env, call }) => {
      const { format } = P.parseParams(P.GetVconQuery, input.query);
      // The whole document as stored, without parsing it and serialising it again (none when a
      // plugin has read hooks: then the call reads it through them).
      const stored = format === 'full' ? await env.services.vcons.getStored(P.parseUuid(input.path.uuid)) : undefined;
      if (stored === undefined) {
        res.json({ success: true, ...(await call()) });
        return;
      }
      // The stored bytes between the envelope's, as one buffer straight to node: express's send
      // would copy a string body into a Buffer again and write headers and body as two chunks. No
      // ETag is made here, so send has nothing else to do; node drops the body of a HEAD itself.
      const body = Buffer.concat([VCON_OPEN, stored, VCON_CLOSE]);
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.setHeader('Content-Length', body.length);
      res.end(body);
    },
    tools: [
      {
        name: 'get_vcon',
        title: 'Get a vCon',
        description:
          'Read one vCon by uuid. format=full (default) returns the whole stored document; metadata omits dialog, analysis and attachments ' +
          '(cheap for large recordings); summary adds only the analyses of type "summary". Returns {vcon}; vcon_not_found when it does not exist.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'patch',
    path: '/vcons/:uuid',
    id: 'updateVcon',
    tag: 'vcons',
    scope: 'write',
    summary: 'Update subject, extensions, critical',
    query: P.WriteQuery,
    body: { schema: P.VconPatch },
    replies: { 200: { description: 'The full updated vCon', schema: 'VconResult' } },
    errors: [400, 404],
    operations: ['vcons.update'],
    call: async ({ path, query, body }, ctx, { services }) => ({
      vcon: await services.vcons.update(P.parseUuid(path.uuid), body, ctx, writeOptions(query)),
    }),
    tools: [
      {
        name: 'update_vcon',
        title: 'Update vCon metadata',
        description:
          'Change the subject, extensions or critical fields of a vCon (send them in `updates`). Other fields cannot be patched: add content ' +
          'with add_dialog, add_analysis or add_attachment, or replace the whole vCon with create_vcon. Returns the updated {vcon}.',
        annotations: OVERWRITE,
        bodyArg: { name: 'updates', what: 'an object with subject, extensions or critical' },
      },
    ],
  }),
  op({
    method: 'delete',
    path: '/vcons/:uuid',
    id: 'deleteVcon',
    tag: 'vcons',
    scope: 'write',
    summary: 'Delete a vCon and every derived row',
    replies: { 200: { description: 'Deleted', schema: 'Deleted' } },
    errors: [400, 404],
    operations: ['vcons.remove'],
    call: async ({ path }, ctx, { services }) => ({ ...(await services.vcons.remove(P.parseUuid(path.uuid), ctx)) }),
    tools: [
      {
        name: 'delete_vcon',
        title: 'Delete a vCon',
        description:
          'Permanently delete a vCon and everything derived from it (tags, search index, embeddings). Cannot be undone. Returns {uuid, deleted: true}.',
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
    ],
  }),
  append(
    'dialog',
    'dialog',
    'Dialog',
    { id: 'addDialog', summary: 'Append a dialog' },
    {
      name: 'add_dialog',
      title: 'Add a dialog to a vCon',
      description:
        'Append one dialog (a recording, text message, transfer or incomplete call) to a vCon. type is required; party indexes must point ' +
        "into the vCon's parties. Returns {uuid, index, dialog} with the index it was stored at.",
      annotations: ADD,
    },
  ),
  op({
    method: 'get',
    path: '/vcons/:uuid/analysis',
    id: 'getAnalysis',
    tag: 'vcons',
    scope: 'read',
    summary: 'Read the analyses, filtered by type',
    query: P.AnalysisQuery,
    replies: { 200: { description: 'Analyses', schema: 'AnalysisList' } },
    errors: [400, 404],
    operations: ['vcons.getAnalysis'],
    call: async ({ path, query }, ctx, { services }) => {
      const uuid = P.parseUuid(path.uuid);
      const analysis = await services.vcons.getAnalysis(uuid, P.parseParams(P.AnalysisQuery, query).type, ctx);
      return { uuid, count: analysis.length, analysis };
    },
    tools: [
      {
        name: 'get_analysis',
        title: 'Get the analyses of a vCon',
        description:
          'Read the analyses of a vCon, optionally only those of one type (exact match). Call discover_analysis_types first to see which ' +
          'types exist. Returns {uuid, count, analysis}.',
        annotations: READ,
      },
    ],
  }),
  append(
    'analysis',
    'analysis',
    'Analysis',
    {
      id: 'addAnalysis',
      summary: 'Append an analysis',
      description: 'vendor is required, body must be a string, schema_version is refused (use schema).',
    },
    {
      name: 'add_analysis',
      title: 'Add an analysis to a vCon',
      description:
        'Append one analysis (summary, transcript, sentiment, ...) to a vCon. type and vendor are required; body must be a string ' +
        '(serialise structured output as JSON and set encoding "json"); use `schema`, not `schema_version`. Returns {uuid, index, analysis}.',
      annotations: ADD,
    },
  ),
  op({
    method: 'get',
    path: '/vcons/:uuid/attachments',
    id: 'getAttachments',
    tag: 'vcons',
    scope: 'read',
    summary: 'Read the attachments, filtered by purpose and/or legacy type',
    query: P.AttachmentsQuery,
    replies: { 200: { description: 'Attachments', schema: 'AttachmentList' } },
    errors: [400, 404],
    operations: ['vcons.getAttachments'],
    call: async ({ path, query }, ctx, { services }) => {
      const uuid = P.parseUuid(path.uuid);
      const attachments = await services.vcons.getAttachments(uuid, P.parseParams(P.AttachmentsQuery, query), ctx);
      return { uuid, count: attachments.length, attachments };
    },
    tools: [
      {
        name: 'get_attachments',
        title: 'Get the attachments of a vCon',
        description:
          'Read the attachments of a vCon, optionally filtered by purpose (preferred; also matches legacy attachments whose type equals it) ' +
          'and/or legacy type. Call discover_attachment_purposes first to see which purposes exist. Returns {uuid, count, attachments}.',
        annotations: READ,
      },
    ],
  }),
  append(
    'attachments',
    'attachment',
    'Attachment',
    { id: 'addAttachment', summary: 'Append an attachment' },
    {
      name: 'add_attachment',
      title: 'Add an attachment to a vCon',
      description:
        'Append one attachment to a vCon. Classify it with `purpose` (preferred; `type` is the legacy field). For tags use manage_tag ' +
        'instead. Returns {uuid, index, attachment}.',
      annotations: ADD,
    },
  ),

  // Tags and discovery
  op({
    method: 'get',
    path: '/vcons/:uuid/tags',
    id: 'getTags',
    tag: 'tags',
    scope: 'read',
    summary: 'All tags of a vCon, or one with key=',
    query: P.TagsQuery,
    replies: { 200: { description: 'TagMap without key, TagValue with key', schema: 'TagMap', orSchema: 'TagValue' } },
    errors: [400, 404],
    operations: ['tags.get', 'tags.getOne'],
    call: async ({ path, query }, ctx, { services }) => {
      const uuid = P.parseUuid(path.uuid);
      const { key } = P.parseParams(P.TagsQuery, query);
      if (key !== undefined) return { uuid, key, value: await services.tags.getOne(uuid, key, ctx) };
      return { uuid, tags: await services.tags.get(uuid, ctx) };
    },
    tools: [
      {
        name: 'get_tags',
        title: 'Get the tags of a vCon',
        description: "Read the tags (key:value labels) of a vCon as an object, or one tag's value when `key` is given (tag_not_found if absent).",
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'delete',
    path: '/vcons/:uuid/tags',
    id: 'deleteTags',
    tag: 'tags',
    scope: 'write',
    summary: 'Remove every tag',
    replies: { 204: { description: 'Removed' } },
    errors: [400, 404],
    operations: ['tags.removeAll'],
    call: async ({ path }, ctx, { services }) => {
      const uuid = P.parseUuid(path.uuid);
      await services.tags.removeAll(uuid, ctx);
      return { uuid, removed_all: true };
    },
    reply: (_r, res) => void res.status(204).end(),
    tools: [
      {
        name: 'remove_all_tags',
        title: 'Remove all tags of a vCon',
        description: 'Delete every tag of a vCon. Returns {uuid, removed_all: true}.',
        annotations: OVERWRITE,
      },
    ],
  }),
  op({
    method: 'put',
    path: '/vcons/:uuid/tags/:key',
    id: 'setTag',
    tag: 'tags',
    scope: 'write',
    summary: 'Set a tag',
    body: { schema: P.TagPut },
    replies: { 200: { description: 'The stored tag', schema: 'TagValue' } },
    errors: [400, 404],
    operations: ['tags.set'],
    call: async ({ path, body }, ctx, { services }) => {
      const uuid = P.parseUuid(path.uuid);
      return { uuid, ...(await services.tags.set(uuid, path.key as string, P.parseBody(P.TagPut, body).value, ctx)) };
    },
  }),
  op({
    method: 'delete',
    path: '/vcons/:uuid/tags/:key',
    id: 'deleteTag',
    tag: 'tags',
    scope: 'write',
    summary: 'Remove a tag (also when absent)',
    replies: { 204: { description: 'Removed' } },
    errors: [400, 404],
    operations: ['tags.remove'],
    call: ({ path }, ctx, { services }) => services.tags.remove(P.parseUuid(path.uuid), path.key as string, ctx),
    reply: (_r, res) => void res.status(204).end(),
  }),
  {
    // PUT and DELETE of one tag as one tool: the action says which.
    tool: {
      name: 'manage_tag',
      title: 'Set or remove a tag',
      description:
        'Set (action "set", with value) or remove (action "remove") one tag of a vCon. Values are stored as strings; a key may not be empty ' +
        'or contain ":". Setting an existing key replaces its value; removing an absent key succeeds. Returns {uuid, action, key, value?}.',
      annotations: OVERWRITE,
      input: P.ManageTagArgs.shape,
      scope: 'write',
      operations: ['tags.set', 'tags.remove'],
      run: async (args, ctx, { services }) => {
        // Its value is checked by the tag service, as for REST's PUT body.
        const { uuid, action, key } = P.parseParams(P.ManageTagArgs.omit({ value: true }), args);
        if (action === 'remove') {
          await services.tags.remove(uuid, key, ctx);
          return { uuid, action, key };
        }
        return { uuid, action, ...(await services.tags.set(uuid, key, args.value, ctx)) };
      },
    },
  },
  op({
    method: 'get',
    path: '/tags',
    id: 'listTags',
    tag: 'tags',
    scope: 'read',
    summary: 'Unique tag keys and values across the database',
    replies: { 200: { description: 'Keys with their values and counts', schema: 'UniqueTags' } },
    operations: ['tags.unique'],
    call: (_i, ctx, { services }) => services.tags.unique(ctx),
    tools: [
      {
        name: 'get_unique_tags',
        title: 'Discover tags',
        description:
          'List every tag key in use with its values and how many vCons carry each. Use it before search_by_tags. Returns {total_vcons_with_tags, keys}.',
        annotations: READ,
      },
    ],
  }),
  op({
    method: 'get',
    path: '/tags/search',
    id: 'searchTags',
    tag: 'tags',
    scope: 'read',
    summary: 'vCons having every given tag, newest tag change first',
    query: P.TagSearchQuery,
    replies: { 200: { description: 'Matching uuids', schema: 'TagSearchResult' } },
    errors: [400],
    operations: ['tags.search'],
    call: ({ query }, ctx, { services }) => services.tags.search(query, ctx),
    tools: [
      {
        name: 'search_by_tags',
        title: 'Find vCons by tags',
        description:
          'Find the uuids of vCons that have every given tag (object of key to value), most recently tagged first. limit default 50, max 100. ' +
          'Returns {count, uuids, pagination}; read them with get_vcon.',
        annotations: READ,
      },
    ],
  }),
  discovery('/discovery/attachments/purposes', 'discoverAttachmentPurposes', 'Live attachment purposes', 'attachment_purposes', {
    name: 'discover_attachment_purposes',
    title: 'Discover attachment purposes',
    description:
      'List the attachment purposes stored in this database with how many vCons have each. Use it before get_attachments(purpose=...). ' +
      'Returns {total_vcons, count, values: [{value, count}]}.',
  }),
  discovery('/discovery/attachments/types', 'discoverAttachmentTypes', 'Legacy attachment types', 'attachment_types', {
    name: 'discover_attachment_types',
    title: 'Discover legacy attachment types',
    description:
      'List the legacy attachment `type` values in this database (older data without `purpose`). Prefer discover_attachment_purposes. ' +
      'Returns {total_vcons, count, values}.',
  }),
  discovery('/discovery/analysis/types', 'discoverAnalysisTypes', 'Live analysis types', 'analysis_types', {
    name: 'discover_analysis_types',
    title: 'Discover analysis types',
    description:
      'List the analysis types stored in this database (summary, transcript, sentiment, ...) with vCon counts. Use it before ' +
      'get_analysis(type=...). Returns {total_vcons, count, values}.',
  }),

  // Search
  search(
    'content',
    {
      id: 'searchContent',
      summary: 'Keyword (full-text) search',
      query: P.SearchQuery,
      replies: { 200: { description: 'One result per vCon, best first', schema: 'SearchResults' } },
    },
    {
      name: 'search_vcons_content',
      title: 'Keyword search',
      description:
        'Full-text search over subjects, party names and addresses, text dialog and text analysis/attachment bodies (transcripts, summaries). ' +
        'Supports "quoted phrases", OR and -word like a web search box. One result per vCon, best first, with short snippets: ' +
        '{count, results: [{uuid, subject, created_at, score, matches}], pagination}.',
    },
  ),
  search(
    'semantic',
    {
      id: 'searchSemantic',
      summary: 'Embedding similarity search',
      query: P.VectorSearchQuery,
      replies: { 200: { description: 'One result per vCon, best first', schema: 'SearchResults' } },
    },
    {
      name: 'search_vcons_semantic',
      title: 'Semantic search',
      description:
        'Search by meaning (embedding similarity), so "refund" also finds "reimbursement". Optional threshold 0..1. ' +
        'Returns {count, results: [{uuid, subject, created_at, score, matches}], pagination}.',
    },
  ),
  search(
    'hybrid',
    {
      id: 'searchHybrid',
      summary: 'Reciprocal rank fusion of keyword and semantic search',
      query: P.VectorSearchQuery,
      replies: { 200: { description: 'One result per vCon, best first, with both ranks', schema: 'HybridResults' } },
    },
    {
      name: 'search_vcons_hybrid',
      title: 'Hybrid search',
      description:
        'Keyword and semantic search fused by reciprocal rank; the best default when unsure. Each result also carries keyword_rank and ' +
        'semantic_rank. Returns {count, results, pagination}.',
    },
  ),

  // Database and analytics
  figures(
    '/database/shape',
    'getDatabaseShape',
    'Tables, columns, indexes, row estimates, sizes',
    undefined,
    'database.shape',
    (s, _q, ctx) => s.database.shape(ctx),
    {
      name: 'get_database_shape',
      title: 'Database shape',
      description: "Tables, columns, indexes, row estimates and sizes of this instance's schema. Returns {data}.",
    },
  ),
  figures(
    '/database/stats',
    'getDatabaseStats',
    'Scans, cache hit ratio, index usage',
    undefined,
    'database.stats',
    (s, _q, ctx) => s.database.stats(ctx),
    {
      name: 'get_database_stats',
      title: 'Database statistics',
      description: "Performance statistics of this instance's schema: scans, cache hit ratio, index usage. Returns {data}.",
    },
  ),
  figures('/database/size', 'getDatabaseSize', 'Sizes and recommendations', undefined, 'database.size', (s, _q, ctx) => s.database.size(ctx), {
    name: 'get_database_size',
    title: 'Database size',
    description: "Sizes of this instance's tables and indexes, with recommendations. Returns {data}.",
  }),
  figures(
    '/database/health',
    'getDatabaseHealth',
    'Bloat, unused indexes, connections, recommendations',
    undefined,
    'database.health',
    (s, _q, ctx) => s.database.health(ctx),
    {
      name: 'get_database_health',
      title: 'Database health',
      description: "Health metrics of this instance's schema: bloat, unused indexes, connections, with recommendations. Returns {data}.",
    },
  ),
  figures('/analytics', 'getAnalytics', 'The full analytics dashboard', P.AnalyticsQuery, 'analytics.all', (s, q, ctx) => s.analytics.all(q, ctx), {
    name: 'get_analytics',
    title: 'Analytics dashboard',
    description: "All analytics at once: totals, growth, content, tags and attachments, computed from this instance's data. Returns {data}.",
  }),
  figures('/analytics/growth', 'getAnalyticsGrowth', 'Growth trends', P.GrowthQuery, 'analytics.growth', (s, q, ctx) => s.analytics.growth(q, ctx), {
    name: 'get_growth_analytics',
    title: 'Growth analytics',
    description: 'How many vCons were created per day, week or month over the last months_back months. Returns {data}.',
  }),
  figures(
    '/analytics/content',
    'getAnalyticsContent',
    'Dialog, analysis, party and conversation metrics',
    P.DateRangeQuery,
    'analytics.content',
    (s, q, ctx) => s.analytics.content(q, ctx),
    {
      name: 'get_content_analytics',
      title: 'Content analytics',
      description:
        'Dialog, analysis, party and conversation metrics (types, durations, vendors, counts), optionally for a created_at range. Returns {data}.',
    },
  ),
  figures('/analytics/tags', 'getAnalyticsTags', 'Tag analytics', P.TagAnalyticsQuery, 'analytics.tags', (s, q, ctx) => s.analytics.tags(q, ctx), {
    name: 'get_tag_analytics',
    title: 'Tag analytics',
    description: 'Tag usage: the top keys and values and how many vCons carry them. Returns {data}.',
  }),
  figures(
    '/analytics/attachments',
    'getAnalyticsAttachments',
    'Attachment analytics',
    undefined,
    'analytics.attachments',
    (s, q, ctx) => s.analytics.attachments(q, ctx),
    {
      name: 'get_attachment_analytics',
      title: 'Attachment analytics',
      description: 'Attachment usage by purpose, legacy type, encoding and media type, with sizes. Returns {data}.',
    },
  ),
  op({
    method: 'post',
    path: '/database/analyze',
    id: 'analyzeQuery',
    tag: 'database',
    // A POST, so read-only keys may not use it although it never writes; MCP keeps the same rule.
    scope: 'write',
    summary: 'The plan of one read-only SELECT',
    description:
      'EXPLAIN (FORMAT JSON) in a read-only transaction with a statement timeout. Anything but one SELECT or WITH ... SELECT is refused. A POST, so read-only keys get 403.',
    body: {
      schema: P.AnalyzeBody,
      examples: { plan: { value: { query: 'select uuid from vcons order by created_at desc limit 10', analyze: false } } },
    },
    replies: { 200: { description: 'The plan', schema: 'DataResult' } },
    errors: [400],
    operations: ['database.analyze'],
    call: async ({ body }, ctx, { services }) => ({ data: await services.database.analyze(body, ctx) }),
    tools: [
      {
        name: 'analyze_query',
        title: 'Explain a SQL query',
        description:
          "Show the PostgreSQL plan (EXPLAIN, JSON) of one read-only SELECT or WITH ... SELECT statement against this instance's schema; " +
          'analyze=true also runs it (in a read-only transaction with a timeout). Anything else is refused. Requires a read-write key, as on REST. Returns {data}.',
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
    ],
  }),
];

/** The operations with a REST route (every entry but the tool-only ones). */
export const ROUTES: readonly Operation[] = OPERATIONS.filter((e): e is Operation => 'method' in e);
