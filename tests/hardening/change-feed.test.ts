// The change feed at scale: three processes of one group (`vcon-launch start --detach`,
// VCON_REPLICAS=3); 10,000 vCons created (batches), updated (PATCH or a replacement), appended to
// (a dialog or an analysis) and deleted, by concurrent writers spread over the three; some of those
// writes held open for seconds after they took their cursor while later writes commit. One client
// reads the stream from the start meanwhile, is cut off twice and resumes with Last-Event-ID on
// another process. It must see every acknowledged write exactly once, cursors increasing, each
// vCon's entries in the order its writes were acknowledged, and what it saw must be the log itself.
// tests/changes/replicas.test.ts is the small version in the main suite.
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeOf, openEventStream, type EventStream } from '../../scripts/bench/sse.js';
import { databaseUrl } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';
import { createWorkspace, KEY, type Workspace } from '../launcher/helpers.js';
import { request, sleep } from './helpers.js';

const VCONS = 10_000;
const BATCH = 100;
/** Writers of updates, appends and deletes, each following one vCon at a time. */
const WORKERS = 6;
/** One write in this many vCons is held open (10 in all: updates, appends and deletes in turn). */
const HOLD_EVERY = VCONS / 10;
/** A hold ends once it has lasted this long and this many later writes were acknowledged meanwhile. */
const HOLD_MS = 2_000;
const HOLD_ACKS = 30;
/** ... or after this long once at least one was: a slow machine shortens no hold below what the checks need. */
const HOLD_MAX_MS = 15_000;
/** The group's statement timeout: a held write waits however long the hold takes on a loaded machine. */
const STATEMENT_TIMEOUT_MS = 600_000;
/** Every vCon is created, updated, appended to and deleted. */
const KINDS = ['created', 'updated', 'appended', 'deleted'] as const;
const TOTAL = VCONS * KINDS.length;

/** An acknowledged write: when it was sent and answered, on one clock shared with the holds. */
interface Write {
  uuid: string;
  kind: string;
  issued: number;
  acked: number;
}

/** A write held open: when it was seen waiting (after its cursor was taken) and when it was let go. */
interface Hold {
  uuid: string;
  kind: string;
  waiting: number;
  released: number;
  ms: number;
}

interface Seen {
  cursor: bigint;
  uuid: string;
  kind: string;
  connection: number;
}

/** A queue of created vCons for the writers, with room for a bounded number. */
function channel<T>() {
  const items: T[] = [];
  const takers: ((v: T | undefined) => void)[] = [];
  const roomWaiters: (() => void)[] = [];
  let closed = false;
  return {
    put(xs: T[]) {
      for (const x of xs) {
        const taker = takers.shift();
        if (taker) taker(x);
        else items.push(x);
      }
    },
    take(): Promise<T | undefined> {
      if (items.length > 0) {
        const v = items.shift();
        roomWaiters.shift()?.();
        return Promise.resolve(v);
      }
      if (closed) return Promise.resolve(undefined);
      return new Promise((r) => takers.push(r));
    },
    /** Resolves once fewer than `n` items wait. */
    room(n: number): Promise<void> {
      return items.length < n ? Promise.resolve() : new Promise((r) => roomWaiters.push(r));
    },
    close() {
      closed = true;
      for (const t of takers.splice(0)) t(undefined);
    },
  };
}

let ws: Workspace;
let urls: string[] = [];
let schema = '';
let admin: postgres.Sql;

beforeAll(async () => {
  ws = createWorkspace(['bigfeed'], { bigfeed: { VCON_REPLICAS: '3', STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS) } });
  schema = ws.schemas.bigfeed;
  const r = await ws.run(['start', '--all', '--detach', '--instances-dir', ws.instancesDir], { timeout: 180_000 });
  expect(r.exitCode, r.stderr).toBe(0);
  const rows = JSON.parse((await ws.run(['status', '--json', '--instances-dir', ws.instancesDir])).stdout) as { group: string; url: string }[];
  urls = rows.filter((x) => x.group === 'bigfeed').map((x) => `${x.url}/api/v1`);
  admin = postgres(databaseUrl(), { max: 6, onnotice: () => undefined });
}, 240_000);

afterAll(async () => {
  await admin?.end({ timeout: 5 });
  await ws?.run(['stop', '--all', '--instances-dir', ws.instancesDir]);
  await ws?.cleanup();
});

describe('the change feed with 10,000 vCons across three processes', () => {
  it('shows a reader from the start every acknowledged write once, in commit order per vCon, across held transactions and two resumes', async () => {
    expect(urls.length).toBe(3);
    let clock = 0;
    const writes: Write[] = [];
    const holds: Hold[] = [];

    /** One write; a 503 (a busy pool or gate: nothing was written) is tried again, anything else but 2xx fails. */
    async function write(url: string, method: string, path: string, json: unknown): Promise<any> {
      for (let attempt = 1; ; attempt++) {
        const o = await request(`${url}${path}`, { method, json, key: KEY, timeoutMs: 120_000 });
        if (o.status === 503 && attempt < 20) {
          await sleep(200 * attempt);
          continue;
        }
        expect(o.status, `${method} ${path}: ${JSON.stringify(o.body ?? o.error).slice(0, 300)}`).toBeGreaterThanOrEqual(200);
        expect(o.status, `${method} ${path}: ${JSON.stringify(o.body ?? o.error).slice(0, 300)}`).toBeLessThan(300);
        return o.body;
      }
    }
    /** A write of one vCon, recorded with its place on the clock. */
    async function logged(uuid: string, kind: string, send: () => Promise<unknown>): Promise<void> {
      const issued = ++clock;
      await send();
      writes.push({ uuid, kind, issued, acked: ++clock });
    }

    /**
     * Holds the write `send` makes open after it took its cursor: an admin transaction locks the
     * vCon's party rows, which the write's next statement (the derived rows' rewrite of an update
     * or append; the delete trigger's cleanup) must delete. The lock is let go once the write is
     * seen waiting for it and later writes were acknowledged meanwhile.
     */
    async function held(uuid: string, kind: string, send: () => Promise<unknown>): Promise<void> {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let lockedBy!: (pid: number) => void;
      const locked = new Promise<number>((r) => (lockedBy = r));
      const tx = admin.begin(async (sql) => {
        const rows = await sql`select 1 from ${sql(schema)}.vcon_parties where vcon_uuid = ${uuid}::uuid for share`;
        expect(rows.length).toBeGreaterThan(0);
        const [{ pid }] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
        lockedBy(pid);
        await gate;
      });
      const pid = await Promise.race([locked, tx.then(() => Promise.reject(new Error('the hold ended before it locked')))]);
      const issued = ++clock;
      const sent = send();
      sent.catch(() => undefined);
      try {
        await waitFor(
          async () =>
            (await admin<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where ${pid}::int = any(pg_blocking_pids(pid))`)[0].n > 0,
          120_000,
          20,
          `the ${kind} of ${uuid} to wait for the held lock`,
        );
        const waiting = ++clock;
        const t0 = Date.now();
        // Writes sent after the held one was seen waiting, and acknowledged: what the checks below compare it with.
        const later = () => writes.filter((w) => w.issued > waiting).length;
        await waitFor(
          () => {
            const n = later();
            return (n >= HOLD_ACKS && Date.now() - t0 >= HOLD_MS) || (n > 0 && Date.now() - t0 >= HOLD_MAX_MS);
          },
          STATEMENT_TIMEOUT_MS / 2,
          50,
          'later writes during the hold',
        );
        const released = ++clock;
        holds.push({ uuid, kind, waiting, released, ms: Date.now() - t0 });
      } finally {
        release();
        await tx;
      }
      await sent;
      writes.push({ uuid, kind, issued, acked: ++clock });
    }

    // The reader: from the start of the log, cut off and resumed by Last-Event-ID on another process.
    const seen: Seen[] = [];
    const resumes: { sent: string; ready?: string }[] = [];
    let lastId: string | undefined;
    let connections = 0;
    const connect = (url: string): EventStream => {
      const n = connections++;
      const headers: Record<string, string> = { authorization: `Bearer ${KEY}` };
      if (lastId !== undefined) {
        headers['Last-Event-ID'] = lastId;
        resumes.push({ sent: lastId });
      }
      const resume = resumes.at(-1);
      return openEventStream(`${url}/changes/stream`, headers, (e) => {
        if (e.id !== undefined) lastId = e.id;
        if (e.event === 'ready' && n > 0) resume!.ready = e.id;
        const c = changeOf(e);
        if (c) seen.push({ cursor: BigInt(c.cursor), uuid: c.uuid, kind: c.kind, connection: n });
      });
    };
    let stream = connect(urls[0]);
    expect(await stream.status).toBe(200);

    // The writers: batches of creates on each process in turn; workers take each created vCon
    // through its update, append and delete, each on another process than the one before.
    const created = channel<{ uuid: string; i: number }>();
    let writing = true;
    const creator = async () => {
      for (let b = 0; b < VCONS / BATCH; b++) {
        await created.room(2 * BATCH);
        const docs = Array.from({ length: BATCH }, (_, k) => ({
          uuid: randomUUID(),
          vcon: '0.3.0',
          created_at: new Date().toISOString(),
          subject: `feed ${b * BATCH + k}`,
          parties: [{ name: `Caller ${b * BATCH + k}`, tel: '+15550100' }, { name: 'Agent' }],
        }));
        const issued = ++clock;
        const r = await write(urls[b % 3], 'POST', '/vcons/batch', docs);
        expect(r.created).toBe(BATCH);
        const acked = ++clock;
        for (const d of docs) writes.push({ uuid: d.uuid, kind: 'created', issued, acked });
        created.put(docs.map((d, k) => ({ uuid: d.uuid, i: b * BATCH + k })));
      }
      created.close();
    };
    const steps = [
      (uuid: string, i: number) =>
        i % 2 === 0
          ? write(urls[(i + 1) % 3], 'PATCH', `/vcons/${uuid}`, { subject: `feed ${i}, updated` })
          : write(urls[(i + 1) % 3], 'POST', '/vcons', {
              uuid,
              vcon: '0.3.0',
              subject: `feed ${i}, replaced`,
              parties: [{ name: `Caller ${i}` }, { name: 'Agent' }],
            }),
      (uuid: string, i: number) =>
        i % 2 === 0
          ? write(urls[(i + 2) % 3], 'POST', `/vcons/${uuid}/dialog`, {
              type: 'text',
              start: new Date().toISOString(),
              parties: [0, 1],
              body: `hello ${i}`,
              mediatype: 'text/plain',
            })
          : write(urls[(i + 2) % 3], 'POST', `/vcons/${uuid}/analysis`, { type: 'summary', vendor: 'test', body: `summary ${i}` }),
      (uuid: string, i: number) => write(urls[i % 3], 'DELETE', `/vcons/${uuid}`, undefined),
    ];
    const worker = async () => {
      for (let v = await created.take(); v; v = await created.take()) {
        const { uuid, i } = v;
        const holdStep = i % HOLD_EVERY === HOLD_EVERY / 2 ? (Math.floor(i / HOLD_EVERY) % steps.length) + 1 : 0;
        for (let s = 1; s < KINDS.length; s++) {
          const send = () => steps[s - 1](uuid, i);
          if (s === holdStep) await held(uuid, KINDS[s], send);
          else await logged(uuid, KINDS[s], send);
        }
      }
    };
    const load = Promise.all([creator(), ...Array.from({ length: WORKERS }, worker)]).finally(() => (writing = false));
    load.catch(() => undefined);

    // Two cuts, at a third and at two thirds of the log; each resumes on the next process once
    // more writes were acknowledged, so the new connection starts behind and catches up.
    for (const [cut, url] of [
      [TOTAL / 3, urls[1]],
      [(2 * TOTAL) / 3, urls[2]],
    ] as const) {
      await waitFor(() => seen.length >= cut || !writing, 900_000, 50, `the reader to reach ${cut} entries`);
      stream.close();
      await stream.ended;
      const acks = writes.length;
      await waitFor(() => writes.length >= acks + 300 || !writing, 900_000, 50, 'more writes while the reader is away');
      stream = connect(url);
      expect(await stream.status).toBe(200);
    }
    await load;
    // Every write is committed now: the reader is done once it has passed the log's last cursor
    // (a reader that skipped entries gets there too, and fails below rather than waiting).
    const [{ last }] = await admin<{ last: string }[]>`select max(cursor)::text as last from ${admin(schema)}.change_log`;
    await waitFor(() => lastId !== undefined && BigInt(lastId) >= BigInt(last), 900_000, 100, `the reader to reach cursor ${last}`);
    stream.close();
    await stream.ended;

    // Every write acknowledged, once each; the holds happened, each overlapping later writes.
    expect(writes.length).toBe(TOTAL);
    expect(holds.length).toBe(VCONS / HOLD_EVERY);
    expect(resumes.length).toBe(2);

    // Exactly once by cursor, cursors increasing across the three connections, nothing unacknowledged.
    expect(seen.length).toBe(TOTAL);
    expect(new Set(seen.map((s) => s.cursor)).size).toBe(seen.length);
    const outOfOrder = seen.findIndex((s, i) => i > 0 && s.cursor <= seen[i - 1].cursor);
    expect(outOfOrder, outOfOrder >= 0 ? `cursor ${seen[outOfOrder].cursor} after ${seen[outOfOrder - 1].cursor}` : '').toBe(-1);
    // Each resume started where the last connection stopped: its ready event names the id sent, and it delivered entries.
    for (const r of resumes) expect(r.ready).toBe(r.sent);
    for (let c = 0; c < connections; c++) expect(seen.some((s) => s.connection === c)).toBe(true);

    // Per vCon: its entries in the order its writes were acknowledged.
    const byVcon = new Map<string, string[]>();
    for (const s of seen) byVcon.set(s.uuid, [...(byVcon.get(s.uuid) ?? []), s.kind]);
    const acked = new Map<string, Write[]>();
    for (const w of writes) acked.set(w.uuid, [...(acked.get(w.uuid) ?? []), w]);
    expect(byVcon.size).toBe(VCONS);
    const wrong: string[] = [];
    for (const [uuid, ws] of acked) {
      const want = [...ws].sort((a, b) => a.acked - b.acked).map((w) => w.kind);
      if (JSON.stringify(byVcon.get(uuid)) !== JSON.stringify(want))
        wrong.push(`${uuid}: saw ${JSON.stringify(byVcon.get(uuid))}, acknowledged ${want}`);
    }
    expect(wrong.slice(0, 5)).toEqual([]);

    // A held write took its cursor before it waited: every write sent after it was seen waiting,
    // and acknowledged before it was let go, has a later cursor, and some did.
    const cursorOf = new Map(seen.map((s) => [`${s.uuid} ${s.kind}`, s.cursor]));
    for (const h of holds) {
      const heldCursor = cursorOf.get(`${h.uuid} ${h.kind}`)!;
      const during = writes.filter((w) => w.issued > h.waiting && w.acked < h.released);
      expect(during.length, `writes acknowledged while the ${h.kind} of ${h.uuid} was held`).toBeGreaterThan(0);
      for (const w of during) expect(cursorOf.get(`${w.uuid} ${w.kind}`)!).toBeGreaterThan(heldCursor);
    }

    // The stream is the log: the same entries as paging GET /changes from the start, on a process
    // the reader left. A page ends at that process's horizon, which passes the last cursor once the
    // transactions running in the cluster when it sampled have ended: read on until it does.
    const paged: string[] = [];
    let after = '0';
    await waitFor(
      async () => {
        const r = await request(`${urls[1]}/changes?after=${after}&limit=1000`, { key: KEY, timeoutMs: 60_000 });
        expect(r.status).toBe(200);
        const page = r.body as { data: { cursor: string; uuid: string; kind: string }[]; next_cursor: string; has_more: boolean };
        paged.push(...page.data.map((e) => `${e.cursor} ${e.uuid} ${e.kind}`));
        after = page.next_cursor;
        return !page.has_more && BigInt(after) >= BigInt(last);
      },
      300_000,
      0,
      `GET /changes to reach cursor ${last}`,
    );
    expect(paged).toEqual(seen.map((s) => `${s.cursor} ${s.uuid} ${s.kind}`));

    console.log(
      `[hardening] change feed: ${writes.length} writes, ${holds.length} holds (${holds.map((h) => `${h.kind} ${h.ms} ms`).join(', ')}), ` +
        `${connections} connections, ${seen.length} entries seen`,
    );
  }, 1_800_000);
});
