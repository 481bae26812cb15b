// Every fixture of shared/fixtures/vcons through the real HTTP API: invalid__* files are rejected
// with a useful message; every other file is either stored and returned deeply equal, or rejected
// for a reason docs/api.md "Validation" names (listed below, file by file).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadFixtures } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Real producer files that docs/api.md rejects, with the rule and the path the 400 must name. */
const REJECTED: Record<string, { rule: string; path: string; message: RegExp }> = {
  'conserver__legacy-alg-signature-url-base64url-generation_info.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'fake-vcons__text-bria-attachment-analysis-2.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'fake-vcons__text-meta-only-bria-attachment-transcript-summary.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'fake-vcons__text-with-transcript-summary-diarized.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'ietf-draft__ab_call_ext_rec_analysis__transcript-json-body.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'ietf-draft__ab_call_ext_rec_redacted__redacted-object.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'ietf-draft__ab_call_ext_rec_with_redact__transcript-and-redacted-transcript.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'vcon-js__inline-wav-body-without-encoding-toplevel-tags.json': {
    rule: 'analysis body must be a string',
    path: 'analysis[0].body',
    message: /must be a string/,
  },
  'ietf-meeting__video-dialog-chatlog-bluesheets-minutes.json': {
    rule: 'dialog type video is not a vCon dialog type',
    path: 'dialog[0].type',
    message: /must be one of recording, recording-set, text, transfer, incomplete/,
  },
  'ietf-meeting__video-dialog-type-url-slides.json': { rule: 'dialog type video', path: 'dialog[0].type', message: /must be one of/ },
  'ietf-meeting__video-url-wtf_transcription-analysis.json': { rule: 'dialog type video', path: 'dialog[0].type', message: /must be one of/ },
  'py-vcon__0.0.1-alg-signature-legacy-analysis.json': { rule: 'analysis vendor is required', path: 'analysis[0].vendor', message: /required/ },
  'py-vcon__0.0.1-inline-base64url-wav.json': { rule: 'RFC 2822 dates are rejected', path: 'dialog[0].start', message: /RFC 3339/ },
  'py-vcon__pre-0.0.1-rfc2822-start-no-uuid.json': { rule: 'RFC 2822 dates are rejected', path: 'dialog[0].start', message: /RFC 3339/ },
  'vcon-lib__extensions-lawful_basis-wtf-attachments-encoding-base64.json': {
    rule: 'legacy encoding base64',
    path: 'dialog[0].encoding',
    message: /base64url, json, none/,
  },
  'vcon-mcp__text-0.0.1-intent-analysis.json': { rule: 'uuid must be a UUID', path: 'uuid', message: /UUID/ },
};

/** What the invalid__ files must be rejected for. */
const INVALID: Record<string, string> = {
  'invalid__conserver__bad_duration.json': 'dialog[0].duration',
  'invalid__conserver__bad_mimetype.json': 'dialog[0].mimetype',
  'invalid__conserver__bad_party_ref.json': 'dialog[0].parties',
  'invalid__conserver__empty_vcon.json': 'uuid',
  'invalid__conserver__null_parties.json': 'parties',
};

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(() => s?.close());

const fixtures = loadFixtures();

describe('fixtures', () => {
  it('has all 40 files and a verdict for each', () => {
    expect(fixtures.length).toBe(40);
  });

  for (const f of fixtures) {
    if (f.name.startsWith('invalid__')) {
      it(`rejects ${f.name} with a useful message`, async () => {
        const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: { 'content-type': 'application/json' } });
        expect(r.status).toBe(400);
        expect(r.body.error).toBe('validation_failed');
        expect(r.body.details.map((d: any) => d.path)).toContain(INVALID[f.name]);
        expect(r.body.message).toContain(INVALID[f.name]);
      });
    } else if (REJECTED[f.name]) {
      const why = REJECTED[f.name];
      it(`rejects ${f.name} (${why.rule})`, async () => {
        const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: { 'content-type': 'application/json' } });
        expect(r.status).toBe(400);
        const detail = r.body.details.find((d: any) => d.path === why.path);
        expect(detail, JSON.stringify(r.body.details)).toBeDefined();
        expect(detail.message).toMatch(why.message);
      });
    } else {
      it(`stores ${f.name} and returns it unchanged`, async () => {
        const r = await s.api('/vcons', { method: 'POST', body: f.text, headers: { 'content-type': 'application/vcon+json' } });
        // Some producers reuse a uuid across files (the IETF examples): a re-post replaces (200).
        expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
        const g = await s.api(`/vcons/${r.body.uuid}`);
        expect(g.status).toBe(200);
        const expected: Record<string, unknown> = { ...f.json };
        const got = g.body.vcon;
        const opaque = 'payload' in f.json || 'ciphertext' in f.json;
        if (!opaque) {
          // The only service-set fields: uuid (when missing) and created_at (when missing).
          if (!('uuid' in f.json)) expect(got.uuid).toBe(r.body.uuid);
          else expect(r.body.uuid).toBe(String(f.json.uuid).toLowerCase());
          if (!('created_at' in f.json)) expect(Date.parse(got.created_at)).toBeGreaterThan(Date.now() - 60_000);
          expected.uuid = got.uuid;
          expected.created_at = got.created_at;
          if (r.status === 200) expected.updated_at = got.updated_at;
        }
        expect(got).toEqual(expected);
        // Key order of the fields the producer sent survives too.
        const order = Object.keys(got).filter((k) => k in f.json);
        expect(order).toEqual(Object.keys(f.json));
      });
    }
  }
});
