import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVconRepo } from '../../src/db/vcon-repo.js';
import { classifyVcon } from '../../src/domain/vcon.js';
import { deriveRows } from '../../src/domain/derive.js';
import { KEY, RO_KEY, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/poll.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

interface Entry {
  cursor: string;
  uuid: string;
  kind: string;
  time: string;
  key_id: string | null;
}

/** Reads every page from `after` until has_more is false; returns the entries and the next cursor. */
async function readAll(t: TestServer, after = '0', extra = '', key?: string): Promise<{ entries: Entry[]; next: string }> {
  const entries: Entry[] = [];
  let cursor = after;
  for (;;) {
    const r = await t.api(`/changes?after=${cursor}&limit=7${extra}`, { key });
    expect(r.status).toBe(200);
    entries.push(...r.body.data);
    cursor = r.body.next_cursor;
    if (!r.body.has_more) return { entries, next: cursor };
  }
}

/** Reads until every uuid given has an entry of the kind given (a reader polling the page). */
async function readUntil(t: TestServer, after: string, want: (e: Entry[]) => boolean): Promise<{ entries: Entry[]; next: string }> {
  const all: Entry[] = [];
  let next = after;
  await waitFor(
    async () => {
      const r = await readAll(t, next);
      all.push(...r.entries);
      next = r.next;
      return want(all);
    },
    20_000,
    20,
    'the change log to show the writes',
  );
  return { entries: all, next };
}

const create = async (json: Record<string, unknown> = {}) => {
  const r = await s.api('/vcons', { method: 'POST', json: { subject: 'feed', parties: [{ name: 'a' }], ...json } });
  expect(r.status).toBeLessThan(300);
  return r.body.uuid as string;
};

describe('the change log', () => {
  it('logs every kind of change once, in commit order per vCon, with the key id and never the key', async () => {
    const start = (await readAll(s)).next;
    const uuid = await create();
    expect((await s.api(`/vcons`, { method: 'POST', json: { uuid, subject: 'replaced', parties: [{ name: 'b' }] } })).status).toBe(200);
    expect((await s.api(`/vcons/${uuid}`, { method: 'PATCH', json: { subject: 'patched' } })).status).toBe(200);
    expect(
      (await s.api(`/vcons/${uuid}/dialog`, { method: 'POST', json: { type: 'text', start: new Date().toISOString(), parties: [0], body: 'hi' } }))
        .status,
    ).toBe(201);
    expect((await s.api(`/vcons/${uuid}/tags/team`, { method: 'PUT', json: { value: 'red' } })).status).toBeLessThan(300);
    expect((await s.api(`/vcons/${uuid}/tags/team`, { method: 'DELETE' })).status).toBeLessThan(300);
    const batch = await s.api('/vcons/batch', {
      method: 'POST',
      json: [
        { uuid, subject: 'batch-replaced', parties: [] },
        { subject: 'batch-new', parties: [] },
      ],
    });
    expect(batch.status).toBe(201);
    const fresh = batch.body.results[1].uuid as string;
    expect((await s.api(`/vcons/${uuid}`, { method: 'DELETE' })).status).toBe(200);
    const { entries } = await readUntil(s, start, (all) => all.some((e) => e.uuid === uuid && e.kind === 'deleted'));
    const mine = entries.filter((e) => e.uuid === uuid);
    expect(mine.map((e) => e.kind)).toEqual(['created', 'updated', 'updated', 'appended', 'tags_changed', 'tags_changed', 'updated', 'deleted']);
    expect(entries.filter((e) => e.uuid === fresh).map((e) => e.kind)).toEqual(['created']);
    const cursors = entries.map((e) => BigInt(e.cursor));
    expect(cursors).toEqual([...cursors].sort((a, b) => (a < b ? -1 : 1)));
    expect(new Set(cursors).size).toBe(cursors.length);
    // The key's id (a digest prefix), the same for every write of the key, and nowhere the key itself.
    expect(new Set(mine.map((e) => e.key_id)).size).toBe(1);
    expect(mine[0].key_id).toMatch(/^[0-9a-f]{16}$/);
    const [raw] = await s.instance.sql`select coalesce(string_agg(row_to_json(c)::text, ''), '') as text from change_log c`;
    expect(raw.text).not.toContain(KEY);
    expect(JSON.stringify(entries)).not.toContain(KEY);
  });

  it('never passes an entry whose transaction commits late, then shows it exactly once', async () => {
    const start = (await readAll(s)).next;
    const heldUuid = randomUUID();
    const c = classifyVcon({ vcon: '0.3.0', uuid: heldUuid, created_at: new Date().toISOString(), subject: 'held', parties: [] });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let heldCursor!: bigint;
    let insertedNow!: () => void;
    const inserted = new Promise<void>((r) => (insertedNow = r));
    const held = s.instance.sql.begin(async (tx) => {
      await createVconRepo(tx).insertNew([{ uuid: heldUuid, kind: c.kind, doc: c.doc, derived: deriveRows(c.doc, c.kind, new Date()) }], null);
      const [r] = await tx<{ cursor: string }[]>`select max(cursor)::text as cursor from change_log`;
      heldCursor = BigInt(r.cursor);
      insertedNow();
      await gate;
    });
    await inserted;
    try {
      // Later writes commit while the first is held open: their cursors are above the held one.
      const later = [await create(), await create(), await create()];
      for (let i = 0; i < 5; i++) {
        const r = await readAll(s, start);
        expect(r.entries.map((e) => e.uuid)).not.toContain(heldUuid);
        expect(r.entries.some((e) => later.includes(e.uuid))).toBe(false);
        expect(BigInt(r.next)).toBeLessThan(heldCursor);
      }
      release();
      await held;
      const { entries } = await readUntil(s, start, (all) => later.every((u) => all.some((e) => e.uuid === u)));
      expect(entries.filter((e) => e.uuid === heldUuid).map((e) => e.cursor)).toEqual([heldCursor.toString()]);
      const cursors = entries.map((e) => BigInt(e.cursor));
      expect(cursors).toEqual([...cursors].sort((a, b) => (a < b ? -1 : 1)));
      expect(new Set(cursors).size).toBe(cursors.length);
    } finally {
      release();
      await held.catch(() => undefined);
    }
  });

  it('pages in numeric cursor order where cursors gain a digit, skipping none', async () => {
    // Cursors just below a power of ten: text order would put 100 before 98 and page past 98 and 99.
    const [{ last }] = await s.instance.sql<{ last: string | null }[]>`select pg_sequence_last_value('change_log_cursor_seq')::text as last`;
    const base = 10n ** BigInt(String(last ?? '0').length + 1) - 3n;
    await s.instance.sql`select setval('change_log_cursor_seq', ${base.toString()}::bigint)`;
    const uuids: string[] = [];
    for (let i = 0; i < 6; i++) uuids.push(await create());
    const { entries } = await readUntil(s, base.toString(), (all) => uuids.every((u) => all.some((e) => e.uuid === u)));
    const paged: string[] = [];
    for (let after = base.toString(), more = true; more;) {
      const r = await s.api(`/changes?after=${after}&limit=2`);
      expect(r.status).toBe(200);
      paged.push(...r.body.data.map((e: Entry) => e.cursor));
      after = r.body.next_cursor;
      more = r.body.has_more;
    }
    const want = [1n, 2n, 3n, 4n, 5n, 6n].map((n) => (base + n).toString());
    expect(entries.map((e) => e.cursor)).toEqual(want);
    expect(paged).toEqual(want);
  });

  it('lets a read-only key read, filters by kind, and refuses bad parameters with a 400 naming them', async () => {
    const start = (await readAll(s)).next;
    const uuid = await create();
    await s.api(`/vcons/${uuid}`, { method: 'DELETE' });
    await readUntil(s, start, (all) => all.some((e) => e.uuid === uuid && e.kind === 'deleted'));
    const ro = await readAll(s, start, '&kinds=deleted', RO_KEY);
    expect(ro.entries.filter((e) => e.uuid === uuid).map((e) => e.kind)).toEqual(['deleted']);
    expect(ro.entries.every((e) => e.kind === 'deleted')).toBe(true);
    for (const [query, param] of [
      ['after=-1', 'after'],
      ['after=abc', 'after'],
      ['limit=0', 'limit'],
      ['limit=1.5', 'limit'],
      ['after=99999999999999999999', 'after'],
      ['kinds=created,exploded', 'kinds'],
    ]) {
      const r = await s.api(`/changes?${query}`);
      expect(r.status, query).toBe(400);
      expect(r.body.error).toBe('invalid_parameter');
      expect(r.body.details[0].path).toBe(param);
    }
    expect((await s.api('/changes', { key: null })).status).toBe(401);
  });

  it('answers 410 cursor_expired naming the oldest cursor held once older entries are pruned', async () => {
    const t = await startTestServer();
    try {
      const first = await t.api('/vcons', { method: 'POST', json: { subject: 'old', parties: [] } });
      const { entries } = await readUntil(t, '0', (all) => all.some((e) => e.uuid === first.body.uuid));
      const pruned = await t.instance.services.changes.prune(new Date(Date.now() + 60_000));
      expect(pruned).toBe(entries.length);
      const second = await t.api('/vcons', { method: 'POST', json: { subject: 'new', parties: [] } });
      const kept = await readUntil(t, entries.at(-1)!.cursor, (all) => all.some((e) => e.uuid === second.body.uuid));
      const r = await t.api('/changes?after=0');
      expect(r.status).toBe(410);
      expect(r.body.error).toBe('cursor_expired');
      expect(r.body.message).toContain(`oldest cursor still held is ${kept.entries[0].cursor}`);
      // Without a cursor the page starts at the oldest entry held.
      expect((await t.api('/changes')).body.data[0].cursor).toBe(kept.entries[0].cursor);
    } finally {
      await t.close();
    }
  });
});
