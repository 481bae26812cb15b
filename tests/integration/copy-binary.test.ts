// Binary COPY of the index writes (src/db/copy-binary.ts): every column type it encodes, NULLs,
// multi-byte text and empty values arrive in PostgreSQL as sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyBinary, type CopyValue } from '../../src/db/copy-binary.js';
import { createTestSchema, type TestSchema } from '../helpers/db.js';

describe('copyBinary', () => {
  let t: TestSchema;
  beforeAll(async () => {
    t = await createTestSchema('copy_binary');
    await t.sql`create table c (n int4, u uuid, t text, b bytea, ts timestamptz, code bit(16))`;
  });
  afterAll(() => t?.drop());

  it('stores every type as sent, NULLs and multi-byte text included', async () => {
    const rows: CopyValue[][] = [
      [
        1,
        '0b7e1a8c-2f4d-4e6a-9c3b-5d1f2e3a4b5c',
        'héllo — ✓ 😀',
        new Uint8Array([0, 1, 254, 255]),
        new Date('2025-03-14T15:09:26.123Z'),
        new Uint8Array([0xa5, 0x01]),
      ],
      [-7, 'ffffffff-ffff-4fff-bfff-ffffffffffff', '', new Uint8Array(0), new Date('1999-12-31T23:59:59.999Z'), new Uint8Array([0, 0x80])],
      [null, null, null, null, null, null],
      // Every hex digit, in capitals too.
      [2, 'A1B2C3D4-E5F6-4789-8abc-def012345678', 'x', new Uint8Array([1]), new Date(0), new Uint8Array([0, 0])],
    ];
    await copyBinary(
      t.sql,
      'c',
      [
        ['n', 'int4'],
        ['u', 'uuid'],
        ['t', 'text'],
        ['b', 'bytea'],
        ['ts', 'timestamptz'],
        ['code', 'bit'],
      ],
      rows,
    );
    const got = await t.sql<{ n: number | null; u: string | null; t: string | null; b: Buffer | null; ts: Date | null; code: string | null }[]>`
      select n, u::text, t, b, ts, code::text from c order by n nulls last`;
    expect(got).toEqual([
      {
        n: -7,
        u: 'ffffffff-ffff-4fff-bfff-ffffffffffff',
        t: '',
        b: Buffer.alloc(0),
        ts: new Date('1999-12-31T23:59:59.999Z'),
        code: '0000000010000000',
      },
      {
        n: 1,
        u: '0b7e1a8c-2f4d-4e6a-9c3b-5d1f2e3a4b5c',
        t: 'héllo — ✓ 😀',
        b: Buffer.from([0, 1, 254, 255]),
        ts: new Date('2025-03-14T15:09:26.123Z'),
        code: '1010010100000001',
      },
      { n: 2, u: 'a1b2c3d4-e5f6-4789-8abc-def012345678', t: 'x', b: Buffer.from([1]), ts: new Date(0), code: '0000000000000000' },
      { n: null, u: null, t: null, b: null, ts: null, code: null },
    ]);
  });

  it('fails with the server error when the data breaks a constraint, and the transaction rolls back', async () => {
    await t.sql`create table checked (n int4 check (n > 0))`;
    // Inside a transaction, as an indexing round writes: the COPY's error must end the callback so
    // sql.begin sends ROLLBACK (an unsettled stream left it open, idle in an aborted transaction).
    const attempt = t.sql.begin((tx) => copyBinary(tx, 'checked', [['n', 'int4']], [[1], [-1]]));
    await expect(attempt).rejects.toMatchObject({ code: '23514' });
    const [{ n }] = await t.sql<{ n: number }[]>`select count(*)::int as n from checked`;
    expect(n).toBe(0);
    await copyBinary(t.sql, 'checked', [['n', 'int4']], [[2]]);
    const [{ m }] = await t.sql<{ m: number }[]>`select count(*)::int as m from checked`;
    expect(m).toBe(1);
  });
});
