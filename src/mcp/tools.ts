// The MCP tool table: one tool per REST operation (except batch), over the same services and the
// same zod schemas. Names follow vcon-mcp where the meaning matches. Keep in sync with docs/mcp.md.
import { z } from 'zod';
import {
  AnalysisQuery,
  AnalyticsQuery,
  AnalyzeBody,
  AttachmentsQuery,
  ChangesQuery,
  DateRangeQuery,
  DiscoveryQuery,
  ExampleArgs,
  GetVconQuery,
  GrowthQuery,
  ListQuery,
  ManageTagArgs,
  parseParams,
  parseUuid,
  SearchQuery,
  TagAnalyticsQuery,
  TagSearchQuery,
  TagsQuery,
  UuidParam,
  VconPatch,
  VectorSearchQuery,
  WaitFor,
  WriteQuery,
} from '../domain/params.js';
import { Analysis, Attachment, Dialog, withWarnings } from '../domain/vcon.js';
import { ValidationError } from '../domain/errors.js';
import { StoredVcon } from '../domain/responses.js';
import { EXAMPLE_TYPES } from '../domain/examples.js';
import { healthBody } from '../services/health-service.js';
import type { RequestCtx } from '../services/context.js';
import type { Services } from '../services/index.js';
import type { DiscoveryKind } from '../services/discovery-service.js';
import type { BuildInfo } from '../version.js';
import { portableJsonSchema } from './portable-schema.js';

type Args = Record<string, unknown>;

/** What a tool needs besides its arguments and the caller's context. */
export interface ToolEnv {
  services: Services;
  buildInfo: BuildInfo;
  /** REST base path, reported by get_version. */
  basePath: string;
}

export interface ToolDef {
  name: string;
  title: string;
  /** Written for an AI assistant: what it does, when to use it, what comes back. */
  description: string;
  /**
   * Arguments: each one the very schema of src/domain/params.ts (or domain/vcon.ts) that REST uses
   * for the same parameter, and that the services or `run` parse with (tests/unit/params.test.ts).
   */
  input: z.ZodRawShape;
  /** 'write' tools are offered to read-write sessions only. */
  scope: 'read' | 'write';
  annotations: { readOnlyHint: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint: false };
  /** The service operations behind it (`group.method`), for the REST/MCP parity test. */
  operations: readonly string[];
  run(args: Args, ctx: RequestCtx, env: ToolEnv): Promise<Record<string, unknown>>;
}

const READ = { readOnlyHint: true, openWorldHint: false } as const;
const ADD = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;
const OVERWRITE = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false } as const;

const L = ListQuery.shape;
/** manage_tag's target; its value is checked by the tag service, as for REST's PUT body. */
const ManageTagTarget = ManageTagArgs.omit({ value: true });

const searchTool = (name: string, kind: 'content' | 'semantic' | 'hybrid', title: string, description: string): ToolDef => ({
  name,
  title,
  description,
  input: kind === 'content' ? SearchQuery.shape : VectorSearchQuery.shape,
  scope: 'read',
  annotations: READ,
  operations: [`search.${kind}`],
  run: async (args, ctx, env) => ({ ...(await env.services.search[kind](args, ctx)) }),
});

const discoveryTool = (name: string, kind: DiscoveryKind, title: string, description: string): ToolDef => ({
  name,
  title,
  description,
  input: DiscoveryQuery.shape,
  scope: 'read',
  annotations: READ,
  operations: ['discovery.values'],
  run: (args, ctx, env) => env.services.discovery.values(kind, args, ctx),
});

/** Database and analytics results come back as `{data}` like REST, whatever the service returns. */
const asData = (r: unknown): Record<string, unknown> =>
  r && typeof r === 'object' && !Array.isArray(r) && 'data' in r ? (r as Record<string, unknown>) : { data: r };

type Introspection = (services: Services, args: Args, ctx: RequestCtx) => Promise<unknown>;

const introspectionTool = (
  name: string,
  operation: string,
  op: Introspection,
  title: string,
  description: string,
  input: z.ZodRawShape = {},
): ToolDef => ({
  name,
  title,
  description,
  input,
  scope: 'read',
  annotations: READ,
  operations: [operation],
  run: async (args, ctx, env) => asData(await op(env.services, args, ctx)),
});

type Section = 'dialog' | 'analysis' | 'attachments';

/** add_dialog, add_analysis, add_attachment: one append each, answered as {uuid, index, <item>}. */
const appendTool = (
  section: Section,
  item: 'dialog' | 'analysis' | 'attachment',
  schema: z.ZodType,
  title: string,
  description: string,
): ToolDef => ({
  name: `add_${item}`,
  title,
  description,
  input: { uuid: UuidParam, [item]: schema },
  scope: 'write',
  annotations: ADD,
  operations: ['vcons.append'],
  run: async (args, ctx, env) => {
    const uuid = parseUuid(args.uuid);
    const r = await env.services.vcons.append(uuid, section, documentArg(args, item, `the ${item} object`), ctx);
    return { uuid: r.uuid, index: r.index, [item]: r.item, ...withWarnings(r.warnings) };
  },
});

/**
 * A document argument (vcon, updates, dialog, ...): when it is missing the error names it, where the
 * service, which sees only the document, would say "(root): must be an object".
 */
function documentArg(args: Args, name: string, what: string): unknown {
  if (args[name] !== undefined) return args[name];
  const message = `is required: ${what}`;
  throw new ValidationError(`${name}: ${message}`, [{ path: name, message }]);
}

/** wait_for of the write tools, parsed as REST parses `?wait_for=`. */
const writeOptions = (args: Args) => ({ waitFor: parseParams(WriteQuery, { wait_for: args.wait_for }).wait_for });

/** Every tool of the MCP surface. */
export const TOOLS: readonly ToolDef[] = [
  // vCons
  {
    name: 'create_vcon',
    title: 'Create or replace a vCon',
    description:
      'Store a vCon (virtual conversation record: parties, dialog, analysis, attachments). Pass the vCon object itself as `vcon`. ' +
      'A missing uuid is assigned and returned; a missing created_at is set to now. If a vCon with the same uuid exists it is replaced ' +
      '(created: false). Use get_examples for valid shapes. Returns {uuid, created}.',
    input: { vcon: StoredVcon, wait_for: WaitFor },
    scope: 'write',
    annotations: OVERWRITE,
    operations: ['vcons.create'],
    run: async (args, ctx, env) => {
      const r = await env.services.vcons.create(documentArg(args, 'vcon', 'the vCon object itself'), ctx, writeOptions(args));
      return { uuid: r.uuid, created: r.created, ...withWarnings(r.warnings) };
    },
  },
  {
    name: 'get_vcon',
    title: 'Get a vCon',
    description:
      'Read one vCon by uuid. format=full (default) returns the whole stored document; metadata omits dialog, analysis and attachments ' +
      '(cheap for large recordings); summary adds only the analyses of type "summary". Returns {vcon}; vcon_not_found when it does not exist.',
    input: { uuid: UuidParam, format: GetVconQuery.shape.format },
    scope: 'read',
    annotations: READ,
    operations: ['vcons.get'],
    run: async (args, ctx, env) => {
      const { format } = parseParams(GetVconQuery, args);
      return { vcon: await env.services.vcons.get(parseUuid(args.uuid), format, ctx) };
    },
  },
  {
    name: 'list_vcons',
    title: 'List vCons',
    description:
      'Page through vCons, newest first. Use limit/offset to page (has_more tells whether another page exists). format=metadata (default) ' +
      'gives uuid, subject, dates and counts; ids_only gives uuids; full gives whole documents. To filter by subject, party, date or tags ' +
      'use search_vcons. Returns {data, pagination: {limit, offset, has_more}}.',
    input: { limit: L.limit, offset: L.offset, format: L.format },
    scope: 'read',
    annotations: READ,
    operations: ['vcons.list'],
    run: (args, ctx, env) => env.services.vcons.list({ limit: args.limit, offset: args.offset, format: args.format }, ctx),
  },
  {
    name: 'list_changes',
    title: 'Read the change log',
    description:
      'What was written to this group, oldest first: each entry has cursor, uuid, kind (created, updated, appended, tags_changed, deleted), ' +
      'time and key_id. Pass after=next_cursor of the previous call to read on; every change appears once, none is skipped. ' +
      'kinds filters (comma-separated). Returns {data, next_cursor, has_more}; read a vCon itself with get_vcon.',
    input: ChangesQuery.shape,
    scope: 'read',
    annotations: READ,
    operations: ['changes.page'],
    run: async (args, _ctx, env) => ({ ...(await env.services.changes.page(args)) }),
  },
  {
    name: 'search_vcons',
    title: 'Find vCons by metadata',
    description:
      'Filter vCons by subject (substring), party name, email or phone (substring), created_at date range (start_date/end_date, ' +
      'YYYY-MM-DD or RFC 3339) and tags (object of key to value; every pair must match). All filters combine with AND. ' +
      'For words inside conversations use search_vcons_content or search_vcons_semantic. Returns {data, pagination}.',
    input: ListQuery.shape,
    scope: 'read',
    annotations: READ,
    operations: ['vcons.list'],
    run: (args, ctx, env) => env.services.vcons.list(args, ctx),
  },
  {
    name: 'update_vcon',
    title: 'Update vCon metadata',
    description:
      'Change the subject, extensions or critical fields of a vCon (send them in `updates`). Other fields cannot be patched: add content ' +
      'with add_dialog, add_analysis or add_attachment, or replace the whole vCon with create_vcon. Returns the updated {vcon}.',
    input: { uuid: UuidParam, updates: VconPatch, wait_for: WaitFor },
    scope: 'write',
    annotations: OVERWRITE,
    operations: ['vcons.update'],
    run: async (args, ctx, env) => {
      const uuid = parseUuid(args.uuid);
      const updates = documentArg(args, 'updates', 'an object with subject, extensions or critical');
      return { vcon: await env.services.vcons.update(uuid, updates, ctx, writeOptions(args)) };
    },
  },
  {
    name: 'delete_vcon',
    title: 'Delete a vCon',
    description:
      'Permanently delete a vCon and everything derived from it (tags, search index, embeddings). Cannot be undone. Returns {uuid, deleted: true}.',
    input: { uuid: UuidParam },
    scope: 'write',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    operations: ['vcons.remove'],
    run: (args, ctx, env) => env.services.vcons.remove(parseUuid(args.uuid), ctx),
  },
  appendTool(
    'dialog',
    'dialog',
    Dialog,
    'Add a dialog to a vCon',
    'Append one dialog (a recording, text message, transfer or incomplete call) to a vCon. type is required; party indexes must point ' +
      "into the vCon's parties. Returns {uuid, index, dialog} with the index it was stored at.",
  ),
  appendTool(
    'analysis',
    'analysis',
    Analysis,
    'Add an analysis to a vCon',
    'Append one analysis (summary, transcript, sentiment, ...) to a vCon. type and vendor are required; body must be a string ' +
      '(serialise structured output as JSON and set encoding "json"); use `schema`, not `schema_version`. Returns {uuid, index, analysis}.',
  ),
  appendTool(
    'attachments',
    'attachment',
    Attachment,
    'Add an attachment to a vCon',
    'Append one attachment to a vCon. Classify it with `purpose` (preferred; `type` is the legacy field). For tags use manage_tag ' +
      'instead. Returns {uuid, index, attachment}.',
  ),
  {
    name: 'get_analysis',
    title: 'Get the analyses of a vCon',
    description:
      'Read the analyses of a vCon, optionally only those of one type (exact match). Call discover_analysis_types first to see which ' +
      'types exist. Returns {uuid, count, analysis}.',
    input: { uuid: UuidParam, type: AnalysisQuery.shape.type },
    scope: 'read',
    annotations: READ,
    operations: ['vcons.getAnalysis'],
    run: async (args, ctx, env) => {
      const uuid = parseUuid(args.uuid);
      const analysis = await env.services.vcons.getAnalysis(uuid, parseParams(AnalysisQuery, args).type, ctx);
      return { uuid, count: analysis.length, analysis };
    },
  },
  {
    name: 'get_attachments',
    title: 'Get the attachments of a vCon',
    description:
      'Read the attachments of a vCon, optionally filtered by purpose (preferred; also matches legacy attachments whose type equals it) ' +
      'and/or legacy type. Call discover_attachment_purposes first to see which purposes exist. Returns {uuid, count, attachments}.',
    input: { uuid: UuidParam, ...AttachmentsQuery.shape },
    scope: 'read',
    annotations: READ,
    operations: ['vcons.getAttachments'],
    run: async (args, ctx, env) => {
      const uuid = parseUuid(args.uuid);
      const attachments = await env.services.vcons.getAttachments(uuid, parseParams(AttachmentsQuery, args), ctx);
      return { uuid, count: attachments.length, attachments };
    },
  },

  // Discovery
  discoveryTool(
    'discover_attachment_purposes',
    'attachment_purposes',
    'Discover attachment purposes',
    'List the attachment purposes stored in this database with how many vCons have each. Use it before get_attachments(purpose=...). ' +
      'Returns {total_vcons, count, values: [{value, count}]}.',
  ),
  discoveryTool(
    'discover_attachment_types',
    'attachment_types',
    'Discover legacy attachment types',
    'List the legacy attachment `type` values in this database (older data without `purpose`). Prefer discover_attachment_purposes. ' +
      'Returns {total_vcons, count, values}.',
  ),
  discoveryTool(
    'discover_analysis_types',
    'analysis_types',
    'Discover analysis types',
    'List the analysis types stored in this database (summary, transcript, sentiment, ...) with vCon counts. Use it before ' +
      'get_analysis(type=...). Returns {total_vcons, count, values}.',
  ),

  // Tags
  {
    name: 'get_tags',
    title: 'Get the tags of a vCon',
    description: "Read the tags (key:value labels) of a vCon as an object, or one tag's value when `key` is given (tag_not_found if absent).",
    input: { uuid: UuidParam, key: TagsQuery.shape.key },
    scope: 'read',
    annotations: READ,
    operations: ['tags.get', 'tags.getOne'],
    run: async (args, ctx, env) => {
      const uuid = parseUuid(args.uuid);
      const { key } = parseParams(TagsQuery, args);
      if (key !== undefined) return { uuid, key, value: await env.services.tags.getOne(uuid, key, ctx) };
      return { uuid, tags: await env.services.tags.get(uuid, ctx) };
    },
  },
  {
    name: 'manage_tag',
    title: 'Set or remove a tag',
    description:
      'Set (action "set", with value) or remove (action "remove") one tag of a vCon. Values are stored as strings; a key may not be empty ' +
      'or contain ":". Setting an existing key replaces its value; removing an absent key succeeds. Returns {uuid, action, key, value?}.',
    input: ManageTagArgs.shape,
    scope: 'write',
    annotations: OVERWRITE,
    operations: ['tags.set', 'tags.remove'],
    run: async (args, ctx, env) => {
      const { uuid, action, key } = parseParams(ManageTagTarget, args);
      if (action === 'remove') {
        await env.services.tags.remove(uuid, key, ctx);
        return { uuid, action, key };
      }
      return { uuid, action, ...(await env.services.tags.set(uuid, key, args.value, ctx)) };
    },
  },
  {
    name: 'remove_all_tags',
    title: 'Remove all tags of a vCon',
    description: 'Delete every tag of a vCon. Returns {uuid, removed_all: true}.',
    input: { uuid: UuidParam },
    scope: 'write',
    annotations: OVERWRITE,
    operations: ['tags.removeAll'],
    run: async (args, ctx, env) => {
      const uuid = parseUuid(args.uuid);
      await env.services.tags.removeAll(uuid, ctx);
      return { uuid, removed_all: true };
    },
  },
  {
    name: 'get_unique_tags',
    title: 'Discover tags',
    description:
      'List every tag key in use with its values and how many vCons carry each. Use it before search_by_tags. Returns {total_vcons_with_tags, keys}.',
    input: {},
    scope: 'read',
    annotations: READ,
    operations: ['tags.unique'],
    run: (_args, ctx, env) => env.services.tags.unique(ctx),
  },
  {
    name: 'search_by_tags',
    title: 'Find vCons by tags',
    description:
      'Find the uuids of vCons that have every given tag (object of key to value), most recently tagged first. limit default 50, max 100. ' +
      'Returns {count, uuids, pagination}; read them with get_vcon.',
    input: TagSearchQuery.shape,
    scope: 'read',
    annotations: READ,
    operations: ['tags.search'],
    run: (args, ctx, env) => env.services.tags.search({ tags: args.tags, limit: args.limit, offset: args.offset }, ctx),
  },

  // Search
  searchTool(
    'search_vcons_content',
    'content',
    'Keyword search',
    'Full-text search over subjects, party names and addresses, text dialog and text analysis/attachment bodies (transcripts, summaries). ' +
      'Supports "quoted phrases", OR and -word like a web search box. One result per vCon, best first, with short snippets: ' +
      '{count, results: [{uuid, subject, created_at, score, matches}], pagination}.',
  ),
  searchTool(
    'search_vcons_semantic',
    'semantic',
    'Semantic search',
    'Search by meaning (embedding similarity), so "refund" also finds "reimbursement". Optional threshold 0..1. ' +
      'Returns {count, results: [{uuid, subject, created_at, score, matches}], pagination}.',
  ),
  searchTool(
    'search_vcons_hybrid',
    'hybrid',
    'Hybrid search',
    'Keyword and semantic search fused by reciprocal rank; the best default when unsure. Each result also carries keyword_rank and ' +
      'semantic_rank. Returns {count, results, pagination}.',
  ),

  // Database and analytics
  introspectionTool(
    'get_database_shape',
    'database.shape',
    (sv, _a, ctx) => sv.database.shape(ctx),
    'Database shape',
    "Tables, columns, indexes, row estimates and sizes of this instance's schema. Returns {data}.",
  ),
  introspectionTool(
    'get_database_stats',
    'database.stats',
    (sv, _a, ctx) => sv.database.stats(ctx),
    'Database statistics',
    "Performance statistics of this instance's schema: scans, cache hit ratio, index usage. Returns {data}.",
  ),
  introspectionTool(
    'get_database_size',
    'database.size',
    (sv, _a, ctx) => sv.database.size(ctx),
    'Database size',
    "Sizes of this instance's tables and indexes, with recommendations. Returns {data}.",
  ),
  introspectionTool(
    'get_database_health',
    'database.health',
    (sv, _a, ctx) => sv.database.health(ctx),
    'Database health',
    "Health metrics of this instance's schema: bloat, unused indexes, connections, with recommendations. Returns {data}.",
  ),
  {
    name: 'analyze_query',
    title: 'Explain a SQL query',
    description:
      "Show the PostgreSQL plan (EXPLAIN, JSON) of one read-only SELECT or WITH ... SELECT statement against this instance's schema; " +
      'analyze=true also runs it (in a read-only transaction with a timeout). Anything else is refused. Requires a read-write key, as on REST. Returns {data}.',
    input: AnalyzeBody.shape,
    // REST serves it as POST, which read-only keys may not use; MCP keeps the same rule.
    scope: 'write',
    annotations: { readOnlyHint: true, openWorldHint: false },
    operations: ['database.analyze'],
    run: async (args, ctx, env) => asData(await env.services.database.analyze({ query: args.query, analyze: args.analyze }, ctx)),
  },
  introspectionTool(
    'get_analytics',
    'analytics.all',
    (sv, a, ctx) => sv.analytics.all(a, ctx),
    'Analytics dashboard',
    "All analytics at once: totals, growth, content, tags and attachments, computed from this instance's data. Returns {data}.",
    AnalyticsQuery.shape,
  ),
  introspectionTool(
    'get_growth_analytics',
    'analytics.growth',
    (sv, a, ctx) => sv.analytics.growth(a, ctx),
    'Growth analytics',
    'How many vCons were created per day, week or month over the last months_back months. Returns {data}.',
    GrowthQuery.shape,
  ),
  introspectionTool(
    'get_content_analytics',
    'analytics.content',
    (sv, a, ctx) => sv.analytics.content(a, ctx),
    'Content analytics',
    'Dialog, analysis, party and conversation metrics (types, durations, vendors, counts), optionally for a created_at range. Returns {data}.',
    DateRangeQuery.shape,
  ),
  introspectionTool(
    'get_tag_analytics',
    'analytics.tags',
    (sv, a, ctx) => sv.analytics.tags(a, ctx),
    'Tag analytics',
    'Tag usage: the top keys and values and how many vCons carry them. Returns {data}.',
    TagAnalyticsQuery.shape,
  ),
  introspectionTool(
    'get_attachment_analytics',
    'analytics.attachments',
    (sv, a, ctx) => sv.analytics.attachments(a, ctx),
    'Attachment analytics',
    'Attachment usage by purpose, legacy type, encoding and media type, with sizes. Returns {data}.',
  ),

  // Schema, examples, version, health
  {
    name: 'get_schema',
    title: 'vCon JSON Schema',
    description: 'The JSON Schema (2020-12) of a vCon as this service validates it: what create_vcon and the add_* tools accept.',
    input: {},
    scope: 'read',
    annotations: READ,
    operations: ['meta.schema'],
    run: async (_args, _ctx, env) => env.services.meta.schema(),
  },
  {
    name: 'get_examples',
    title: 'Example vCons',
    description: `A complete, valid example vCon of one kind (${EXAMPLE_TYPES.join(', ')}), to copy when building a vCon for create_vcon. Returns {type, vcon}.`,
    input: ExampleArgs.shape,
    scope: 'read',
    annotations: READ,
    operations: ['meta.example'],
    run: async (args, _ctx, env) => {
      const { type } = parseParams(ExampleArgs, args);
      return { type, vcon: env.services.meta.example(type) };
    },
  },
  {
    name: 'get_version',
    title: 'Server version',
    description: 'The version, git commit and build time of this vCon server, and its REST base path.',
    input: {},
    scope: 'read',
    annotations: READ,
    operations: ['version'],
    run: async (_args, _ctx, env) => ({
      version: env.buildInfo.version,
      git_commit: env.buildInfo.gitCommit,
      build_time: env.buildInfo.buildTime,
      api_base_path: env.basePath || '/',
    }),
  },
  {
    name: 'get_health',
    title: 'Server health',
    description: 'Whether the database is reachable, which schema (group) this server serves, its instance label and uptime.',
    input: {},
    scope: 'read',
    annotations: READ,
    operations: ['health.check'],
    run: async (_args, _ctx, env) => {
      return healthBody(await env.services.health.check());
    },
  },
];

const jsonSchemaCache = new WeakMap<z.ZodType, Record<string, unknown>>();

function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  let js = jsonSchemaCache.get(schema);
  if (!js) {
    js = portableJsonSchema(schema);
    jsonSchemaCache.set(schema, js);
  }
  return js;
}

/** One advertised schema per shape: every session registers the same tools. */
const advertisedCache = new WeakMap<z.ZodRawShape, z.ZodObject>();

/**
 * The schema handed to the SDK: it advertises each argument with the JSON Schema of its domain
 * schema, but accepts any value, so that validation happens once, in the domain parsers and
 * services, and failures carry REST's codes (validation_failed, invalid_parameter) instead of
 * the SDK's generic "Input validation error". The properties are given whole as the object's
 * metadata: zod would otherwise fold each argument's `anyOf` of single types back into a `type`
 * array when the SDK converts it.
 */
export function advertisedSchema(shape: z.ZodRawShape): z.ZodObject {
  const cached = advertisedCache.get(shape);
  if (cached) return cached;
  const fields: Record<string, z.ZodType> = {};
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const [key, schema] of Object.entries(shape)) {
    fields[key] = z.unknown().optional();
    properties[key] = jsonSchemaOf(schema as z.ZodType);
    if (!(schema as z.ZodType).safeParse(undefined).success) required.push(key);
  }
  const schema = z.object(fields).meta(required.length ? { properties, required } : { properties });
  advertisedCache.set(shape, schema);
  return schema;
}
