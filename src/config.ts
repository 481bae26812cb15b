// The one reader of the environment. Everything else receives a Config.
// Keep in sync with docs/configuration.md and env/example.env.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { packageRoot } from './paths.js';
import { literalHost, privateAddressProblem } from './domain/addresses.js';
import { DEFAULT_MAX_ELEMENTS, VALIDATION_MODES, type ValidationMode } from './domain/vcon.js';

/**
 * The index thread's default nice value (Linux): when the CPU is short, acknowledged writes and reads
 * get it first and indexing takes what is left. 0 shares it evenly (INDEX_THREAD_NICE; docs/configuration.md).
 */
export const DEFAULT_INDEX_THREAD_NICE = 10;

const RESERVED_SCHEMAS = new Set(['extensions', 'information_schema']);

/** A PostgreSQL schema name we are willing to put on a search_path: lower-case, unquoted-safe. */
export const SchemaName = z
  .string()
  .regex(/^[a-z_][a-z0-9_]*$/, 'must be a PostgreSQL identifier: lower-case letters, digits and _, not starting with a digit')
  .max(63, 'must be at most 63 characters (PostgreSQL identifier limit)')
  .refine((s) => !s.startsWith('pg_') && !RESERVED_SCHEMAS.has(s), 'is reserved (pg_*, extensions, information_schema)');

const bool = (def: boolean) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return def;
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      ctx.addIssue({ code: 'custom', message: `must be true or false, got "${v}"` });
      return z.NEVER;
    });

/** A group's pool towards PostgreSQL directly (DB_POOL_MAX unset; the launcher's budget may give less). */
export const DEFAULT_POOL_MAX = 10;
/**
 * A group's pool towards PgBouncer (DB_POOL_MAX unset with DB_POOLER=pgbouncer). Client
 * connections to PgBouncer are cheap and the wait for a server connection happens in PgBouncer's
 * queue, so the pool is sized above the concurrent requests a group sees: with 10 (9 turns beside
 * the index thread's connection) the 10th of 10 busy clients waited for a turn past
 * DB_QUEUE_TIMEOUT_MS and got database_busy (density bench, 50 groups through PgBouncer: 5).
 */
export const PGBOUNCER_POOL_MAX = 20;
/**
 * Connections of a group's analyze role when nothing sets DB_ANALYZE_CONNECTIONS: the CONNECTION
 * LIMIT `provision` gives the role (the launcher sets the variable to the role's budgeted limit).
 */
export const DEFAULT_ANALYZE_CONNECTIONS = 4;

/**
 * How one process's database connections divide; computed here only, and shown by /health, the
 * launcher's `check` and `status`. DB_POOL_MAX is the request pool plus the index thread's one
 * connection (with a pool of one there is no thread: indexing takes turns on the request pool);
 * analyze opens its own connections, one per call as the analyze role, beside DB_POOL_MAX.
 */
export interface PoolSplit {
  /** DB_POOL_MAX: what the process's pools may hold together. */
  size: number;
  /** Connections requests take turns on. */
  requests: number;
  /** The index thread's connection (0 or 1). */
  index: number;
  /** The analyze role's connections (its CONNECTION LIMIT), outside `size`. */
  analyze: number;
}

/** Splits a pool of `size` connections (see PoolSplit). */
export function splitPool(size: number, analyze: number): PoolSplit {
  const index = size >= 2 ? 1 : 0;
  return { size, requests: size - index, index, analyze };
}

/** The most processes one group may run (VCON_REPLICAS, --replicas). */
export const MAX_REPLICAS = 64;

/** The smallest VCON_MEMORY_LIMIT: an idle group's process is ~100 MB, and one largest body costs several times its size. */
const MIN_MEMORY_LIMIT = 256 * 1024 ** 2;

const int = (def: number, min: number, max: number) =>
  z
    .string()
    .trim()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return def;
      if (!/^-?\d+$/.test(v)) {
        ctx.addIssue({ code: 'custom', message: `must be an integer, got "${v}"` });
        return z.NEVER;
      }
      const n = Number(v);
      if (n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: `must be between ${min} and ${max}, got ${n}` });
        return z.NEVER;
      }
      return n;
    });

const list = z
  .string()
  .optional()
  .transform((v) =>
    (v ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** Why a WEBHOOK_URLS entry is unusable (undefined: it is usable). */
function webhookUrlProblem(u: string): string | undefined {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  return undefined;
}

/** Why a WEBHOOK_SECRET is unusable: Standard Webhooks' whsec_ and base64 of 24 to 64 bytes. */
function webhookSecretProblem(v: string): string | undefined {
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(v);
  const bytes = m ? Buffer.from(m[1], 'base64').length : 0;
  if (!m || bytes < 24 || bytes > 64) return 'must be whsec_ followed by the base64 of 24 to 64 random bytes (e.g. whsec_$(openssl rand -base64 32))';
  return undefined;
}

/** Whether a URL's host is an IP literal of a private, loopback or link-local address. */
function privateLiteralHost(u: string): boolean {
  const host = literalHost(new URL(u));
  return host !== undefined && privateAddressProblem(host) !== undefined;
}

const dbUrl = optionalString.refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL');

const byteSize = (def: string) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v, ctx) => {
      const m = /^(\d+)\s*(b|kb|mb|gb)?$/.exec(v || def);
      if (!m) {
        ctx.addIssue({ code: 'custom', message: `must be a size like 20mb or 512kb, got "${v}"` });
        return z.NEVER;
      }
      const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b') as 'b'];
      return Number(m[1]) * unit;
    });

/** The environment variables we read, with their defaults (docs/configuration.md and env/example.env list them). */
export const EnvSchema = z.object({
  REST_API_ENABLED: bool(true),
  REST_API_BASE_PATH: z
    .string()
    .optional()
    .transform((v) => (v ?? '/api/v1').trim().replace(/\/+$/, '') || '')
    .refine((v) => v === '' || /^\/[A-Za-z0-9._~\-/]*$/.test(v), 'must start with / and contain only URL path characters'),
  REST_API_BODY_LIMIT: byteSize('20mb'),
  // Bytes of request bodies one process reads and works on at once (REST and MCP together).
  BODY_IN_FLIGHT_LIMIT: byteSize('64mb'),
  // JSON values one request body or one stored vCon may hold (objects, arrays, strings, numbers...).
  VCON_MAX_ELEMENTS: int(DEFAULT_MAX_ELEMENTS, 1_000, 100_000_000),
  // How long a complete answer may wait for its client to take it before the connection is closed.
  SEND_TIMEOUT_MS: int(60_000, 100, 3_600_000),
  // The process's memory ceiling: its V8 heap limit (launcher) and the exported container limit.
  VCON_MEMORY_LIMIT: byteSize('512mb'),
  MCP_TRANSPORT: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => v || 'stdio')
    .pipe(z.enum(['stdio', 'http'], { message: 'must be stdio or http' })),
  MCP_HTTP_HOST: z
    .string()
    .optional()
    .transform((v) => v?.trim() || '127.0.0.1'),
  MCP_HTTP_PORT: int(3000, 0, 65535),
  MCP_READONLY: bool(false),
  MCP_HTTP_STATELESS: bool(false),
  MCP_MAX_SESSIONS: int(1000, 1, 100_000),
  MCP_SESSIONS_PER_KEY: int(100, 1, 100_000),
  MCP_SESSIONS_PER_READONLY_KEY: int(20, 1, 100_000),
  MCP_MAX_SUBSCRIPTIONS: int(1000, 1, 1_000_000),
  CORS_ORIGIN: z
    .string()
    .optional()
    .transform((v) => v?.trim() || '*')
    .transform((v) =>
      v === '*'
        ? ('*' as const)
        : v
            .split(',')
            .map((s) => s.trim().replace(/\/+$/, ''))
            .filter(Boolean),
    )
    .refine(
      (v) => v === '*' || v.every((o) => /^https?:\/\/[^\s/]+$/.test(o)),
      'must be * or a comma-separated list of origins like https://app.example.com',
    ),
  API_KEYS: list,
  API_KEYS_READONLY: list,
  API_KEY_HEADER: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'authorization').toLowerCase())
    .refine((v) => /^[a-z0-9-]+$/.test(v), 'must be an HTTP header name'),
  API_AUTH_REQUIRED: bool(true),
  // A key that may read GET /metrics only (a scraper's), beside the group's own keys.
  METRICS_KEY: optionalString.refine((v) => v === undefined || v.length >= 16, "must be at least 16 characters (a scraper's secret)"),
  SUPABASE_DB_SCHEMA: z
    .string()
    .optional()
    .transform((v) => v?.trim() || 'public')
    .pipe(SchemaName),
  DATABASE_URL: dbUrl,
  SUPABASE_DB_URL: dbUrl,
  // Set by vcon-launch: the group's own role replaces the URL's user (also on the embedded database).
  DATABASE_USER: optionalString,
  DATABASE_PASSWORD: optionalString,
  // The further restricted role POST /database/analyze connects as (SELECT on this schema only).
  ANALYZE_DATABASE_USER: optionalString,
  ANALYZE_DATABASE_PASSWORD: optionalString,
  // -1: not set (DEFAULT_POOL_MAX, or PGBOUNCER_POOL_MAX behind PgBouncer).
  DB_POOL_MAX: int(-1, 1, 200),
  DB_ANALYZE_CONNECTIONS: int(DEFAULT_ANALYZE_CONNECTIONS, 0, 200),
  DB_IDLE_TIMEOUT_S: int(5, 1, 3600),
  INDEX_THREAD_IDLE_S: int(30, 1, 3600),
  INDEX_THREAD_NICE: int(DEFAULT_INDEX_THREAD_NICE, 0, 19),
  // 0: the index thread's share of VCON_MEMORY_LIMIT (heapLimitsMiB).
  INDEX_THREAD_HEAP_MB: int(0, 0, 65536),
  DB_QUEUE_TIMEOUT_MS: int(5_000, 0, 600_000),
  DB_POOLER: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => v || 'none')
    .pipe(z.enum(['none', 'pgbouncer'], { message: 'must be none or pgbouncer' })),
  // -1: not set (the launcher then keeps a tenth of max_connections, 3 to 10).
  DB_RESERVED_CONNECTIONS: int(-1, 0, 10_000),
  ENV_FILE: optionalString,
  VCON_INSTANCE_LABEL: optionalString,
  VCON_DATA_DIR: optionalString,
  VCON_PLUGINS_PATH: list,
  NODE_ENV: z
    .string()
    .optional()
    .transform((v) => v?.trim() || 'development'),
  // Detached groups' log files (instances/<group>.log): rotated past this size, this many kept (0: never rotated).
  VCON_LOG_MAX_SIZE: byteSize('20mb'),
  VCON_LOG_KEEP: int(5, 1, 100),
  // Set by vcon-launch on detached groups: a descriptor of the group's log file, written when the supervisor's pipe closes.
  VCON_LOG_FALLBACK_FD: int(-1, -1, 1023),
  LOG_LEVEL: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => v || 'info')
    .pipe(
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
        message: 'must be one of fatal, error, warn, info, debug, trace, silent',
      }),
    ),
  EMBEDDINGS_PROVIDER: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => v || 'glove')
    .pipe(z.enum(['glove', 'hashing', 'openai'], { message: 'must be glove, hashing or openai' })),
  EMBEDDINGS_URL: optionalString,
  EMBEDDINGS_MODEL: optionalString,
  EMBEDDINGS_API_KEY: optionalString,
  EMBEDDINGS_DIMENSIONS: int(0, 0, 8192),
  SHUTDOWN_TIMEOUT_MS: int(10_000, 100, 600_000),
  // How many processes serve this group (the launcher's --replicas default, the exported Deployment's replicas).
  VCON_REPLICAS: int(1, 1, MAX_REPLICAS),
  // Set by vcon-launch on each process of a group with several replicas: its number (0: not a replica).
  VCON_REPLICA: int(0, 0, MAX_REPLICAS),
  STATEMENT_TIMEOUT_MS: int(30_000, 100, 3_600_000),
  // How long the change log keeps an entry (GET /changes); older ones are pruned in the background.
  CHANGES_RETENTION_HOURS: int(168, 1, 87_600),
  // Webhooks (docs/webhooks.md): where every change of the group is POSTed, and the signing secret.
  WEBHOOK_URLS: list.superRefine((urls, ctx) => {
    for (const u of urls) {
      const problem = webhookUrlProblem(u);
      if (problem) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(u)} ${problem}` });
    }
    if (new Set(urls).size !== urls.length) ctx.addIssue({ code: 'custom', message: 'lists a URL twice' });
  }),
  WEBHOOK_SECRET: optionalString.superRefine((v, ctx) => {
    const problem = v === undefined ? undefined : webhookSecretProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  WEBHOOK_ALLOW_PRIVATE: bool(false),
  VCON_VALIDATION: z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => v || 'strict')
    .pipe(z.enum(VALIDATION_MODES, { message: `must be one of ${VALIDATION_MODES.join(', ')}` })),
});

export type EnvInput = Record<string, string | undefined>;

/** Variables that hold keys or passwords: kept out of process environments and plain manifests. */
export const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  'API_KEYS',
  'API_KEYS_READONLY',
  'DATABASE_URL',
  'SUPABASE_DB_URL',
  'DATABASE_PASSWORD',
  'ANALYZE_DATABASE_PASSWORD',
  'EMBEDDINGS_API_KEY',
  'METRICS_KEY',
  'WEBHOOK_SECRET',
]);

/**
 * The settings a running instance takes without a restart (`vcon-launch reload`): its keys. Every
 * other variable is read once, at start.
 */
export const RELOADABLE_VARIABLES = ['API_KEYS', 'API_KEYS_READONLY', 'METRICS_KEY'] as const;

/** The keys of an environment, validated as at start; throws ConfigError naming every bad one. */
export function parseKeys(env: EnvInput): Pick<Config['auth'], 'keys' | 'readOnlyKeys'> & { metricsKey: string | undefined } {
  const parsed = EnvSchema.pick({ API_KEYS: true, API_KEYS_READONLY: true, METRICS_KEY: true }).safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => ({ variable: String(i.path[0] ?? '(environment)'), message: i.message })));
  }
  return { keys: parsed.data.API_KEYS, readOnlyKeys: parsed.data.API_KEYS_READONLY, metricsKey: parsed.data.METRICS_KEY };
}

export interface Config {
  nodeEnv: string;
  production: boolean;
  logLevel: string;
  /**
   * The log file of a detached group (written by its supervisor): rotated past `maxBytes` (0:
   * never), `keep` rotated files kept; `fallbackFd` is where the process itself writes its log
   * lines once its supervisor is gone (undefined: only stderr).
   */
  logs: { maxBytes: number; keep: number; fallbackFd: number | undefined };
  label: string | null;
  envFile: string | undefined;
  dataDir: string;
  rest: { enabled: boolean; basePath: string; bodyLimit: number };
  mcp: {
    transport: 'stdio' | 'http';
    host: string;
    port: number;
    readOnly: boolean;
    /** Streamable HTTP without sessions: every POST stands alone, so any replica can answer it. */
    stateless: boolean;
    /** Open HTTP sessions of the instance, of one read-write key, of one read-only key. */
    maxSessions: number;
    sessionsPerKey: number;
    sessionsPerReadOnlyKey: number;
    /** Resources one session may be subscribed to at once (resources/subscribe). */
    maxSubscriptions: number;
  };
  cors: { origins: '*' | string[] };
  /** `keys` and `readOnlyKeys` (and `metrics.key`) are replaced whole by a reload; readers look them up on each request. */
  auth: { required: boolean; keys: string[]; readOnlyKeys: string[]; header: string };
  /** GET /metrics: METRICS_KEY, accepted there beside the group's keys. */
  metrics: { key: string | undefined };
  db: {
    url: string | undefined;
    /** Replace the URL's user and password (the group's role). */
    user: string | undefined;
    password: string | undefined;
    /** The role analyze connects as; undefined: the pool's own identity, on a fresh connection. */
    analyze: { user: string; password: string | undefined } | undefined;
    schema: string;
    /** DB_POOL_MAX (size) and how it divides between requests and the index thread, with the analyze connections beside it. */
    pool: PoolSplit;
    /** Seconds an unused pooled connection is kept before it is closed. */
    idleTimeoutS: number;
    /** Seconds the index thread may stay without work before it is retired (with its connection). */
    indexThreadIdleS: number;
    /** The index thread's nice value on Linux (0: the process's priority). */
    indexThreadNice: number;
    /** The index thread's old-generation heap (MiB); 0: its share of VCON_MEMORY_LIMIT. */
    indexThreadHeapMb: number;
    /** How long a request waits for a pooled connection before database_busy. */
    queueTimeoutMs: number;
    /** pgbouncer: transaction pooling in front (no startup parameters, no named prepared statements). */
    pooler: 'none' | 'pgbouncer';
    /** Launcher only: connections of the server kept free for operators, migrations and provision. */
    reservedConnections: number | undefined;
    statementTimeoutMs: number;
  };
  plugins: string[];
  embeddings: {
    provider: 'glove' | 'hashing' | 'openai';
    url: string | undefined;
    model: string | undefined;
    apiKey: string | undefined;
    dimensions: number;
  };
  limits: {
    /** Bytes of request bodies read and worked on at once; a body over it is refused with server_busy. */
    bodyInFlight: number;
    /** JSON values one request body or one vCon may hold. */
    maxElements: number;
    /** How long an ended answer may wait for its client to take it. */
    sendTimeoutMs: number;
    /** The process's memory ceiling in bytes (heap limit of a launched child, the exported container limit). */
    memory: number;
  };
  shutdownTimeoutMs: number;
  /** Processes that serve this group at once (read by the launcher and export, not by the server). */
  replicas: number;
  /** Which replica this process is (VCON_REPLICA, set by the launcher); null when it is not one of several. */
  replica: number | null;
  /** The change log: how long an entry is kept (CHANGES_RETENTION_HOURS). */
  changes: { retentionHours: number };
  /** What the group's documents may be (docs/configuration.md "Validation modes"). */
  validation: ValidationMode;
  /** Where the group's changes are POSTed (docs/webhooks.md); none when `urls` is empty. */
  webhooks: { urls: string[]; secret: string | undefined; allowPrivate: boolean };
}

/** Thrown when the environment is invalid; lists every bad variable. */
export class ConfigError extends Error {
  constructor(readonly problems: { variable: string; message: string }[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p.variable}: ${p.message}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Merges the file named by ENV_FILE under the given environment: variables already set win
 * (dotenv's "never override"). Parsing only; nothing is written to process.env.
 */
export function readEnvironment(env: EnvInput = process.env, cwd = process.cwd()): EnvInput {
  const file = env.ENV_FILE?.trim();
  if (!file) return { ...env };
  let text: string;
  try {
    text = readFileSync(path.resolve(cwd, file), 'utf8');
  } catch (err) {
    throw new ConfigError([{ variable: 'ENV_FILE', message: `cannot read ${file}: ${(err as Error).message}` }]);
  }
  return { ...parseDotenv(text), ...env };
}

/**
 * The V8 heaps of a process whose memory ceiling is VCON_MEMORY_LIMIT: three quarters of it for
 * the heaps, the rest for what lives outside them (request and response buffers, the code, native
 * memory). The index thread has a heap of its own (a worker's heap is not the process's
 * --max-old-space-size): it gets a fifth of the heaps' share, its young generation included, and
 * the request thread the rest, so that both together stay within the ceiling.
 */
export function heapLimitsMiB(memoryBytes: number): { main: number; indexOld: number; indexYoung: number } {
  const heaps = Math.floor((memoryBytes / 1024 ** 2) * 0.75);
  const indexYoung = 8;
  const indexOld = Math.floor(heaps / 5) - indexYoung;
  return { main: heaps - indexOld - indexYoung, indexOld, indexYoung };
}

/** The request thread's V8 heap limit (MiB, for --max-old-space-size) under VCON_MEMORY_LIMIT. */
export const heapLimitMiB = (memoryBytes: number): number => heapLimitsMiB(memoryBytes).main;

/** VCON_MEMORY_LIMIT of an environment, in bytes (the default when unset). */
export const memoryLimitOf = (env: EnvInput): number => EnvSchema.shape.VCON_MEMORY_LIMIT.parse(env.VCON_MEMORY_LIMIT);

/** Validates an environment into a Config, or throws ConfigError naming every bad variable. */
export function parseConfig(env: EnvInput): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => ({ variable: String(i.path[0] ?? '(environment)'), message: i.message })));
  }
  const e = parsed.data;
  if (e.BODY_IN_FLIGHT_LIMIT < e.REST_API_BODY_LIMIT) {
    throw new ConfigError([
      {
        variable: 'BODY_IN_FLIGHT_LIMIT',
        message: `must be at least REST_API_BODY_LIMIT (${e.REST_API_BODY_LIMIT} bytes), or a body of the largest size could never be read`,
      },
    ]);
  }
  if (e.VCON_MEMORY_LIMIT < MIN_MEMORY_LIMIT) {
    throw new ConfigError([{ variable: 'VCON_MEMORY_LIMIT', message: `must be at least 256mb, got ${e.VCON_MEMORY_LIMIT} bytes` }]);
  }
  if (e.EMBEDDINGS_PROVIDER === 'openai' && !e.EMBEDDINGS_URL && !e.EMBEDDINGS_API_KEY) {
    throw new ConfigError([
      { variable: 'EMBEDDINGS_URL', message: 'the openai provider needs EMBEDDINGS_URL (or EMBEDDINGS_API_KEY for api.openai.com)' },
    ]);
  }
  if (e.WEBHOOK_URLS.length > 0 && !e.WEBHOOK_SECRET) {
    throw new ConfigError([
      {
        variable: 'WEBHOOK_SECRET',
        message: 'WEBHOOK_URLS is set: deliveries are signed with WEBHOOK_SECRET (whsec_ and base64 of 24 to 64 random bytes)',
      },
    ]);
  }
  if (!e.WEBHOOK_ALLOW_PRIVATE) {
    const literal = e.WEBHOOK_URLS.find((u) => privateLiteralHost(u));
    if (literal) {
      throw new ConfigError([
        {
          variable: 'WEBHOOK_URLS',
          message: `${JSON.stringify(literal)} is a private, loopback or link-local address: set WEBHOOK_ALLOW_PRIVATE=true to allow it`,
        },
      ]);
    }
  }
  const poolMax = e.DB_POOL_MAX > 0 ? e.DB_POOL_MAX : e.DB_POOLER === 'pgbouncer' ? PGBOUNCER_POOL_MAX : DEFAULT_POOL_MAX;
  return {
    nodeEnv: e.NODE_ENV,
    production: e.NODE_ENV === 'production',
    logLevel: e.LOG_LEVEL,
    logs: { maxBytes: e.VCON_LOG_MAX_SIZE, keep: e.VCON_LOG_KEEP, fallbackFd: e.VCON_LOG_FALLBACK_FD >= 0 ? e.VCON_LOG_FALLBACK_FD : undefined },
    label: e.VCON_INSTANCE_LABEL ?? null,
    envFile: e.ENV_FILE,
    dataDir: path.resolve(e.VCON_DATA_DIR ?? path.join(packageRoot, '.vcon')),
    rest: { enabled: e.REST_API_ENABLED, basePath: e.REST_API_BASE_PATH, bodyLimit: e.REST_API_BODY_LIMIT },
    mcp: {
      transport: e.MCP_TRANSPORT,
      host: e.MCP_HTTP_HOST,
      port: e.MCP_HTTP_PORT,
      readOnly: e.MCP_READONLY,
      stateless: e.MCP_HTTP_STATELESS,
      maxSessions: e.MCP_MAX_SESSIONS,
      sessionsPerKey: e.MCP_SESSIONS_PER_KEY,
      sessionsPerReadOnlyKey: e.MCP_SESSIONS_PER_READONLY_KEY,
      maxSubscriptions: e.MCP_MAX_SUBSCRIPTIONS,
    },
    cors: { origins: e.CORS_ORIGIN },
    auth: { required: e.API_AUTH_REQUIRED, keys: e.API_KEYS, readOnlyKeys: e.API_KEYS_READONLY, header: e.API_KEY_HEADER },
    metrics: { key: e.METRICS_KEY },
    db: {
      url: e.DATABASE_URL ?? e.SUPABASE_DB_URL,
      user: e.DATABASE_USER,
      password: e.DATABASE_PASSWORD,
      analyze: e.ANALYZE_DATABASE_USER ? { user: e.ANALYZE_DATABASE_USER, password: e.ANALYZE_DATABASE_PASSWORD } : undefined,
      schema: e.SUPABASE_DB_SCHEMA,
      pool: splitPool(poolMax, e.DB_ANALYZE_CONNECTIONS),
      idleTimeoutS: e.DB_IDLE_TIMEOUT_S,
      indexThreadIdleS: e.INDEX_THREAD_IDLE_S,
      indexThreadNice: e.INDEX_THREAD_NICE,
      indexThreadHeapMb: e.INDEX_THREAD_HEAP_MB,
      queueTimeoutMs: e.DB_QUEUE_TIMEOUT_MS,
      pooler: e.DB_POOLER,
      reservedConnections: e.DB_RESERVED_CONNECTIONS < 0 ? undefined : e.DB_RESERVED_CONNECTIONS,
      statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    },
    plugins: e.VCON_PLUGINS_PATH,
    embeddings: {
      provider: e.EMBEDDINGS_PROVIDER,
      url: e.EMBEDDINGS_URL,
      model: e.EMBEDDINGS_MODEL,
      apiKey: e.EMBEDDINGS_API_KEY,
      dimensions: e.EMBEDDINGS_DIMENSIONS,
    },
    limits: {
      bodyInFlight: e.BODY_IN_FLIGHT_LIMIT,
      maxElements: e.VCON_MAX_ELEMENTS,
      sendTimeoutMs: e.SEND_TIMEOUT_MS,
      memory: e.VCON_MEMORY_LIMIT,
    },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    replicas: e.VCON_REPLICAS,
    replica: e.VCON_REPLICA || null,
    changes: { retentionHours: e.CHANGES_RETENTION_HOURS },
    validation: e.VCON_VALIDATION,
    webhooks: { urls: e.WEBHOOK_URLS, secret: e.WEBHOOK_SECRET, allowPrivate: e.WEBHOOK_ALLOW_PRIVATE },
  };
}

/** Reads ENV_FILE (if any) under the environment and validates the result. */
export const loadConfig = (env: EnvInput = process.env): Config => parseConfig(readEnvironment(env));
