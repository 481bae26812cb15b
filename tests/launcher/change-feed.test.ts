// The change feed of two groups run as operators run them: `vcon-launch start --detach`, one
// database, a schema and a key each. Each group's GET /changes, its SSE stream and MCP
// list_changes show only its own vCons, and one group's key opens nothing of the other's.
// `vcon-launch status` shows each group's webhook endpoints: alpha's receiver answers 410 (disabled
// at once), beta's 500 (failing), named by id and URL without its credentials or query.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointId } from '../../src/domain/webhook-endpoints.js';
import { openChangeStream } from '../helpers/sse.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { connectHttp } from '../mcp/helpers.js';
import { createWorkspace, waitFor, type Workspace } from './helpers.js';

const GROUPS = ['alpha', 'beta'] as const;
type Group = (typeof GROUPS)[number];
const keyOf: Record<Group, string> = { alpha: `alpha-key-${randomBytes(8).toString('hex')}`, beta: `beta-key-${randomBytes(8).toString('hex')}` };
const secretOf: Record<Group, string> = {
  alpha: `whsec_${randomBytes(32).toString('base64')}`,
  beta: `whsec_${randomBytes(32).toString('base64')}`,
};
// Credentials and a token in the URLs: status must show neither.
const token = randomBytes(8).toString('hex');
const password = randomBytes(8).toString('hex');

let ws: Workspace;
const rx = {} as Record<Group, Receiver>;
const hookUrl = {} as Record<Group, string>;
const base = {} as Record<Group, string>;

async function api(group: Group, method: string, p: string, json?: unknown, key = keyOf[group]) {
  const res = await fetch(`${base[group]}${p}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
    body: json === undefined ? undefined : JSON.stringify(json),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function write(group: Group, method: string, p: string, json?: unknown) {
  const r = await api(group, method, p, json);
  expect(r.status, `${group} ${method} ${p}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
  return r.body;
}

/** Every entry of a group's log through GET /changes, page by page. */
async function restChanges(group: Group): Promise<{ cursor: string; uuid: string }[]> {
  const out: { cursor: string; uuid: string }[] = [];
  let after = '';
  for (;;) {
    const r = await api(group, 'GET', `/changes?limit=7${after ? `&after=${after}` : ''}`);
    expect(r.status).toBe(200);
    out.push(...r.body.data);
    if (!r.body.has_more) return out;
    after = r.body.next_cursor;
  }
}

interface StatusRow {
  group: string;
  url: string;
  status: string;
  webhooks:
    | { id: string; url: string | null; state: string; failing_since: string | null; disabled_reason: string | null; last_error: string | null }[]
    | null;
}
const statusJson = async () => {
  const r = await ws.run(['status', '--json']);
  return { rows: JSON.parse(r.stdout) as StatusRow[], text: r.stdout };
};

beforeAll(async () => {
  rx.alpha = await startReceiver(() => 410);
  rx.beta = await startReceiver(() => 500);
  const extra: Record<string, Record<string, string>> = {};
  for (const g of GROUPS) {
    hookUrl[g] = `http://hook:${password}@127.0.0.1:${rx[g].port}/${g}-hook?token=${token}`;
    extra[g] = { API_KEYS: keyOf[g], WEBHOOK_URLS: hookUrl[g], WEBHOOK_SECRET: secretOf[g], WEBHOOK_ALLOW_PRIVATE: 'true' };
  }
  ws = createWorkspace([...GROUPS], extra);
  const r = await ws.run(['start', '--all', '--detach'], { timeout: 180_000 });
  expect(r.exitCode, r.stderr).toBe(0);
  const { rows } = await statusJson();
  for (const g of GROUPS) base[g] = `${rows.find((x) => x.group === g)!.url}/api/v1`;
}, 240_000);
afterAll(async () => {
  await ws?.run(['stop', '--all']);
  await ws?.cleanup();
  for (const g of GROUPS) await rx[g]?.stop();
});

describe('two groups through vcon-launch: each feed shows only its own changes', () => {
  it("GET /changes, the SSE stream and MCP list_changes of each group show only that group's vCons", async () => {
    // Live streams from the start, open before the writes.
    const live = Object.fromEntries(GROUPS.map((g) => [g, openChangeStream(base[g], '', {}, keyOf[g])])) as Record<
      Group,
      ReturnType<typeof openChangeStream>
    >;
    const mine: Record<Group, Set<string>> = { alpha: new Set(), beta: new Set() };
    const entries: Record<Group, number> = { alpha: 0, beta: 0 };
    try {
      for (const g of GROUPS) await waitFor(() => live[g].events.some((e) => e.event === 'ready'));
      // The groups' writes interleaved, each kind of change in both.
      for (let i = 0; i < 4; i++) {
        for (const g of GROUPS) {
          const { uuid } = await write(g, 'POST', '/vcons', { subject: `${g} ${i}`, parties: [{ name: 'a' }] });
          mine[g].add(uuid);
          await write(g, 'PUT', `/vcons/${uuid}/tags/group`, { value: g });
          entries[g] += 2;
          if (i % 2 === 1) {
            await write(g, 'DELETE', `/vcons/${uuid}`);
            entries[g]++;
          }
        }
      }
      for (const g of GROUPS) {
        const other = g === 'alpha' ? 'beta' : 'alpha';
        // The log shows an entry once the horizon passes it (docs/api.md "Changes"), not always at the write's answer.
        const rest = await waitFor(async () => {
          const all = await restChanges(g);
          return all.length >= entries[g] ? all : undefined;
        });
        expect(rest.length, g).toBe(entries[g]);
        expect(new Set(rest.map((c) => c.uuid))).toEqual(mine[g]);

        await waitFor(() => live[g].changes().length >= entries[g], 60_000, 50, `${g}'s live stream`);
        expect(new Set(live[g].changes().map((c: { uuid: string }) => c.uuid))).toEqual(mine[g]);
        // A stream opened afterwards from the start: the same entries, then nothing of the other group.
        const again = openChangeStream(base[g], '', {}, keyOf[g]);
        try {
          await waitFor(() => again.changes().length >= entries[g], 60_000, 50, `${g}'s stream from the start`);
          expect(again.changes().map((c: { id: string }) => c.id)).toEqual(rest.map((c) => c.cursor));
        } finally {
          await again.close();
        }

        const session = await connectHttp(base[g].replace(/\/api\/v1$/, ''), keyOf[g]);
        try {
          const r = await session.call('list_changes', { limit: 1000 });
          expect(r.isError, JSON.stringify(r.structuredContent)).toBeFalsy();
          const data = r.structuredContent.data as { uuid: string }[];
          expect(data.length).toBe(entries[g]);
          expect(new Set(data.map((c) => c.uuid))).toEqual(mine[g]);
          for (const u of mine[other]) expect(data.some((c) => c.uuid === u)).toBe(false);
        } finally {
          await session.close();
        }
      }
      // Once both have shown everything, neither live stream has shown an entry of the other.
      for (const g of GROUPS) expect(live[g].changes().length).toBe(entries[g]);
    } finally {
      for (const g of GROUPS) await live[g].close();
    }
  });

  it("refuses one group's key on the other group: REST, the stream and MCP", async () => {
    for (const [g, other] of [
      ['alpha', 'beta'],
      ['beta', 'alpha'],
    ] as const) {
      // REST answers an invalid key 401, MCP 403 (docs/api.md: MCP clients take a 401 for OAuth).
      const r = await api(other, 'GET', '/changes', undefined, keyOf[g]);
      expect(r.status, `${g}'s key on ${other}`).toBe(401);
      expect(r.body).toMatchObject({ error: 'unauthorized' });
      const stream = openChangeStream(base[other], '', {}, keyOf[g]);
      await waitFor(() => stream.status() !== 0);
      expect(stream.status()).toBe(401);
      await stream.close();
      expect(stream.changes()).toEqual([]);
      const refused = await connectHttp(base[other].replace(/\/api\/v1$/, ''), keyOf[g]).catch((err: unknown) => err);
      expect(refused).toMatchObject({ code: 403, message: expect.stringContaining('API key invalid') });
    }
  });
});

describe('vcon-launch status shows webhook endpoints', () => {
  it('a 410 disables the endpoint at once, a 500 leaves it failing: --json and the table say so, without the URL secrets', async () => {
    for (const g of GROUPS) await write(g, 'POST', '/vcons', { subject: `${g} hook`, parties: [{ name: 'a' }] });
    const done = (rows: StatusRow[]) => {
      const of = (g: Group) => rows.find((r) => r.group === g)?.webhooks?.[0];
      return of('alpha')?.state === 'disabled' && of('beta')?.state === 'failing' && of('beta')?.last_error === 'answered 500';
    };
    const { rows, text } = await waitFor(
      async () => {
        const s = await statusJson();
        return done(s.rows) ? s : undefined;
      },
      180_000,
      250,
      'status to show the endpoints failing and disabled',
    );
    const alpha = rows.find((r) => r.group === 'alpha')!;
    const beta = rows.find((r) => r.group === 'beta')!;
    expect(alpha.webhooks).toEqual([
      {
        id: endpointId(hookUrl.alpha),
        url: `http://127.0.0.1:${rx.alpha.port}/alpha-hook`,
        state: 'disabled',
        failing_since: expect.any(String),
        disabled_at: expect.any(String),
        disabled_reason: 'answered 410 Gone',
        last_error: 'answered 410',
        last_error_at: expect.any(String),
      },
    ]);
    expect(beta.webhooks).toEqual([
      {
        id: endpointId(hookUrl.beta),
        url: `http://127.0.0.1:${rx.beta.port}/beta-hook`,
        state: 'failing',
        failing_since: expect.any(String),
        disabled_at: null,
        disabled_reason: null,
        last_error: 'answered 500',
        last_error_at: expect.any(String),
      },
    ]);
    // The endpoints' trouble is theirs: both instances stay healthy.
    expect(rows.map((r) => r.status)).toEqual(['healthy', 'healthy']);
    for (const secret of [token, password, ...Object.values(secretOf), ...Object.values(keyOf)]) expect(text).not.toContain(secret);

    const table = await ws.run(['status']);
    expect(table.exitCode, table.stderr).toBe(0);
    const lines = table.stdout.split('\n');
    expect(lines[0]).toMatch(/\bWEBHOOKS\b/);
    const column = lines[0].indexOf('WEBHOOKS');
    expect(lines.find((l) => l.startsWith('alpha'))!.slice(column)).toMatch(/^1 disabled\s/);
    expect(lines.find((l) => l.startsWith('beta'))!.slice(column)).toMatch(/^1 failing\s/);
    expect(table.stdout).toMatch(
      new RegExp(
        `^alpha: webhook ${endpointId(hookUrl.alpha)} http://127\\.0\\.0\\.1:${rx.alpha.port}/alpha-hook disabled \\S+ ago \\(answered 410 Gone\\); nothing is sent until POST /webhooks/${endpointId(hookUrl.alpha)}/enable$`,
        'm',
      ),
    );
    expect(table.stdout).toMatch(
      new RegExp(
        `^beta: webhook ${endpointId(hookUrl.beta)} http://127\\.0\\.0\\.1:${rx.beta.port}/beta-hook failing for \\S+; last error \\S+ ago: answered 500$`,
        'm',
      ),
    );
    for (const secret of [token, password, ...Object.values(secretOf), ...Object.values(keyOf)]) expect(table.stdout).not.toContain(secret);
  }, 300_000);

  it('no API key or signing secret reaches a delivery or the instances’ log files', async () => {
    const deliveries = [...rx.alpha.received, ...rx.beta.received].map((r) => JSON.stringify(r)).join('\n');
    expect(deliveries.length).toBeGreaterThan(0);
    const logs = readdirSync(ws.instancesDir)
      .filter((f) => f.endsWith('.log'))
      .map((f) => readFileSync(path.join(ws.instancesDir, f), 'utf8'))
      .join('\n');
    for (const secret of [...Object.values(keyOf), ...Object.values(secretOf)]) {
      expect(deliveries).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });
});
