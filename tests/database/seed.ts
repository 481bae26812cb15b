// Known content for the database and analytics tests: four vCons whose every figure is written
// down here, so the routes' counts and breakdowns can be asserted exactly.
import { expect } from 'vitest';
import type { TestServer } from '../helpers/server.js';

/** Noon UTC on the 15th, `monthsAgo` months before the current month. */
export function midMonth(monthsAgo: number, now = new Date()): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - monthsAgo, 15, 12));
}

export const monthOf = (d: Date) => `${d.toISOString().slice(0, 7)}-01`;
export const dayOf = (d: Date) => d.toISOString().slice(0, 10);

export interface Seeded {
  uuids: string[];
  dates: Date[];
}

/**
 * a1 (a minute ago): 2 parties, recording 60 s + text, transcript/acme/asr + summary/acme,
 *   invoice attachment; tags status=open, priority=high.
 * a2 (mid last month): 3 parties, 2 texts + recording 120 s, sentiment/mood, legacy-typed
 *   attachment; tag status=closed.
 * a3 (mid-month three months ago): 1 party, nothing else; tag status=open.
 * a4 (2019): 2 parties, recording 30 s; no tags.
 */
export async function seedKnown(s: TestServer): Promise<Seeded> {
  const now = Date.now();
  const dates = [new Date(now - 60_000), midMonth(1), midMonth(3), new Date('2019-06-01T10:00:00Z')];
  const iso = (i: number) => dates[i].toISOString();
  const docs = [
    {
      vcon: '0.3.0',
      subject: 'Refund call',
      created_at: iso(0),
      parties: [
        { name: 'Alice', tel: '+15551230001' },
        { name: 'Bob', mailto: 'bob@example.com' },
      ],
      dialog: [
        { type: 'recording', start: iso(0), parties: [0, 1], duration: 60, mediatype: 'audio/x-wav', url: 'https://example.com/a.wav' },
        { type: 'text', start: iso(0), parties: [0], body: 'hello', encoding: 'none', mediatype: 'text/plain' },
      ],
      analysis: [
        { type: 'transcript', vendor: 'acme', product: 'asr', dialog: 0, body: 'hello there', encoding: 'none' },
        { type: 'summary', vendor: 'acme', body: 'short', encoding: 'none' },
      ],
      attachments: [{ purpose: 'invoice', encoding: 'json', body: { total: 12 } }],
    },
    {
      vcon: '0.3.0',
      subject: 'Chat',
      created_at: iso(1),
      parties: [{ name: 'Carol', tel: '+15551230002' }, { tel: '+15551230003' }, { mailto: 'dave@example.com' }],
      dialog: [
        { type: 'text', start: iso(1), parties: [0], body: 'hi', encoding: 'none', mediatype: 'text/plain' },
        { type: 'text', start: iso(1), parties: [1], body: 'hey', encoding: 'none', mediatype: 'text/plain' },
        { type: 'recording', start: iso(1), parties: [0, 1], duration: 120, mediatype: 'audio/x-wav', url: 'https://example.com/b.wav' },
      ],
      analysis: [{ type: 'sentiment', vendor: 'mood', body: 'positive', encoding: 'none' }],
      attachments: [{ type: 'legacy-note', encoding: 'none', body: 'abc' }],
    },
    { vcon: '0.3.0', subject: 'Lonely', created_at: iso(2), parties: [{ name: 'Grace' }] },
    {
      vcon: '0.3.0',
      subject: 'Old call',
      created_at: iso(3),
      parties: [{ name: 'Eve', tel: '+15551230009' }, { name: 'Frank' }],
      dialog: [{ type: 'recording', start: iso(3), parties: [0, 1], duration: 30, mediatype: 'audio/x-wav', url: 'https://example.com/c.wav' }],
    },
  ];
  const uuids: string[] = [];
  for (const doc of docs) {
    const r = await s.api('/vcons', { method: 'POST', json: doc });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    uuids.push(r.body.uuid);
  }
  const tag = async (i: number, key: string, value: string) => {
    const r = await s.api(`/vcons/${uuids[i]}/tags/${key}`, { method: 'PUT', json: { value } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  await tag(0, 'status', 'open');
  await tag(0, 'priority', 'high');
  await tag(1, 'status', 'closed');
  await tag(2, 'status', 'open');
  return { uuids, dates };
}
