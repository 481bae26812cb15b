// The response bodies of the REST API (docs/api.md), as zod schemas: the single source the OpenAPI
// document (src/http/openapi.ts) is generated from, and what its response test checks real
// answers against. Envelopes are closed objects (a new key is a contract change); the vCon parts
// inside them are the validator's own open schemas from vcon.ts.
import { z } from 'zod';
import { Analysis, Attachment, Dialog, EncryptedVcon, SignedVcon, Vcon } from './vcon.js';
import { CHANGE_KINDS } from './changes.js';

/** The machine-readable `error` codes per HTTP status (docs/api.md "Envelopes"). */
export const ERROR_CODES = {
  400: ['validation_failed', 'invalid_json', 'invalid_parameter', 'batch_too_large', 'batch_empty', 'paging_cap_exceeded'],
  401: ['unauthorized'],
  403: ['forbidden'],
  404: ['vcon_not_found', 'tag_not_found', 'example_not_found', 'route_not_found', 'webhook_not_found', 'delivery_not_found'],
  405: ['method_not_allowed'],
  // cursor_expired: entries after the cursor were pruned (GET /changes, /changes/stream); the message names the oldest cursor held.
  410: ['cursor_expired'],
  413: ['payload_too_large', 'too_many_elements'],
  415: ['unsupported_media_type'],
  500: ['internal_error'],
  // database_busy: every connection stayed in use past DB_QUEUE_TIMEOUT_MS, or PostgreSQL refused one for capacity (SQLSTATE class 53).
  // embeddings_unavailable: the embedding provider of semantic/hybrid search failed (search routes only).
  // database_timeout: a catalog read (the /database routes) gave up at the statement or lock timeout.
  // database_refused: PostgreSQL refuses the group's role (NOLOGIN, wrong password, role or database missing); the message says which.
  // server_busy: the request bodies this process reads at once would pass BODY_IN_FLIGHT_LIMIT.
  503: [
    'auth_not_configured',
    'database_unavailable',
    'database_refused',
    'database_busy',
    'database_timeout',
    'embeddings_unavailable',
    'server_busy',
  ],
} as const satisfies Record<number, readonly string[]>;

export type ErrorStatus = keyof typeof ERROR_CODES;
export const ERROR_STATUSES = Object.keys(ERROR_CODES).map(Number) as ErrorStatus[];

export const ErrorDetail = z.object({
  path: z.string().describe('JSON path of the problem, e.g. dialog[0].type, or the parameter name'),
  message: z.string(),
});

const errorBody = <C extends readonly [string, ...string[]]>(codes: C) =>
  z.object({
    success: z.literal(false),
    error: z.enum(codes).describe('Machine-readable snake_case code'),
    message: z.string().describe('What failed and where, for people'),
    details: z.array(ErrorDetail).optional().describe('Every problem found (validation failures list all, not just the first)'),
    hint: z.string().optional().describe('How to fix it; only when NODE_ENV is not production'),
    request_id: z.string().optional().describe('Echoes the X-Request-Id response header'),
  });

const ALL_CODES = Object.values(ERROR_CODES).flat() as unknown as readonly [string, ...string[]];

/** The one error format of every route, auth and unknown routes included. */
export const ErrorBody = errorBody(ALL_CODES);

/** The error body of one status, with only that status's codes. */
export const errorBodyOf = (status: ErrorStatus) => errorBody(ERROR_CODES[status] as unknown as readonly [string, ...string[]]);

/** A vCon as stored and returned: plain, or the opaque signed (JWS) or encrypted (JWE) form. */
export const StoredVcon = z.union([Vcon, SignedVcon, EncryptedVcon]);

export const Pagination = z.object({
  limit: z.number().int().min(1).describe('The page size actually used (capped at 100)'),
  offset: z.number().int().min(0).describe('The offset applied'),
  has_more: z.boolean().describe('True only when a further row exists beyond this page'),
});

const ok = z.literal(true);
const Count = z.number().int().min(0);
const UuidString = z.string().describe('vCon UUID (lower-case)');

// Infrastructure

const LastError = z
  .string()
  .nullable()
  .describe('What the last failed attempt came to, in words that name no host ("answered 500", "connection refused"); kept after a success');

export const HealthOk = z.object({
  success: ok,
  status: z.literal('healthy'),
  database: z.literal('connected'),
  schema: z.string().describe('The active database schema of this instance'),
  instance: z.string().nullable().describe('VCON_INSTANCE_LABEL, or null'),
  version: z.string(),
  uptime_s: Count,
  pool: z
    .object({
      size: Count.describe('Connections this instance may open (DB_POOL_MAX or its share of the connection budget): requests + index'),
      requests: Count.describe('Of size, the connections requests take turns on'),
      index: Count.describe("Of size, the index thread's connection (0 with a pool of one: indexing takes turns with requests)"),
      analyze: Count.describe("Beside size, the connections POST /database/analyze may open (its role's CONNECTION LIMIT)"),
      in_use: Count.describe('Requests using the pool now'),
      waiting: Count.describe('Requests waiting for a connection now'),
      connections: Count.nullable().describe('Server connections this instance holds now; null when not measured (busy or down)'),
    })
    .describe("The instance's database pool"),
  bodies: z
    .object({
      limit: Count.describe('BODY_IN_FLIGHT_LIMIT in bytes'),
      in_flight: Count.describe('Bytes of request bodies being read or worked on now'),
      peak: Count.describe('The most bytes in flight at once since start'),
      refused: Count.describe('Bodies refused with server_busy since start'),
    })
    .describe('Request bodies read and worked on at once (REST and MCP)'),
  index: z
    .object({
      pending: Count.describe('Written vCons not yet indexed for search'),
      lag_s: z.number().min(0).describe('Seconds the oldest of them has waited (0 when none)'),
      failing: Count.describe('Queued vCons whose embedding failed (retried with back-off)'),
      thread: z
        .boolean()
        .describe('Whether the background index thread runs now: it starts when there is work and is retired after INDEX_THREAD_IDLE_S without'),
      thread_out_of_heap: Count.describe('Index threads V8 ended for running out of their heap since start (each is replaced)'),
      thread_failed: z
        .boolean()
        .describe('True after the index thread ran out of heap several times in a row: searches then index what they need themselves'),
    })
    .nullable()
    .describe('The search index queue (searches first index what was written before them); null when not measured'),
  reason: z.null().describe('Why the instance is not healthy: null when it is'),
  webhooks: z
    .array(
      z.object({
        id: z.string().describe('The endpoint id (GET /webhooks)'),
        state: z.enum(['active', 'failing', 'throttled', 'disabled']),
        failing_since: z.string().nullable().describe('The first failure since the last success'),
        disabled_at: z.string().nullable(),
        disabled_reason: z.string().nullable().describe('Why a disabled endpoint was disabled (410 Gone, or failing for 5 days)'),
        last_error: LastError,
        last_error_at: z.string().nullable().describe('When that attempt failed'),
      }),
    )
    .nullable()
    .describe('Each webhook endpoint and its state; null without WEBHOOK_URLS or when not measured'),
});
export const HealthDown = HealthOk.extend({
  success: z.literal(false),
  status: z
    .enum(['unhealthy', 'busy'])
    .describe('busy: the database is up but every connection of this group is in use (retry after Retry-After); unhealthy: not reachable'),
  database: z.enum(['error', 'busy']),
  reason: z
    .string()
    .describe(
      "Why: the database refuses the group's role (may not log in, password failed, role or database missing), is not reachable, did not answer in time, or the pool is full. Names no role, host or password.",
    ),
});

export const Liveness = z.object({
  success: ok,
  status: z.literal('alive'),
  uptime_s: Count,
});

export const Readiness = z.object({
  success: z.boolean(),
  status: z.enum(['healthy', 'busy', 'unhealthy']).describe('As /health: ready only when healthy'),
  reason: z.string().nullable().describe('Why not ready (as /health); null when ready'),
});

export const VersionInfo = z.object({
  success: ok,
  version: z.string().describe('The package version'),
  git_commit: z.string(),
  build_time: z.string(),
  api_base_path: z.string(),
});

export const JsonSchemaDocument = z.record(z.string(), z.unknown()).describe('A JSON Schema (draft 2020-12) document');
export const OpenApiDocument = z.record(z.string(), z.unknown()).describe('This OpenAPI 3.1 document');

export const ExampleResult = z.object({ success: ok, type: z.string(), vcon: Vcon });

// vCons

/** What the group's validation mode tolerated in an accepted document (absent when nothing was). */
const Warnings = z
  .array(ErrorDetail)
  .optional()
  .describe('What the validation mode (VCON_VALIDATION) tolerated that strict validation refuses; absent when nothing was');
export const Created = z.object({ success: ok, uuid: UuidString, created: z.literal(true), warnings: Warnings });
export const Replaced = z.object({ success: ok, uuid: UuidString, created: z.literal(false), warnings: Warnings });

/** POST /vcons/batch accepts 1 to this many vCons (docs/api.md); the importer batches by it too. */
export const BATCH_MAX = 100;
export const BatchItem = z.object({
  index: Count.describe('Position in the request array'),
  uuid: z.string().nullable(),
  status: z.union([z.literal(201), z.literal(200), z.literal(400)]).describe('201 created, 200 replaced, 400 rejected'),
  error: z.string().optional().describe('For a rejected item: an error code of the one error format'),
  message: z.string().optional(),
  details: z.array(ErrorDetail).optional(),
  warnings: Warnings,
});
export const BatchResult = z.object({
  success: z.boolean().describe('True when no item failed'),
  total: Count,
  created: Count,
  updated: Count,
  failed: Count,
  results: z.array(BatchItem).describe('One result per item, in input order'),
});
export type BatchItem = z.infer<typeof BatchItem>;
export type BatchResult = z.infer<typeof BatchResult>;

/** 400 when no item was stored: the batch report and the error format in one body. */
export const BatchFailed = BatchResult.extend({
  success: z.literal(false),
  error: z.literal('validation_failed'),
  message: z.string(),
  hint: z.string().optional(),
  request_id: z.string().optional(),
});

export const ListItem = z.object({
  uuid: UuidString,
  subject: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string().nullable(),
  parties_count: Count,
  dialog_count: Count,
  analysis_count: Count,
  attachments_count: Count,
});
export const VconList = z.object({
  success: ok,
  data: z
    .array(z.union([ListItem, StoredVcon, UuidString]))
    .describe('format=metadata (default): list items; format=full: whole vCons; format=ids_only: uuid strings'),
  pagination: Pagination,
});

export const VconResult = z.object({ success: ok, vcon: StoredVcon });
export const Deleted = z.object({ success: ok, uuid: UuidString, deleted: z.literal(true) });

export const AnalysisList = z.object({ success: ok, uuid: UuidString, count: Count, analysis: z.array(Analysis) });
export const AttachmentList = z.object({ success: ok, uuid: UuidString, count: Count, attachments: z.array(Attachment) });

const appended = { success: ok, uuid: UuidString, index: Count.describe('Index of the new item in its array'), warnings: Warnings };
export const DialogAppended = z.object({ ...appended, dialog: Dialog });
export const AnalysisAppended = z.object({ ...appended, analysis: Analysis });
export const AttachmentAppended = z.object({ ...appended, attachment: Attachment });

// The change log

const CursorString = z.string().regex(/^\d+$/).describe('A cursor: a decimal integer string, increasing along the log');
/** One change as a stream event's data: thin, a consumer reads the vCon itself. */
export const ChangeEvent = z.object({
  cursor: CursorString,
  uuid: UuidString,
  kind: z.enum(CHANGE_KINDS),
  time: z.string().describe('When the writing transaction began (RFC 3339, UTC)'),
});
export const ChangeEntry = ChangeEvent.extend({
  key_id: z.string().nullable().describe('The id of the API key that made the change (never the key); null without auth'),
});
export const ChangesPage = z.object({
  success: ok,
  data: z.array(ChangeEntry).describe('Oldest first'),
  next_cursor: CursorString.describe('The `after` of the next request: the last entry, or all read so far when has_more is false'),
  has_more: z.boolean().describe('True when more entries are readable now'),
});

// Webhooks

const Instant = z.string().nullable();
export const WebhookEndpoint = z.object({
  id: z.string().describe('ep_ and 12 hex digits: names the endpoint in the routes below'),
  url: z.string().describe('The URL without credentials or query'),
  state: z.enum(['active', 'failing', 'throttled', 'disabled']),
  failing_since: Instant.describe('The first failure since the last success'),
  throttled_until: Instant.describe('Nothing is sent before this (429, 502, 504 or Retry-After)'),
  disabled_at: Instant,
  disabled_reason: z.string().nullable(),
  last_error: LastError,
  last_error_at: Instant.describe('When that attempt failed'),
  pending: Count.describe('Deliveries waiting for an attempt or in flight'),
  failed: Count.describe('Deliveries whose attempts ran out (GET /webhooks/failed)'),
  delivered: Count.describe('Deliveries answered with a 2xx (kept for 7 days)'),
});
export const WebhookList = z.object({ success: ok, data: z.array(WebhookEndpoint) });
export const WebhookFailedList = z.object({
  success: ok,
  data: z.array(
    z.object({
      id: z.string().describe('The delivery id, its webhook-id header on every attempt'),
      endpoint: z.string(),
      cursor: CursorString,
      uuid: UuidString,
      kind: z.enum(CHANGE_KINDS),
      state: z.literal('failed'),
      attempts: Count,
      last_status: z.number().int().nullable().describe('The last answer, null when none came (timeout, refused)'),
      last_error: z.string().nullable(),
      created_at: z.string(),
      finished_at: z.string().nullable(),
    }),
  ),
});
export const WebhookReplayed = z.object({ success: ok, replayed: Count.describe('Deliveries made pending again') });
export const Done = z.object({ success: ok });

// Tags and discovery

export const TagMap = z.object({ success: ok, uuid: UuidString, tags: z.record(z.string(), z.string()) });
export const TagValue = z.object({ success: ok, uuid: UuidString, key: z.string(), value: z.string() });

const ValueCount = z.object({ value: z.string(), count: Count });
export const UniqueTags = z.object({
  success: ok,
  total_vcons_with_tags: Count,
  keys: z.array(z.object({ key: z.string(), vcon_count: Count, values: z.array(ValueCount) })),
});
export const TagSearchResult = z.object({ success: ok, count: Count, uuids: z.array(UuidString), pagination: Pagination });

export const DiscoveryResult = z.object({
  success: ok,
  total_vcons: Count,
  count: Count,
  values: z
    .array(z.object({ value: z.string(), count: Count.optional().describe('Absent with include_counts=false') }))
    .describe('Ordered by count, then value'),
});

// Search

export const SearchMatch = z.object({
  source: z.enum(['subject', 'party', 'dialog', 'analysis', 'attachment']),
  index: Count,
  snippet: z.string().max(300),
});
export const SearchHit = z.object({
  uuid: UuidString,
  subject: z.string().nullable(),
  created_at: z.string(),
  score: z.number(),
  matches: z.array(SearchMatch),
});
export const HybridHit = SearchHit.extend({
  keyword_rank: z.number().int().min(1).nullable().describe('Rank in the keyword ranking, null when it did not find the vCon'),
  semantic_rank: z.number().int().min(1).nullable().describe('Rank in the semantic ranking, null when it did not find the vCon'),
});
const CorrectedQuery = z
  .string()
  .nullable()
  .optional()
  .describe("Keyword and hybrid search: the query as searched when words found in no vCon were corrected from the group's vocabulary, else null");
export const IndexState = z
  .object({
    pending: Count.describe('vCons written before the search that it could not see yet (also in the X-Index-Pending header)'),
    complete: z.boolean().describe('True when the index held every vCon written before the search'),
  })
  .describe('Whether the answer covers every vCon written before the search: after waiting at most 2 s for the index, a backlog may remain');
export const SearchResults = z.object({
  success: ok,
  corrected_query: CorrectedQuery,
  count: Count,
  results: z.array(SearchHit),
  pagination: Pagination,
  index: IndexState,
});
export const HybridResults = SearchResults.extend({ results: z.array(HybridHit) });

// Database and analytics

export const DataResult = z.object({
  success: ok,
  data: z.record(z.string(), z.unknown()).describe("Figures of this instance's schema only"),
});
