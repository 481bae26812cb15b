// Ranked keyword search: OR ranking weighted by the group's own statistics, web-search
// syntax (phrases, -exclusions, or), typo correction from the group's vocabulary with
// corrected_query over REST and MCP, and the three vCon shapes (chat, call, email) on every route.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, KEY, type TestServer } from '../helpers/server.js';
import { connectHttp, type HttpSession } from '../mcp/helpers.js';
import { buildVcon } from './builders.js';

let srv: TestServer;
let mcp: HttpSession;

const search = async (kind: 'content' | 'semantic' | 'hybrid', q: string) => {
  const r = await srv.api(`/vcons/search/${kind}?${new URLSearchParams({ q })}`);
  expect(r.status).toBe(200);
  return r.body as { corrected_query?: string | null; count: number; results: { uuid: string; matches: { snippet: string }[] }[] };
};
const uuids = (r: { results: { uuid: string }[] }) => r.results.map((x) => x.uuid);

const three = buildVcon({ subject: 'Camping order', turns: ['I bought a walnut paddle, a kayak and a lantern from you.', 'Thanks for your order.'] });
const two = buildVcon({ subject: 'Boat order', turns: ['The kayak arrived but the lantern is missing.', 'Sorry about your order.'] });
const one = buildVcon({ subject: 'Light order', turns: ['My lantern flickers.', 'We will replace your order.'] });
const rare = buildVcon({ subject: 'Grain mill', turns: ['The quern I ordered has a chipped millstone.', 'We will send a new one.'] });
const blue = buildVcon({ subject: 'Kettle colour', turns: ['The blue kettle came with a dent.', 'We can exchange it.'] });
const red = buildVcon({ subject: 'Kettle lid', turns: ['The red kettle lid is loose.', 'A new lid is on its way.'] });
const queen = buildVcon({ subject: 'Bed size', turns: ['Is the queen bed frame in stock?', 'Yes, order today.'] });
// The three shapes: a chat (above), a call with a transcript and a summary, an email.
const call = buildVcon({
  subject: 'Inbound call',
  dialog: [
    { type: 'recording', start: '2025-03-14T15:09:26Z', parties: [0, 1], mediatype: 'audio/wav', url: 'https://example.com/call.wav', duration: 95 },
  ],
  analysis: [
    {
      type: 'transcript',
      encoding: 'json',
      body: JSON.stringify({ transcript: 'Customer: my dishwasher shows error E24 and will not drain. Agent: please clean the sump filter.' }),
    },
    { type: 'summary', encoding: 'none', body: 'Dishwasher drain fault; agent explained how to clean the filter.' },
  ],
});
const email = buildVcon({
  subject: 'Email',
  dialog: [
    {
      type: 'text',
      start: '2025-03-14T15:10:00Z',
      parties: [0],
      mediatype: 'message/rfc822',
      encoding: 'none',
      body: 'From: Ines <ines@example.com>\r\nTo: Support <help@shop.example>\r\nSubject: Scooter battery\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nMy electric scooter battery swells when charging =E2=80=94 is it safe?\r\n',
    },
  ],
});

beforeAll(async () => {
  srv = await startTestServer();
  // wait_for=search: these tests are about ranking, not about the bounded catch-up of a search
  // right after a write (tests/search/index-queue.test.ts), which a loaded machine can outlast.
  const r = await srv.api('/vcons/batch?wait_for=search', { method: 'POST', json: [three, two, one, rare, blue, red, queen, call, email] });
  expect(r.status).toBe(201);
  mcp = await connectHttp(srv.instance.url!, KEY);
});
afterAll(async () => {
  await mcp?.close();
  await srv?.close();
});

describe('keyword ranking', () => {
  test('a vCon matching more of the words ranks higher; any one word is enough to be found', async () => {
    const r = await search('content', 'walnut kayak lantern');
    expect(uuids(r).slice(0, 3)).toEqual([three.uuid, two.uuid, one.uuid]);
    expect(r.corrected_query).toBeNull();
  });

  test('a rare word outweighs a common one', async () => {
    // "order" is in most vCons, "quern" in one.
    expect(uuids(await search('content', 'order quern'))[0]).toBe(rare.uuid);
  });

  test('"phrases" are required, -words excluded, or keeps both sides', async () => {
    expect(uuids(await search('content', '"blue kettle"'))).toEqual([blue.uuid]);
    expect(uuids(await search('content', 'kettle -blue'))).toEqual([red.uuid]);
    expect(uuids(await search('content', 'kettle -"blue kettle"'))).toEqual([red.uuid]);
    expect(new Set(uuids(await search('content', 'quern or scooter')))).toEqual(new Set([rare.uuid, email.uuid]));
  });

  test('a query of stop words, or of words no vCon has, is a clear empty result', async () => {
    for (const q of ['the and of', 'zzqx']) {
      const r = await search('content', q);
      expect(r.count).toBe(0);
      expect(r.results).toEqual([]);
    }
  });
});

describe('typo correction', () => {
  test("a word in no vCon is corrected from the group's vocabulary and the response says so (REST)", async () => {
    for (const kind of ['content', 'hybrid'] as const) {
      const r = await search(kind, 'lanturn flickers');
      expect(r.corrected_query).toBe('lantern flickers');
      expect(uuids(r)[0]).toBe(one.uuid);
    }
  });

  test('the same over MCP', async () => {
    const r = await mcp.call('search_vcons_content', { q: 'scoter battery' });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent.corrected_query).toBe('scooter battery');
    expect(r.structuredContent.results[0].uuid).toBe(email.uuid);
  });

  test('a correctly spelt rare word is never corrected away (not to the common "queen")', async () => {
    const r = await search('content', 'quern');
    expect(r.corrected_query).toBeNull();
    expect(uuids(r)).toEqual([rare.uuid]);
  });
});

describe('the three shapes on every route', () => {
  test.each([
    ['chat', 'walnut paddle', three],
    ['call (transcript and summary)', 'dishwasher E24 drain', call],
    ['email', 'scooter battery swells', email],
  ] as const)('%s', async (_shape, q, doc) => {
    for (const kind of ['content', 'semantic', 'hybrid'] as const) {
      expect(uuids(await search(kind, q))[0], `${kind}: ${q}`).toBe(doc.uuid);
    }
  });
});
