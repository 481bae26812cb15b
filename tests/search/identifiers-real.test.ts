// Identifier queries on real producers' vCons (tests/fixtures/vcons, sources in SOURCES.md there):
// calls, chats and e-mail threads found by a party's phone number or e-mail address first on every
// route, whichever notation the producer wrote (+1..., tel:+1..., +1-555-...).
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { loadFixtures } from '../helpers/fixtures.js';

let srv: TestServer;
/** Each party number (digits, leading zeros dropped) and address of an accepted fixture, with the vCons holding it. */
const byPhone = new Map<string, Set<string>>();
const byEmail = new Map<string, Set<string>>();

const add = (map: Map<string, Set<string>>, key: string, uuid: string) => map.set(key, (map.get(key) ?? new Set()).add(uuid));

beforeAll(async () => {
  srv = await startTestServer();
  // The last document stored under each uuid (some fixtures are versions of one vCon).
  const stored = new Map<string, { parties?: { tel?: unknown; mailto?: unknown }[] }>();
  for (const f of loadFixtures()) {
    const r = await srv.api('/vcons?wait_for=search', { method: 'POST', json: f.json });
    // What strict validation refuses is another test's concern; the accepted ones are searched.
    if (r.status === 201 || r.status === 200) stored.set(String((r.body as { uuid: string }).uuid), f.json);
  }
  for (const [uuid, doc] of stored) {
    for (const p of Array.isArray(doc.parties) ? doc.parties : []) {
      if (typeof p?.tel === 'string' && p.tel.replace(/\D/g, '').replace(/^0+/, '').length >= 7) add(byPhone, p.tel, uuid);
      if (typeof p?.mailto === 'string') add(byEmail, p.mailto.toLowerCase(), uuid);
    }
  }
  expect(byPhone.size).toBeGreaterThan(5);
  expect(byEmail.size).toBeGreaterThan(5);
});
afterAll(async () => {
  await srv?.close();
});

test('every party number and address of real vCons puts the vCons holding it first, on every route', async () => {
  const digitsOf = (tel: string) => tel.replace(/\D/g, '').replace(/^0+/, '');
  for (const kind of ['content', 'semantic', 'hybrid'] as const) {
    for (const [map, isPhone] of [
      [byPhone, true],
      [byEmail, false],
    ] as const) {
      for (const [q, holders] of map) {
        // Every notation of the same number holds it too.
        const want = isPhone ? new Set([...byPhone].filter(([tel]) => digitsOf(tel) === digitsOf(q)).flatMap(([, u]) => [...u])) : holders;
        const r = await srv.api(`/vcons/search/${kind}?${new URLSearchParams({ q, limit: '20' })}`);
        expect(r.status).toBe(200);
        const first = (r.body.results as { uuid: string }[]).slice(0, want.size).map((x) => x.uuid);
        expect(new Set(first), `${kind} ${q}`).toEqual(want);
      }
    }
  }
});
