import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSql } from '../../src/db/client.js';
import { loadMigrations, migrate, migrationStatus, MigrationError, PRE_SQUASH_MIGRATIONS } from '../../src/db/migrate.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';

const schemas: string[] = [];
const pools: ReturnType<typeof createSql>[] = [];
const pool = (schema: string, statementTimeoutMs?: number) => {
  const p = createSql({ url: databaseUrl(), schema, max: 3, statementTimeoutMs });
  pools.push(p);
  schemas.push(schema);
  return p;
};
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  const admin = adminSql();
  for (const s of schemas) await admin.unsafe(`drop schema if exists "${s}" cascade`);
  await admin.end();
});

function migrationsDir(files: Record<string, string>) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mig-'));
  for (const [name, sql] of Object.entries(files)) writeFileSync(path.join(dir, name), sql);
  return dir;
}

describe('migration runner', () => {
  it('applies every migration once; a second run is a no-op', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const first = await migrate(sql, schema);
    expect(first.applied).toEqual(loadMigrations().map((m) => m.name));
    const second = await migrate(sql, schema);
    expect(second.applied).toEqual([]);
    const status = await migrationStatus(sql, schema);
    expect(status.pending).toEqual([]);
    expect(status.applied.map((a) => a.name)).toEqual(first.applied);
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from schema_migrations`;
    expect(row.n).toBe(first.applied.length);
  });

  it('refuses an applied migration whose file was edited', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const v1 = loadMigrations(migrationsDir({ '0001_t.sql': 'create table t (a int);' }));
    await migrate(sql, schema, { migrations: v1 });
    const edited = loadMigrations(migrationsDir({ '0001_t.sql': 'create table t (a int, b int);' }));
    await expect(migrate(sql, schema, { migrations: edited })).rejects.toThrow(MigrationError);
    await expect(migrate(sql, schema, { migrations: edited })).rejects.toThrow(/0001_t was edited after it was applied/);
  });

  it('applies only the new migration and reports pending ones', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const one = { '0001_t.sql': 'create table t (a int);' };
    await migrate(sql, schema, { migrations: loadMigrations(migrationsDir(one)) });
    const two = loadMigrations(migrationsDir({ ...one, '0002_u.sql': 'create table u (b int);' }));
    expect((await migrationStatus(sql, schema, two)).pending.map((p) => p.name)).toEqual(['0002_u']);
    expect((await migrate(sql, schema, { migrations: two })).applied).toEqual(['0002_u']);
  });

  it('rolls back a failing migration entirely', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const bad = loadMigrations(migrationsDir({ '0001_ok.sql': 'create table ok (a int);', '0002_bad.sql': 'create table nope (;' }));
    await expect(migrate(sql, schema, { migrations: bad })).rejects.toThrow();
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from information_schema.tables where table_schema = ${schema} and table_name = 'ok'`;
    expect(row.n).toBe(0);
  });

  it('gives up on a table lock held by another session after a bounded wait, and succeeds once it is released', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const one = { '0001_t.sql': 'create table t (a int);' };
    await migrate(sql, schema, { migrations: loadMigrations(migrationsDir(one)) });
    const two = loadMigrations(migrationsDir({ ...one, '0002_alter.sql': 'alter table t add column b int;' }));
    // A running instance's long query: a transaction that keeps reading t.
    const holder = await pool(schema).reserve();
    schemas.pop();
    await holder`begin`;
    await holder`select count(*) from t`;
    const warnings: object[] = [];
    const log = { info: () => undefined, warn: (obj: object) => warnings.push(obj) };
    // Two attempts of 200 ms and one pause between them, not the holder's whole transaction (which
    // lasts until this test commits it).
    const refused = await migrate(sql, schema, { migrations: two, lockTimeoutMs: 200, attempts: 2, log }).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(MigrationError);
    expect((refused as Error).message).toMatch(/migration 0002_alter waited more than 200 ms for a table lock, 2 times/);
    expect((refused as Error).message).toMatch(/stop the group's instances/);
    expect(warnings).toEqual([expect.objectContaining({ step: 'migration 0002_alter', attempt: 1 })]);
    expect((await migrationStatus(sql, schema, two)).pending.map((p) => p.name)).toEqual(['0002_alter']);

    // Released once an attempt has given up: a later attempt applies it.
    let gaveUp!: () => void;
    const firstAttempt = new Promise<void>((r) => (gaveUp = r));
    const run = migrate(sql, schema, { migrations: two, lockTimeoutMs: 300, attempts: 5, log: { info: () => undefined, warn: () => gaveUp() } });
    await firstAttempt;
    await holder`commit`;
    holder.release();
    expect((await run).applied).toEqual(['0002_alter']);
  });

  it("waits for a concurrent runner longer than the pool's statement timeout (an instance's pool)", async () => {
    const schema = testSchemaName('mig');
    // Three pools on one schema: it is dropped once (the first pool's entry).
    await migrate(pool(schema), schema);
    const holder = await pool(schema).reserve();
    schemas.pop();
    await holder`begin`;
    await holder`select pg_advisory_xact_lock(hashtext(${'vcon-launch:migrate:' + schema}))`;
    const [{ pid }] = await holder<{ pid: number }[]>`select pg_backend_pid() as pid`;
    // Activity is read on a connection of its own: a transaction sees one snapshot of it.
    const watcher = pool(schema);
    schemas.pop();
    let settled: unknown;
    const run = migrate(pool(schema, 300), schema);
    run.then(
      () => (settled = 'done'),
      (e: Error) => (settled = e),
    );
    schemas.pop();
    // Past the pool's 300 ms statement timeout, the runner still waits: the server itself shows its
    // statement blocked by the holder for over a second. It finishes once the other does.
    await waitFor(
      async () => {
        if (settled !== undefined) throw new Error(`the runner stopped waiting: ${String(settled)}`);
        const [row] = await watcher<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where ${pid}::int = any(pg_blocking_pids(pid)) and clock_timestamp() - query_start > interval '1 second'`;
        return row.n === 1;
      },
      60_000,
      50,
      'the runner blocked on the advisory lock for a second',
    );
    await holder`commit`;
    holder.release();
    expect((await run).applied).toEqual([]);
  });

  it('leaves an optional change whose table lock another session holds for the next start, and starts', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    // A server built without lz4 (the embedded one) has only the trigram index to defer.
    const { optional } = await migrate(sql, schema);
    const lz4 = optional?.lz4 ? ['vcons.doc compression lz4'] : [];
    // As a group created before lz4 or pg_trgm were available: the optional step has work to do.
    await sql`alter table vcons alter column doc set compression pglz`;
    await sql`drop index if exists vcon_parties_name_trgm_idx`;
    const reader = await pool(schema).reserve();
    schemas.pop();
    await reader`begin`;
    await reader`select count(*) from vcons`; // a long read of a running instance
    await reader`update vcon_parties set name = name where false`; // and a write in progress
    const warnings: object[] = [];
    const log = { info: () => undefined, warn: (obj: object) => warnings.push(obj) };
    // The default lock timeout (5 s) is cut to 1 s for each optional change (the warning says which it used).
    const held = await migrate(sql, schema, { log }).finally(async () => {
      await reader`commit`;
      reader.release();
    });
    const deferred = [...lz4, 'vcon_parties_name_trgm_idx'];
    expect(held.optional?.changed).toEqual([]);
    expect(held.optional?.deferred).toEqual(deferred);
    expect(warnings).toEqual([expect.objectContaining({ deferred, lock_timeout_ms: 1_000 })]);
    const next = await migrate(sql, schema, { lockTimeoutMs: 200, attempts: 2 });
    expect(next.optional?.changed).toEqual(deferred);
  });

  it('lets several processes migrate the same schema at once', async () => {
    const schema = testSchemaName('mig');
    const runners = Array.from({ length: 4 }, () => pool(schema));
    schemas.splice(schemas.length - 3, 3); // one drop is enough
    const results = await Promise.all(runners.map((sql) => migrate(sql, schema)));
    const applied = results.flatMap((r) => r.applied);
    expect(applied).toEqual(loadMigrations().map((m) => m.name));
    const [row] = await runners[0]<{ n: number }[]>`select count(*)::int as n from schema_migrations`;
    expect(row.n).toBe(loadMigrations().length);
  });

  it('starts every schema from the one baseline and the migrations after it, and two groups end up with the same objects', async () => {
    expect(loadMigrations().map((m) => m.name)).toEqual([
      '0001_schema',
      '0002_party_identifier_indexes',
      '0003_change_log',
      '0004_webhooks',
      '0005_webhook_last_error',
      '0006_webhook_tables_private',
    ]);
    const [a, b] = [testSchemaName('mig'), testSchemaName('mig')];
    await migrate(pool(a), a);
    await migrate(pool(b), b);
    const admin = adminSql();
    try {
      const shape = async (schema: string) => ({
        columns: await admin`
          select table_name, column_name, data_type, is_nullable from information_schema.columns
          where table_schema = ${schema} order by table_name, ordinal_position`,
        indexes: await admin`
          select indexname, replace(indexdef, ${`${schema}.`}, '') as def from pg_indexes where schemaname = ${schema} order by indexname`,
      });
      const [sa, sb] = [await shape(a), await shape(b)];
      expect(sa.columns.length).toBeGreaterThan(40);
      expect(sb).toEqual(sa);
    } finally {
      await admin.end();
    }
  });

  it('re-runs the optional step: lz4 and trigram indexes when the server has them, created again if missing', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    const first = await migrate(sql, schema);
    if (!first.optional) throw new Error('the optional step did not run');
    const [col] = await sql<{ c: string }[]>`
      select attcompression::text as c from pg_attribute where attrelid = 'vcons'::regclass and attname = 'doc'`;
    expect(col.c === 'l').toBe(first.optional.lz4);
    const trgm = async () =>
      (await sql<{ indexname: string }[]>`select indexname from pg_indexes where schemaname = ${schema} and indexname like '%trgm%' order by 1`).map(
        (r) => r.indexname,
      );
    const all = ['vcon_parties_mailto_trgm_idx', 'vcon_parties_name_trgm_idx', 'vcon_parties_tel_trgm_idx', 'vcons_subject_trgm_idx'];
    expect(await trgm()).toEqual(first.optional.trigram ? all : []);
    // A second start changes nothing.
    expect((await migrate(sql, schema)).optional?.changed).toEqual([]);
    if (first.optional.trigram) {
      await sql`drop index vcon_parties_tel_trgm_idx`;
      expect((await migrate(sql, schema)).optional?.changed).toEqual(['vcon_parties_tel_trgm_idx']);
      expect(await trgm()).toEqual(all);
    }
  });

  it('refuses a schema that records the pre-squash history, saying how to get out', async () => {
    const schema = testSchemaName('mig');
    const sql = pool(schema);
    await sql.unsafe(`create schema "${schema}"`);
    await sql.unsafe(`create table "${schema}".schema_migrations (
      version integer primary key, name text not null, checksum text not null, applied_at timestamptz not null default now())`);
    await sql.unsafe(`insert into "${schema}".schema_migrations (version, name, checksum) values (1, $1, 'old'), (10, $2, 'old')`, [
      PRE_SQUASH_MIGRATIONS[0],
      PRE_SQUASH_MIGRATIONS[1],
    ]);
    const refusal = /squashed into 0001_schema \(it records 0001_storage\).*drop schema/;
    await expect(migrate(sql, schema)).rejects.toThrow(MigrationError);
    await expect(migrate(sql, schema)).rejects.toThrow(refusal);
    await expect(migrationStatus(sql, schema)).rejects.toThrow(refusal);
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from information_schema.tables where table_schema = ${schema} and table_name = 'vcons'`;
    expect(row.n).toBe(0);
  });
});
