import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import postgres from 'postgres';
import { createSql, type Sql } from '../../src/db/client.js';
import { migrate } from '../../src/db/migrate.js';
import { lockForTransaction } from '../../src/db/advisory-lock.js';
import { PROVISION_LOCK } from '../../src/db/roles.js';

/** The test database URL (TEST_DATABASE_URL or the embedded one started by global setup). */
export const databaseUrl = (): string => inject('databaseUrl');

/** A unique, valid schema name for one test file. */
export const testSchemaName = (prefix = 'test') => `${prefix}_${randomBytes(5).toString('hex')}`;

/** An unpinned admin connection for setup and teardown (creating and dropping schemas). */
export function adminSql(): Sql {
  return postgres(databaseUrl(), { max: 2, onnotice: () => {} }) as unknown as Sql;
}

/**
 * Runs statements that change shared catalog rows (a GRANT on the database, DROP OWNED of a role
 * holding rights on it) under the launcher's provisioning lock, as the launcher does: another test
 * run on the same cluster provisioning at that moment would otherwise fail, or make these fail,
 * with "tuple concurrently updated".
 */
export async function asProvisioner(statements: string[]): Promise<void> {
  const admin = adminSql();
  try {
    await admin.begin(async (tx) => {
      await lockForTransaction(tx, PROVISION_LOCK);
      for (const s of statements) await tx.unsafe(s);
    });
  } finally {
    await admin.end();
  }
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
