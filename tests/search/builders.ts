import { randomUUID } from 'node:crypto';

/** A small valid vCon: subject, two parties, text dialog turns, optional analysis and attachment. */
export function buildVcon(opts: {
  uuid?: string;
  subject?: string;
  created_at?: string;
  parties?: { name?: string; mailto?: string; tel?: string }[];
  turns?: string[];
  analysis?: { type: string; body: string; encoding?: string; mediatype?: string }[];
  attachments?: Record<string, unknown>[];
  dialog?: Record<string, unknown>[];
}): Record<string, unknown> {
  const created = opts.created_at ?? '2025-03-14T15:09:26Z';
  const parties = opts.parties ?? [{ name: 'Customer', mailto: 'customer@example.com' }, { name: 'Agent' }];
  return {
    vcon: '0.3.0',
    uuid: opts.uuid ?? randomUUID(),
    created_at: created,
    ...(opts.subject !== undefined ? { subject: opts.subject } : {}),
    parties,
    dialog: [
      ...(opts.turns ?? []).map((body, i) => ({
        type: 'text',
        start: created,
        parties: [i % 2],
        originator: i % 2,
        mediatype: 'text/plain',
        encoding: 'none',
        body,
      })),
      ...(opts.dialog ?? []),
    ],
    analysis: (opts.analysis ?? []).map((a) => ({ vendor: 'test', ...a })),
    attachments: opts.attachments ?? [],
  };
}
