// Example vCons served by GET /examples/:type; each passes the service's own validation (tested).
import type { JsonObject } from './vcon.js';

const T0 = '2025-03-14T15:09:26Z';

export const EXAMPLES: Record<string, JsonObject> = {
  minimal: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000001',
    created_at: T0,
    parties: [],
  },
  phone_call: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000002',
    created_at: T0,
    subject: 'Billing question',
    parties: [
      { tel: '+15551230001', name: 'Alice Caller' },
      { tel: '+15551230002', name: 'Bob Agent', role: 'agent' },
    ],
    dialog: [
      {
        type: 'recording',
        start: T0,
        duration: 184.5,
        parties: [0, 1],
        originator: 0,
        mediatype: 'audio/x-wav',
        url: 'https://media.example.com/calls/0002.wav',
        content_hash: 'sha512-GLy6IPaIUM1GqzZqfIPZlWjaDsNgNvZM0iCONNThnH0a75fhUM6cYzLZ5GynSURREvZwmOh54-2lRRieyj82UQ',
      },
    ],
    analysis: [
      {
        type: 'summary',
        dialog: 0,
        vendor: 'example',
        encoding: 'none',
        body: 'The customer asked why their bill went up; the agent explained the new rate.',
      },
    ],
    attachments: [],
  },
  chat: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000003',
    created_at: T0,
    subject: 'Password reset',
    parties: [
      { mailto: 'carol@example.com', name: 'Carol' },
      { name: 'Support bot', role: 'agent' },
    ],
    dialog: [
      { type: 'text', start: T0, parties: [0], originator: 0, mediatype: 'text/plain', encoding: 'none', body: 'I cannot log in to my account.' },
      {
        type: 'text',
        start: '2025-03-14T15:09:40Z',
        parties: [1],
        originator: 1,
        mediatype: 'text/plain',
        encoding: 'none',
        body: 'I have sent you a password reset link.',
      },
    ],
  },
  email: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000004',
    created_at: T0,
    subject: 'Refund for order 1234',
    parties: [
      { mailto: 'dave@example.com', name: 'Dave' },
      { mailto: 'support@example.com', name: 'Support' },
    ],
    dialog: [
      {
        type: 'text',
        start: T0,
        parties: [0, 1],
        originator: 0,
        mediatype: 'text/plain',
        encoding: 'none',
        message_id: '<1234@mail.example.com>',
        body: 'Hello, the parcel arrived damaged. Could I get a refund?',
      },
    ],
  },
  video: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000005',
    created_at: T0,
    subject: 'Weekly stand-up',
    parties: [
      { name: 'Erin', mailto: 'erin@example.com' },
      { name: 'Frank', mailto: 'frank@example.com' },
    ],
    dialog: [
      {
        type: 'recording',
        start: T0,
        duration: 900,
        parties: [0, 1],
        mediatype: 'video/mp4',
        url: 'https://media.example.com/meetings/standup.mp4',
      },
    ],
    attachments: [{ purpose: 'agenda', start: T0, party: 0, mediatype: 'text/plain', encoding: 'none', body: '1. Blockers 2. Releases' }],
  },
  full_featured: {
    vcon: '0.3.0',
    uuid: '0195a1c2-0000-4000-8000-000000000006',
    created_at: T0,
    updated_at: T0,
    subject: 'Escalated complaint about a delayed delivery',
    extensions: ['lawful_basis'],
    critical: [],
    parties: [
      { tel: '+15551230003', name: 'Grace Customer', mailto: 'grace@example.com' },
      { tel: '+15551230004', name: 'Heidi Agent', role: 'agent' },
    ],
    dialog: [
      {
        type: 'recording',
        start: T0,
        duration: 320,
        parties: [0, 1],
        originator: 0,
        mediatype: 'audio/x-wav',
        url: 'https://media.example.com/calls/0006.wav',
      },
      {
        type: 'text',
        start: '2025-03-14T15:20:00Z',
        parties: [1],
        originator: 1,
        mediatype: 'text/plain',
        encoding: 'none',
        body: 'Follow-up: your replacement ships today.',
      },
      { type: 'incomplete', start: '2025-03-14T16:00:00Z', parties: [1, 0], originator: 1, disposition: 'no-answer' },
    ],
    analysis: [
      {
        type: 'transcript',
        dialog: 0,
        vendor: 'example-asr',
        product: 'asr-1',
        schema: 'example-transcript-v1',
        encoding: 'none',
        body: 'Customer: my delivery is two weeks late. Agent: I am sorry, I will escalate it.',
      },
      { type: 'summary', dialog: 0, vendor: 'example-llm', encoding: 'none', body: 'Late delivery escalated; replacement promised.' },
      { type: 'sentiment', dialog: [0, 1], vendor: 'example-llm', encoding: 'json', body: '{"score":-0.4,"label":"negative"}' },
    ],
    attachments: [
      { purpose: 'tags', encoding: 'json', body: ['priority:high', 'topic:delivery'] },
      { purpose: 'lawful_basis', start: T0, party: 0, encoding: 'json', body: { basis: 'contract' } },
    ],
  },
};

export const EXAMPLE_TYPES = Object.keys(EXAMPLES);
