// The migration runner: the only place that runs SQL text (sql.unsafe), and only from our own files.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { lockForTransaction, LockWaitError } from './advisory-lock.js';
import { searchPathOf, type Sql, type TransactionSql } from './client.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrationStatus {
  schema: string;
  applied: { version: number; name: string; applied_at: string }[];
  pending: { version: number; name: string }[];
}

interface MigrationLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Raised for a state we must not start in: an edited applied migration, an unknown one, or the pre-squash history. */
export class MigrationError extends Error {
  override name = 'MigrationError';
}

/** Reads NNNN_name.sql files in version order. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const sql = readFileSync(path.join(dir, file), 'utf8');
      return {
        version: Number(file.slice(0, 4)),
        name: file.replace(/\.sql$/, ''),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

// Identifiers below come from validated config (SchemaName), never from a request.
const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** How long a migration waits for a concurrent runner of the same schema (its advisory lock), at most (ms). */
export const MIGRATE_LOCK_WAIT_MS = 60_000;

/**
 * Creates the shared extensions once per database, in schema `extensions`, when the role may
 * (the launcher's admin connection does it before any group migrates). Serialised on a
 * database-wide advisory lock because CREATE EXTENSION IF NOT EXISTS races. Catalog names are
 * qualified: the admin's search_path holds pg_catalog only.
 */
export async function ensureExtensions(sql: Sql, log?: MigrationLog): Promise<{ pg_trgm: boolean }> {
  const trgmSchema = async (q: Sql | TransactionSql) =>
    (
      await q<{ nspname: string }[]>`
        select n.nspname from pg_catalog.pg_extension e join pg_catalog.pg_namespace n on n.oid = e.extnamespace where e.extname = 'pg_trgm'`
    )[0]?.nspname;
  // Nothing to do (and nothing to ask of a per-group role that may not create anything here).
  if ((await trgmSchema(sql)) === 'extensions') return { pg_trgm: true };
  try {
    await sql.begin(async (tx) => {
      await lockForTransaction(tx, 'vcon-launch:extensions');
      const [ns] = await tx<{ owner_is_superuser: boolean; mine: boolean }[]>`
        select r.rolsuper as owner_is_superuser, n.nspowner = (select oid from pg_catalog.pg_roles where rolname = current_user) as mine
        from pg_catalog.pg_namespace n join pg_catalog.pg_roles r on r.oid = n.nspowner where n.nspname = 'extensions'`;
      if (!ns) {
        await tx`create schema extensions`;
        await tx`grant usage on schema extensions to public`;
      } else if (!ns.owner_is_superuser && !ns.mine) {
        // CREATE EXTENSION runs its script with the target schema first on the search_path: a
        // schema someone else owns could hold objects that script would resolve to.
        throw new Error('schema "extensions" belongs to another role; pg_trgm is not created there');
      }
      if (!(await trgmSchema(tx))) await tx`create extension if not exists pg_trgm schema extensions`;
    });
  } catch (err) {
    if (err instanceof LockWaitError) throw err;
    log?.warn({ err: (err as Error).message }, 'extensions not created (missing privilege?); trigram indexes disabled');
  }
  const nspname = await trgmSchema(sql);
  if (nspname && nspname !== 'extensions') {
    log?.warn({ schema: nspname }, 'pg_trgm is installed outside schema "extensions"; trigram indexes disabled');
  }
  return { pg_trgm: nspname === 'extensions' };
}

async function readApplied(tx: Sql, schema: string) {
  return tx.unsafe<{ version: number; name: string; checksum: string; applied_at: Date }[]>(
    `select version, name, checksum, applied_at from ${quoteIdent(schema)}.schema_migrations order by version`,
  );
}

/**
 * The development histories squashed into 0001_schema before anything was deployed (the first
 * squash's 0001_storage..0013, then 0001_baseline..0007). A schema that still records one is
 * refused with the way out rather than "unknown migration" or "edited" (docs/development.md "Migrations").
 */
export const PRE_SQUASH_MIGRATIONS: readonly string[] = [
  '0001_storage',
  '0010_search_vectors',
  '0011_vcon_codes',
  '0012_vcon_search',
  '0013_vcon_codes_changed',
  '0001_baseline',
  '0002_index_queue',
  '0003_lean_index',
  '0004_search_units_per_vcon',
  '0005_dialog_facts_per_vcon',
  '0006_derived_rows_without_foreign_keys',
  '0007_derived_rows_follow_deletes',
];

function verify(schema: string, applied: { version: number; name: string; checksum: string }[], known: Migration[]) {
  const old = applied.find((a) => PRE_SQUASH_MIGRATIONS.includes(a.name));
  if (old) {
    throw new MigrationError(
      `schema ${schema} was migrated by a development build from before the migrations were squashed into 0001_schema (it records ${old.name}); there is no upgrade path from that history: export what you want to keep, drop the schema (drop schema "${schema}" cascade) and start again, so it is created from the baseline (docs/development.md "Migrations")`,
    );
  }
  const byVersion = new Map(known.map((m) => [m.version, m]));
  for (const a of applied) {
    const m = byVersion.get(a.version);
    if (!m) {
      throw new MigrationError(`schema has migration ${a.name} that this build does not know; refusing to run an older build against a newer schema`);
    }
    if (m.checksum !== a.checksum) {
      throw new MigrationError(
        `migration ${m.name} was edited after it was applied (checksum ${a.checksum.slice(0, 12)} applied, ${m.checksum.slice(0, 12)} on disk); applied migrations are immutable: add a new one instead`,
      );
    }
  }
}

/**
 * How long one statement of a migration waits for a table lock (ms), and how many times the whole
 * run is tried. A migration that reshapes a table takes its exclusive lock; waiting behind a long
 * query of a running instance would also queue every later query on that table behind it, so the
 * group would stall for as long as the query runs. Giving up after a few seconds bounds that stall.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 5_000;
export const MIGRATION_ATTEMPTS = 3;

/** The lock wait of each optional change (lz4, a trigram index), at most (ms). */
const OPTIONAL_LOCK_TIMEOUT_MS = 1_000;

/** The lock_timeout of the optional step when the migrations' is `lockTimeoutMs` (ms, whole). */
const optionalLockTimeout = (lockTimeoutMs: number) => Math.max(1, Math.floor(Math.min(lockTimeoutMs, OPTIONAL_LOCK_TIMEOUT_MS)));

/** lock_not_available: the statement's lock_timeout expired. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Applies pending migrations to one schema, forward only, in one transaction under an advisory
 * lock keyed on the schema: concurrent runners serialise and the later one finds nothing to do.
 * A statement that waits longer than `lockTimeoutMs` for a lock rolls the run back; it is tried
 * `attempts` times, then refused with what to do.
 */
export async function migrate(
  sql: Sql,
  schema: string,
  opts: { migrations?: Migration[]; log?: MigrationLog; optional?: boolean; lockTimeoutMs?: number; attempts?: number } = {},
): Promise<{ applied: string[]; optional: OptionalState | null }> {
  const attempts = opts.attempts ?? MIGRATION_ATTEMPTS;
  const lockTimeoutMs = opts.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS;
  for (let attempt = 1; ; attempt++) {
    const step = { name: 'reading the migration table' };
    try {
      return await migrateOnce(sql, schema, opts, lockTimeoutMs, step);
    } catch (err) {
      if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
      if (attempt >= attempts) {
        throw new MigrationError(
          `migration of schema ${schema} gave up: ${step.name} waited more than ${lockTimeoutMs} ms for a table lock, ${attempts} times (${(err as Error).message}); another session holds that table, usually a running instance of this group (an older build) or a long query: stop the group's instances (vcon-launch stop --group <group>), run vcon-launch migrate --group <group>, then start them`,
        );
      }
      opts.log?.warn(
        { migrated_schema: schema, step: step.name, attempt, lock_timeout_ms: lockTimeoutMs },
        'migration waited too long for a table lock; rolled back, trying again',
      );
      await sleep(Math.min(lockTimeoutMs, 2_000));
    }
  }
}

async function migrateOnce(
  sql: Sql,
  schema: string,
  opts: { migrations?: Migration[]; log?: MigrationLog; optional?: boolean },
  lockTimeoutMs: number,
  step: { name: string },
): Promise<{ applied: string[]; optional: OptionalState | null }> {
  const migrations = opts.migrations ?? loadMigrations();
  // The optional step needs the baseline's tables: a caller with its own migrations opts in.
  const runOptional = opts.optional ?? !opts.migrations;
  const { pg_trgm } = await ensureExtensions(sql, opts.log);
  const appliedNow: string[] = [];
  let optional = null as OptionalState | null;
  await sql.begin(async (tx) => {
    // Before the advisory lock: a pool's statement timeout (the instance's, for requests) would
    // otherwise end the wait for a concurrent runner's long migration with a raw 57014.
    await tx.unsafe('set local statement_timeout = 0');
    // Bounded: any role that can connect may take this well-known key; the error names the holder.
    await lockForTransaction(tx, `vcon-launch:migrate:${schema}`, MIGRATE_LOCK_WAIT_MS);
    await tx.unsafe(`set local lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`);
    const q = quoteIdent(schema);
    // Read pg_namespace after taking the lock: the query also flushes this connection's catalog
    // cache, which may hold a stale "schema missing" entry from before a concurrent runner committed.
    const [ns] = await tx`select 1 from pg_namespace where nspname = ${schema}`;
    if (!ns) await tx.unsafe(`create schema ${q}`);
    // Pin this transaction's path to the group's schema so migrations can use unqualified names.
    await tx.unsafe(`set local search_path to ${searchPathOf(schema)}`);
    await tx.unsafe(`create table if not exists ${q}.schema_migrations (
      version integer primary key,
      name text not null,
      checksum text not null,
      applied_at timestamptz not null default now())`);
    const applied = await readApplied(tx as unknown as Sql, schema);
    verify(schema, applied, migrations);
    const done = new Set(applied.map((a) => a.version));
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      step.name = `migration ${m.name}`;
      await tx.unsafe(m.sql);
      await tx.unsafe(`insert into ${q}.schema_migrations (version, name, checksum) values ($1, $2, $3)`, [m.version, m.name, m.checksum]);
      appliedNow.push(m.name);
    }
    step.name = 'the optional step (lz4, trigram indexes)';
    if (runOptional) optional = await ensureOptional(tx, pg_trgm, lockTimeoutMs);
  });
  if (appliedNow.length) opts.log?.info({ migrated_schema: schema, applied: appliedNow }, 'migrations applied');
  if (optional?.changed.length) opts.log?.info({ migrated_schema: schema, optional: optional.changed }, 'optional schema features added');
  if (optional?.deferred.length) {
    opts.log?.warn(
      { migrated_schema: schema, deferred: optional.deferred, lock_timeout_ms: optionalLockTimeout(lockTimeoutMs) },
      'optional schema features left for the next start: another session held the table lock',
    );
  }
  return { applied: appliedNow, optional };
}

/** What the optional step found (after it ran) and what it changed this time. */
export interface OptionalState {
  lz4: boolean;
  trigram: boolean;
  changed: string[];
  /** Changes left for the next start: another session held the table's lock past lock_timeout. */
  deferred: string[];
}

/** Trigram indexes of the substring filters (subject, party name/email/tel): name, table, expression. */
const TRIGRAM_INDEXES: readonly [string, string, string][] = [
  ['vcons_subject_trgm_idx', 'vcons', 'lower(subject)'],
  ['vcon_parties_name_trgm_idx', 'vcon_parties', 'lower(name)'],
  ['vcon_parties_mailto_trgm_idx', 'vcon_parties', 'lower(mailto)'],
  ['vcon_parties_tel_trgm_idx', 'vcon_parties', 'tel'],
];

/**
 * The part of a group's schema that depends on the server, re-run after the migrations on every
 * migrate (so not a numbered migration, which runs once and would leave groups diverged): lz4
 * compression of documents (measured to roughly double ingest of TOASTed documents) and the trigram
 * indexes of substring filters. Each step reads the catalog first, so a re-run changes nothing, and
 * a server that gains lz4 or pg_trgm later gets them at the next start.
 */
async function ensureOptional(tx: TransactionSql, pgTrgm: boolean, lockTimeoutMs: number): Promise<OptionalState> {
  const changed: string[] = [];
  // Each optional change waits for its lock one after another: a shorter wait keeps a start that
  // defers them all (and the writers queued behind each wait) within a few seconds.
  await tx.unsafe(`set local lock_timeout = ${optionalLockTimeout(lockTimeoutMs)}`);
  const deferred: string[] = [];
  // Each change in a savepoint: a lock another session holds (lock_timeout) defers it to the next
  // start instead of refusing this one for an optional feature.
  const tryChange = async (what: string, run: (sp: TransactionSql) => Promise<unknown>, ignore?: string): Promise<boolean> => {
    try {
      await tx.savepoint(run);
      changed.push(what);
      return true;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === LOCK_NOT_AVAILABLE) deferred.push(what);
      else if (code !== ignore) throw err;
      return false;
    }
  };
  const [col] = await tx<{ c: string }[]>`
    select attcompression::text as c from pg_attribute where attrelid = 'vcons'::regclass and attname = 'doc'`;
  let lz4 = col?.c === 'l';
  // feature_not_supported (0A000): a server built without lz4; the default (pglz) stays. Asked first
  // without the table's lock, so such a server does not queue for vcons' exclusive lock at every start.
  if (!lz4 && (await serverHasLz4(tx))) {
    lz4 = await tryChange('vcons.doc compression lz4', (sp) => sp`alter table vcons alter column doc set compression lz4`, '0A000');
  }
  if (pgTrgm) {
    const present = await tx<{ relname: string }[]>`
      select c.relname from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relname = any(${TRIGRAM_INDEXES.map((i) => i[0])})`;
    const have = new Set(present.map((r) => r.relname));
    for (const [name, table, expr] of TRIGRAM_INDEXES) {
      if (have.has(name)) continue;
      // Constant text from this file; opclass qualified because pg_trgm lives in schema extensions.
      await tryChange(name, (sp) => sp.unsafe(`create index if not exists ${name} on ${table} using gin (${expr} extensions.gin_trgm_ops)`));
    }
  }
  return { lz4, trigram: pgTrgm, changed, deferred };
}

/** Whether the server was built with lz4: the setting refuses the value (22023) otherwise. Leaves the setting as it was. */
async function serverHasLz4(tx: TransactionSql): Promise<boolean> {
  try {
    await tx.savepoint(async (sp) => {
      await sp`set local default_toast_compression = 'lz4'`;
      await sp`set local default_toast_compression to default`;
    });
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '22023') return false;
    throw err;
  }
}

/** Applied and pending migrations of a schema, without changing anything. */
export async function migrationStatus(sql: Sql, schema: string, migrations = loadMigrations()): Promise<MigrationStatus> {
  const [exists] = await sql<{ ok: boolean }[]>`
    select exists (select 1 from information_schema.tables where table_schema = ${schema} and table_name = 'schema_migrations') as ok`;
  const applied = exists?.ok ? await readApplied(sql, schema) : [];
  verify(schema, applied, migrations);
  const done = new Set(applied.map((a) => a.version));
  return {
    schema,
    applied: applied.map((a) => ({ version: a.version, name: a.name, applied_at: new Date(a.applied_at).toISOString() })),
    pending: migrations.filter((m) => !done.has(m.version)).map((m) => ({ version: m.version, name: m.name })),
  };
}
