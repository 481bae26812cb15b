import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/paths.js';

/** The 40 real vCons of shared/fixtures (copied with their SOURCES.md into tests/fixtures/vcons). */
export const FIXTURES_DIR = path.join(packageRoot, 'tests', 'fixtures', 'vcons');

export function loadFixtures(): { name: string; text: string; json: any }[] {
  return readdirSync(FIXTURES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((name) => {
      const text = readFileSync(path.join(FIXTURES_DIR, name), 'utf8');
      return { name, text, json: JSON.parse(text) };
    });
}

// Verdicts of the validation modes (VCON_VALIDATION) on these files.
/** Real files strict refuses, with the mode that first accepts each and the path of its warning. */
export const TOLERATED: Record<string, { from: 'ietf' | 'lenient'; paths: string[] }> = {
  'conserver__legacy-alg-signature-url-base64url-generation_info.json': { from: 'lenient', paths: ['analysis[0].body'] },
  'fake-vcons__text-bria-attachment-analysis-2.json': { from: 'lenient', paths: ['analysis[0].body'] },
  'fake-vcons__text-meta-only-bria-attachment-transcript-summary.json': { from: 'lenient', paths: ['analysis[0].body'] },
  'fake-vcons__text-with-transcript-summary-diarized.json': { from: 'lenient', paths: ['analysis[0].body'] },
  'ietf-draft__ab_call_ext_rec_analysis__transcript-json-body.json': { from: 'ietf', paths: ['analysis[0].body'] },
  'ietf-draft__ab_call_ext_rec_redacted__redacted-object.json': { from: 'ietf', paths: ['analysis[0].body'] },
  'ietf-draft__ab_call_ext_rec_with_redact__transcript-and-redacted-transcript.json': {
    from: 'ietf',
    paths: ['analysis[0].body', 'analysis[1].body'],
  },
  'ietf-meeting__video-dialog-chatlog-bluesheets-minutes.json': { from: 'lenient', paths: ['dialog[0].type'] },
  'ietf-meeting__video-dialog-type-url-slides.json': { from: 'lenient', paths: ['dialog[0].type'] },
  'ietf-meeting__video-url-wtf_transcription-analysis.json': { from: 'lenient', paths: ['dialog[0].type', 'analysis[0].body'] },
  'py-vcon__0.0.1-alg-signature-legacy-analysis.json': { from: 'lenient', paths: ['analysis[0].vendor'] },
  'py-vcon__0.0.1-inline-base64url-wav.json': { from: 'lenient', paths: ['dialog[0].start'] },
  'py-vcon__pre-0.0.1-rfc2822-start-no-uuid.json': { from: 'lenient', paths: ['dialog[0].start'] },
  'vcon-js__inline-wav-body-without-encoding-toplevel-tags.json': { from: 'lenient', paths: ['analysis[0].body'] },
  'vcon-lib__extensions-lawful_basis-wtf-attachments-encoding-base64.json': { from: 'lenient', paths: ['dialog[0].encoding'] },
};
/** Real files no mode accepts, with the path strict names: broken, not a slip. */
export const BROKEN: Record<string, string> = {
  'vcon-mcp__text-0.0.1-intent-analysis.json': 'uuid',
  'invalid__conserver__bad_duration.json': 'dialog[0].duration',
  'invalid__conserver__bad_mimetype.json': 'dialog[0].mimetype',
  'invalid__conserver__bad_party_ref.json': 'dialog[0].parties',
  'invalid__conserver__empty_vcon.json': 'uuid',
  'invalid__conserver__null_parties.json': 'parties',
};
