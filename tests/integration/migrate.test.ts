import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSql } from '../../src/db/client.js';
import { loadMigrations, migrate, migrationStatus, MigrationError } from '../../src/db/migrate.js';
import { adminSql, databaseUrl, testSchemaName } from '../helpers/db.js';

const schemas: string[] = [];
const pools: ReturnType<typeof createSql>[] = [];
const pool = (schema: string) => {
  const p = createSql({ url: databaseUrl(), schema, max: 3 });
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
});
