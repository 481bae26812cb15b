// The stored document text is exactly the accepted document's JSON (API.md: key order, every
// character), whichever write stored it: a create, a batch (each document its own parameter), a
// replacement. Real PostgreSQL, a throwaway schema.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { createServices } from '../../src/main.js';
import { internalCtx } from '../../src/services/context.js';
import { createTestSchema, databaseUrl, type TestSchema } from '../helpers/db.js';

let t: TestSchema;
let services: ReturnType<typeof createServices>;
beforeAll(async () => {
  t = await createTestSchema('write_text');
  services = createServices(t.sql, parseConfig({ DATABASE_URL: databaseUrl(), SUPABASE_DB_SCHEMA: t.schema, LOG_LEVEL: 'silent' }));
  await services.stop();
});
afterAll(async () => {
  await services?.stop();
  await t?.drop();
});

/** A plain vCon with text that a parameter or an array literal could mangle, keys in no sorted order. */
const tricky = (i: number) => ({
  zeta: { b: 1, a: [2, { y: null, x: 'tab\there' }] },
  uuid: randomUUID(),
  vcon: '0.3.0',
  created_at: '2025-03-01T12:00:00.000Z',
  subject: `$${i} {"quoted"} back\\slash 'single' \u2028 ∑ 注文 😀 ,(){}[]`,
  parties: [{ name: 'Zoë "Z" O\'Neil', tel: '+1555000' + i }],
  dialog: [{ type: 'text', parties: [0], encoding: 'none', body: 'NULL null \\N \\x00 "' + i + '"' }],
  attachments: [{ purpose: 'tags', encoding: 'json', body: [`k:v${i}`, 'a:b:c'] }],
  number: 1e21,
  negative: -0.000001,
  empty: {},
});

/** A JWS general-serialization form: stored opaque, as sent. */
const signed = () => ({
  payload: Buffer.from(JSON.stringify({ subject: 'x' })).toString('base64url'),
  signatures: [{ header: { uuid: randomUUID() }, protected: 'eyJhbGciOiJSUzI1NiJ9', signature: 'c2ln' }],
});

describe('stored document text', () => {
  it('is JSON.stringify of the accepted document for a batch, a create and a replacement', async () => {
    const plain = Array.from({ length: 5 }, (_, i) => tricky(i));
    const docs = [...plain, signed()];
    const r = await services.vcons.batch(structuredClone(docs), internalCtx);
    expect(r.failed, JSON.stringify(r.results)).toBe(0);
    for (const [i, doc] of docs.entries()) {
      expect(await services.vcons.getText(r.results[i].uuid as string)).toBe(JSON.stringify(doc));
    }
    const one = tricky(7);
    const c = await services.vcons.create(structuredClone(one), internalCtx);
    expect(await services.vcons.getText(c.uuid)).toBe(JSON.stringify(one));
    // A replacement in a batch: the service adds updated_at at the end, the rest as sent.
    const again = { ...plain[0], subject: 'replaced $1' };
    const r2 = await services.vcons.batch([structuredClone(again), tricky(9)], internalCtx);
    expect(r2.results.map((x) => x.status)).toEqual([200, 201]);
    const text = await services.vcons.getText(plain[0].uuid);
    const stored = JSON.parse(text as string);
    expect(text).toBe(JSON.stringify({ ...again, updated_at: stored.updated_at }));
    const [row] = await t.sql<{ subject: string; created_at: Date; parties_count: number; tags_sig: string | null }[]>`
      select subject, created_at, parties_count, tags_sig from vcons where uuid = ${plain[1].uuid}::uuid`;
    expect(row).toMatchObject({ subject: plain[1].subject, created_at: new Date('2025-03-01T12:00:00.000Z'), parties_count: 1 });
    expect(row.tags_sig).toMatch(/^[0-9a-f]{40}$/);
  });
});
