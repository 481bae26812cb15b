import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, type TestSchema } from '../helpers/db.js';

let a: TestSchema;
let b: TestSchema;
beforeAll(async () => {
  [a, b] = await Promise.all([createTestSchema('pin'), createTestSchema('pin')]);
});
afterAll(async () => {
  await Promise.all([a?.drop(), b?.drop()]);
});

const doc = (subject: string) => ({ uuid: '11111111-1111-4111-8111-111111111111', subject });

describe('schema pinning', () => {
  it("two pools in two schemas never see each other's rows, across pooled connections", async () => {
    await a.sql`insert into vcons (uuid, doc, subject, created_at) values (${doc('A').uuid}, ${doc('A') as never}::json, 'A', now())`;
    await b.sql`insert into vcons (uuid, doc, subject, created_at) values (${doc('B').uuid}, ${doc('B') as never}::json, 'B', now())`;
    // Many concurrent queries spread over every pooled connection.
    const seenA = await Promise.all(Array.from({ length: 20 }, () => a.sql<{ subject: string }[]>`select subject from vcons`));
    const seenB = await Promise.all(Array.from({ length: 20 }, () => b.sql<{ subject: string }[]>`select subject from vcons`));
    expect(new Set(seenA.flat().map((r) => r.subject))).toEqual(new Set(['A']));
    expect(new Set(seenB.flat().map((r) => r.subject))).toEqual(new Set(['B']));
  });

  it('stays pinned inside transactions, savepoints and reserved connections', async () => {
    const inTx = await a.sql.begin(async (tx) => {
      const [x] = await tx<{ s: string }[]>`select current_schema() as s`;
      const inner = await tx.savepoint(async (sp) => sp<{ subject: string }[]>`select subject from vcons`);
      return { schema: x.s, subjects: inner.map((r) => r.subject) };
    });
    expect(inTx).toEqual({ schema: a.schema, subjects: ['A'] });
    const reserved = await b.sql.reserve();
    try {
      const [x] = await reserved<{ s: string }[]>`select current_schema() as s`;
      expect(x.s).toBe(b.schema);
    } finally {
      reserved.release();
    }
  });

  it('does not put public on the path of a group schema', async () => {
    const [row] = await a.sql<{ p: string }[]>`select current_setting('search_path') as p`;
    expect(row.p).toContain(a.schema);
    expect(row.p).not.toMatch(/\bpublic\b/);
  });
});
