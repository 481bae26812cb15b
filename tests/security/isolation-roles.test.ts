// With per-group roles (`vcon-launch provision`) PostgreSQL itself keeps groups apart. tests/launcher/
// provision.test.ts checks A's role against B's vcons table; this adds the other direction, every
// table of the other schema (derived tables included), writes and DDL into it, and an instance
// misconfigured with the other group's schema: it fails to start instead of serving that schema.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startInstance } from '../../src/main.js';
import { adminSql } from '../helpers/db.js';
import { createWorkspace, dropProvisioned, roleNamesOf, type Workspace } from '../launcher/helpers.js';

const urlIn = (file: string) => /^DATABASE_URL=(.*)$/m.exec(readFileSync(file, 'utf8'))?.[1] ?? '';

let ws: Workspace;
let tables: string[] = [];

beforeAll(async () => {
  ws = createWorkspace(['ra', 'rb']);
  const r = await ws.run(['provision', '--group', 'ra', '--group', 'rb']);
  expect(r.exitCode, r.stdout + r.stderr).toBe(0);
  const admin = adminSql();
  try {
    tables = (await admin<{ t: string }[]>`select tablename as t from pg_tables where schemaname = ${ws.schemas.ra} order by 1`).map((x) => x.t);
  } finally {
    await admin.end();
  }
});

afterAll(async () => {
  await dropProvisioned(Object.values(ws?.schemas ?? {}));
  await ws?.cleanup();
});

describe('per-group roles', () => {
  it("neither role can read, write or create anything in the other group's schema", async () => {
    expect(tables).toEqual(expect.arrayContaining(['vcons', 'vcon_parties', 'vcon_tags', 'search_units', 'vcon_analyses', 'vcon_attachments']));
    for (const [self, other] of [
      ['ra', 'rb'],
      ['rb', 'ra'],
    ]) {
      const sql = postgres(urlIn(path.join(ws.envDir, `${self}.env`)), { max: 1, onnotice: () => {} });
      const o = ws.schemas[other];
      try {
        const [who] = await sql`select current_user as u`;
        expect(who.u).toBe(roleNamesOf(ws.schemas[self]).role);
        await expect(sql`select count(*) from vcons`).resolves.toHaveLength(1);
        for (const t of tables) {
          await expect(sql.unsafe(`select * from "${o}"."${t}" limit 1`), `${self} reads ${o}.${t}`).rejects.toMatchObject({ code: '42501' });
        }
        await expect(sql.unsafe(`insert into "${o}".vcon_tags (vcon_uuid, key, value) values (gen_random_uuid(), 'k', 'v')`)).rejects.toMatchObject({
          code: '42501',
        });
        await expect(sql.unsafe(`create table "${o}".intruder (x int)`)).rejects.toMatchObject({ code: '42501' });
        await expect(sql.unsafe(`alter schema "${o}" rename to stolen`)).rejects.toMatchObject({ code: '42501' });
        await expect(sql.unsafe(`grant usage on schema "${o}" to current_user`)).rejects.toMatchObject({ code: '42501' });
        const [{ ok }] = await sql`select has_schema_privilege(${o}, 'usage') as ok`;
        expect(ok).toBe(false);
      } finally {
        await sql.end();
      }
    }
  });

  it("an instance connecting as one group's role but configured with the other's schema refuses to start", async () => {
    const config = parseConfig({
      MCP_TRANSPORT: 'http',
      MCP_HTTP_PORT: '0',
      DATABASE_URL: urlIn(path.join(ws.envDir, 'ra.env')),
      SUPABASE_DB_SCHEMA: ws.schemas.rb,
      API_KEYS: 'k',
      LOG_LEVEL: 'silent',
      EMBEDDINGS_PROVIDER: 'hashing',
    });
    await expect(startInstance(config)).rejects.toThrow(/permission denied|must be owner/i);
  });
});
