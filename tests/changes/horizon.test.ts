// Where the change service's horizon stands. A stream opened with after=now starts at the end of
// the log, never at its start, also on a process that has not read the log yet while another
// transaction runs (on a shared database something always does: replicas, indexers, other
// groups). Such a transaction, holding a transaction id, is held open across the service's samples
// here: from the horizon as of now the stream started at cursor 0 and sent the whole retained log
// to a client that asked for new changes. And a write after a quiet spell is sampled twice at once,
// not a poll apart (the poll's timer is faked: only its firings sample the log, besides that one).
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createChangeRepo } from '../../src/db/change-repo.js';
import { createVconRepo } from '../../src/db/vcon-repo.js';
import { deriveRows } from '../../src/domain/derive.js';
import { classifyVcon } from '../../src/domain/vcon.js';
import { createChangeService } from '../../src/services/change-service.js';
import { adminSql, createTestSchema, type TestSchema } from '../helpers/db.js';
import { waitFor } from '../helpers/poll.js';

let t: TestSchema;
beforeAll(async () => {
  t = await createTestSchema('horizon');
});
afterAll(() => t?.drop());

/** Writes one vCon (committed when this returns) and answers its cursor. */
async function write(): Promise<bigint> {
  const uuid = randomUUID();
  const c = classifyVcon({ vcon: '0.3.0', uuid, created_at: new Date().toISOString(), subject: 'horizon', parties: [] });
  await createVconRepo(t.sql).insertNew([{ uuid, kind: c.kind, doc: c.doc, derived: deriveRows(c.doc, c.kind, new Date()) }], null);
  const [r] = await t.sql<{ cursor: string }[]>`select cursor::text from change_log where uuid = ${uuid}::uuid`;
  return BigInt(r.cursor);
}

/**
 * An open transaction of another session that holds a transaction id, older than anything the
 * service samples after this; `end()` commits it.
 */
async function olderTransaction() {
  const admin = adminSql();
  let end!: () => void;
  const ended = new Promise<void>((r) => (end = r));
  let began!: () => void;
  const running = new Promise<void>((r) => (began = r));
  const tx = admin.begin(async (sql) => {
    await sql`select pg_current_xact_id()`;
    began();
    await ended;
  });
  await Promise.race([running, tx]);
  return {
    async end() {
      end();
      await tx;
      await admin.end();
    },
  };
}

/** A change service on the real repo, with the number of samples it has taken of the log. */
function countingService(pollMs = 10) {
  const repo = createChangeRepo(t.sql);
  const counter = { samples: 0 };
  const sample = async () => {
    const s = await repo.sample();
    counter.samples++;
    return s;
  };
  return { counter, service: createChangeService({ repo: { ...repo, sample }, retentionHours: 24, pollMs }) };
}

describe('GET /changes/stream?after=now', () => {
  it('starts at the end of the log on a process that has not read it, once the transactions older than the request end', async () => {
    const last = await write();
    const older = await olderTransaction();
    const { counter, service } = countingService();
    try {
      let opened = false;
      const opening = service.openStream({ after: 'now' }, undefined);
      void opening.then(() => (opened = true));
      // It waits for the older transaction (a cursor it may take is before "now") ...
      await waitFor(() => counter.samples >= 3 || opened, 20_000, 10, 'the service to sample the log');
      expect(opened).toBe(false);
      await older.end();
      // ... then starts where the log ended when it was asked, not at its start.
      expect((await opening).after).toBeGreaterThanOrEqual(last);
    } finally {
      service.stop();
    }
  });
});

describe('sampling the log while something follows it', () => {
  afterEach(() => vi.useRealTimers());

  it('takes the sample that pairs new cursors with a transaction id at once after a quiet spell, not a poll later', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { counter, service } = countingService(50);
    const following = new AbortController();
    service.watch(() => undefined, following.signal);
    /** One firing of the poll's timer, and the samples it led to. */
    const poll = async () => {
      const n = counter.samples;
      vi.advanceTimersByTime(50);
      await waitFor(() => counter.samples > n, 20_000, 5, 'the poll to sample the log');
    };
    try {
      // Quiet: the horizon has reached the log's last value (other sessions' transactions end meanwhile).
      const [{ last }] = await t.sql<{ last: string | null }[]>`select pg_sequence_last_value('change_log_cursor_seq')::text as last`;
      for (let i = 0; i < 2 || service.horizon < BigInt(last ?? '0'); i++) await poll();
      await write();
      const before = counter.samples;
      await poll();
      // No further firing: the second sample follows the first by itself.
      await waitFor(() => counter.samples >= before + 2, 20_000, 5, 'a second sample without a poll');
      expect(counter.samples).toBe(before + 2);
    } finally {
      following.abort();
      service.stop();
    }
  });
});
