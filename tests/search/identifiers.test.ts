// Search never ranks nothing above something: identifier queries (phone numbers in the usual
// notations, e-mail addresses, uuids, order and ticket numbers) put the vCons that hold them first
// on every route, and no similarity is no semantic result (no padding with unrelated vCons at 0).
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { buildVcon } from './builders.js';

let srv: TestServer;

const KINDS = ['content', 'semantic', 'hybrid'] as const;
type Result = { uuid: string; score: number; keyword_rank?: number | null; semantic_rank?: number | null };
const search = async (kind: (typeof KINDS)[number], params: Record<string, string | number>) => {
  const r = await srv.api(`/vcons/search/${kind}?${new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]))}`);
  expect(r.status).toBe(200);
  return r.body.results as Result[];
};

/** A call with no transcript yet: its only text is its parties' phone numbers. */
const recording = (tels: string[], created_at = '2025-03-14T15:09:26Z') =>
  buildVcon({
    created_at,
    parties: tels.map((tel) => ({ tel })),
    dialog: [{ type: 'recording', start: created_at, parties: [0, 1], mediatype: 'audio/wav', url: 'https://example.com/r.wav', duration: 60 }],
  });

const phoneOnly = recording(['+12345678901', 'tel:+15550001234']);
const nearNumber = recording(['+12345678902', '+15550001234']);
const london = recording(['+44 20 7946 0958', '+15550001234'], '2025-05-01T09:00:00Z');
const mailer = buildVcon({
  subject: 'Invoice copy',
  parties: [{ name: 'Ines Cole', mailto: 'ines.cole@example.com' }, { name: 'Agent' }],
  turns: ['Could you send me a copy of my invoice?', 'Sent to your address on file.'],
});
const order = buildVcon({
  subject: 'Where is my parcel',
  turns: ['My order ORD-12345 has not arrived.', 'Ticket #48213 is open for it; the courier is looking.'],
});
const otherOrder = buildVcon({
  subject: 'Parcel late',
  turns: ['Order ORD-12346 is late too, ticket 48214.', 'We are sorry about the delay.'],
});
const locker = buildVcon({ subject: 'Locker', turns: ['Locker 123 next to door 456.'] });
// Whose whole text is a stop word: its vector has no direction, its similarity to anything is 0.
const one = buildVcon({ subject: 'one', parties: [{ name: 'A' }, { name: 'B' }] });
const refund = buildVcon({ subject: 'Damaged parcel', turns: ['The parcel arrived damaged and I want a refund.', 'Refund issued.'] });
const topics = [
  'kettle stopped heating',
  'router drops the wifi every evening',
  'hotel booking moved to another date',
  'password reset link expired',
  'gym membership cancellation',
  'dentist appointment rescheduled',
  'flight delayed by four hours',
  'washing machine leaks water',
  'bank card blocked abroad',
  'printer prints blank pages',
  'phone screen cracked in the box',
  'subscription charged twice',
  'laptop fan very noisy',
  'lost luggage in Madrid',
  'insurance claim for a broken window',
  'electricity bill too high',
  'newsletter keeps arriving after unsubscribing',
  'concert tickets refund',
  'pizza arrived cold',
  'car rental deposit not returned',
];
const fillers = topics.map((t) =>
  buildVcon({ subject: t, turns: [`Hello, my problem: ${t}.`, 'We will look into it and call you back on 555 0100.'] }),
);

beforeAll(async () => {
  srv = await startTestServer();
  const r = await srv.api('/vcons/batch?wait_for=search', {
    method: 'POST',
    json: [phoneOnly, nearNumber, london, mailer, order, otherOrder, locker, one, refund, ...fillers],
  });
  expect(r.status).toBe(201);
});
afterAll(async () => {
  await srv?.close();
});

describe('an identifier query finds the vCons that hold it first, on every route', () => {
  test.each(KINDS)('%s: a phone number, in any usual notation, puts the recording with that party first', async (kind) => {
    for (const q of ['+12345678901', '+1 (234) 567-8901', '234-567-8901', '(234) 567 8901', '234.567.8901', 'tel:+12345678901', '12345678901']) {
      const results = await search(kind, { q });
      expect(results[0]?.uuid, `${kind} ${q}`).toBe(phoneOnly.uuid);
      expect(results[0].score).toBe(1);
      // A number one digit off is not the same number.
      expect(results.slice(0, 1).map((x) => x.uuid)).not.toContain(nearNumber.uuid);
    }
    // A national notation with its trunk prefix finds the international one.
    expect((await search(kind, { q: '020 7946 0958' }))[0]?.uuid).toBe(london.uuid);
  });

  test('hybrid: the phone-number-only vCon is first among vCons none of which is similar to the query', async () => {
    const results = await search('hybrid', { q: '+12345678901', limit: 100 });
    expect(results[0].uuid).toBe(phoneOnly.uuid);
    // Nothing with no similarity and no keyword match is listed after it.
    expect(results.map((x) => x.uuid)).not.toContain(one.uuid);
  });

  test.each(KINDS)('%s: an e-mail address, in any case, puts the vCon of that party first', async (kind) => {
    for (const q of ['ines.cole@example.com', 'Ines.Cole@Example.COM', 'mailto:ines.cole@example.com']) {
      expect((await search(kind, { q }))[0]?.uuid, `${kind} ${q}`).toBe(mailer.uuid);
    }
  });

  test.each(KINDS)('%s: a vCon uuid puts that vCon first', async (kind) => {
    for (const v of [refund, phoneOnly]) {
      expect((await search(kind, { q: String(v.uuid).toUpperCase() }))[0]?.uuid).toBe(v.uuid);
    }
  });

  test('an order or ticket number puts the vCon that mentions it first, on every route', async () => {
    for (const kind of KINDS) {
      for (const q of ['ORD-12345', '#48213', '48213']) expect((await search(kind, { q }))[0]?.uuid, `${kind} ${q}`).toBe(order.uuid);
      expect((await search(kind, { q: 'ORD-12346' }))[0]?.uuid).toBe(otherOrder.uuid);
    }
  });

  test('the filters apply to exact hits, and their pages neither repeat nor skip a vCon, on every route', async () => {
    for (const kind of KINDS) {
      expect((await search(kind, { q: '02079460958', start_date: '2025-04-01T00:00:00Z' }))[0]?.uuid, kind).toBe(london.uuid);
      const later = await search(kind, { q: '02079460958', start_date: '2025-06-01T00:00:00Z' });
      expect(later.map((x) => x.uuid)).not.toContain(london.uuid);
      const all = (await search(kind, { q: '+1 555 000 1234', limit: 12 })).map((x) => x.uuid);
      expect(new Set(all.slice(0, 3)), kind).toEqual(new Set([phoneOnly.uuid, nearNumber.uuid, london.uuid]));
      const paged: string[] = [];
      for (let offset = 0; offset < 12; offset += 2)
        paged.push(...(await search(kind, { q: '+1 555 000 1234', limit: 2, offset })).map((x) => x.uuid));
      expect(paged, kind).toEqual(all);
    }
  });
});

describe('no similarity is no result', () => {
  test('semantic: a query the embedder cannot embed gives no results, not every vCon at score 0', async () => {
    // Two short runs of digits: not a phone number, and no word an embedding knows.
    expect(await search('semantic', { q: '123 456' })).toEqual([]);
    expect(await search('semantic', { q: '123 456', threshold: 0 })).toEqual([]);
  });

  test.each(['semantic', 'hybrid'] as const)('%s: results are not padded to limit with unrelated vCons', async (kind) => {
    const results = await search(kind, { q: 'damaged parcel refund', limit: 100 });
    expect(results[0].uuid).toBe(refund.uuid);
    expect(results.map((x) => x.uuid)).not.toContain(one.uuid);
    expect(results.length).toBeLessThan(100);
    if (kind === 'semantic') expect(results.every((x) => x.score >= 0.05)).toBe(true);
  });

  test('hybrid: a keyword match ranks above vCons of zero similarity, whatever the threshold', async () => {
    const results = await search('hybrid', { q: '123 456', threshold: 0, limit: 100 });
    expect(results.map((x) => x.uuid)).toEqual([locker.uuid]);
  });
});
