import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import postgres from 'postgres';
import { createSql, type Sql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';

/** The test database URL (TEST_DATABASE_URL or the embedded one started by global setup). */
export const databaseUrl = (): string => inject('databaseUrl');

/** A unique, valid schema name for one test file. */
export const testSchemaName = (prefix = 'test') => `${prefix}_${randomBytes(5).toString('hex')}`;

/** An unpinned admin connection for setup and teardown (creating and dropping schemas). */
export function adminSql(): Sql {
  return postgres(databaseUrl(), { max: 2, onnotice: () => {} }) as unknown as Sql;
}

export interface TestSchema {
  schema: string;
  sql: Sql;
  drop(): Promise<void>;
}

/** Creates a throwaway schema, migrates it and returns a pool pinned to it. Call drop() after. */
export async function createTestSchema(prefix = 'test'): Promise<TestSchema> {
  const schema = testSchemaName(prefix);
  const sql = createSql({ url: databaseUrl(), schema, max: 5 });
  await migrate(sql, schema);
  return {
    schema,
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      const admin = adminSql();
      await admin.unsafe(`drop schema if exists "${schema}" cascade`);
      await admin.end();
    },
  };
}
