// VCON_VALIDATION: what each mode accepts of real producers' vCons (tests/fixtures/vcons, sources
// and licences in SOURCES.md there) and of crafted minimal documents, one per slip, and what it
// says about what it tolerated. Broken documents are refused with strict's messages in every mode.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config.js';
import { readDocumentDate } from '../../src/domain/dates.js';
import { deriveRows } from '../../src/domain/derive.js';
import { extractUnits } from '../../src/search/units.js';
import { ValidationError } from '../../src/domain/errors.js';
import { classifyVcon, validateItem, VALIDATION_MODES, type ValidationMode } from '../../src/domain/vcon.js';
import { BROKEN, loadFixtures, TOLERATED } from '../helpers/fixtures.js';

const fixtures = loadFixtures();

const accepts = (mode: ValidationMode, from: 'ietf' | 'lenient') => mode === 'lenient' || (mode === 'ietf' && from === 'ietf');

function refusal(doc: unknown, mode: ValidationMode): ValidationError {
  try {
    classifyVcon(doc, undefined, mode);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`accepted in ${mode} mode`);
}

describe('VCON_VALIDATION', () => {
  it('is strict unless set, takes any case, and a bad value names the variable and the choices', () => {
    expect(parseConfig({}).validation).toBe('strict');
    expect(parseConfig({ VCON_VALIDATION: ' Lenient ' }).validation).toBe('lenient');
    expect(parseConfig({ VCON_VALIDATION: 'ietf' }).validation).toBe('ietf');
    let err: unknown;
    try {
      parseConfig({ VCON_VALIDATION: 'loose' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([{ variable: 'VCON_VALIDATION', message: 'must be one of strict, ietf, lenient' }]);
  });
});

describe('real vCons in each mode', () => {
  it('has a verdict for every fixture', () => {
    expect(fixtures.length).toBe(40);
    for (const name of [...Object.keys(TOLERATED), ...Object.keys(BROKEN)]) expect(fixtures.map((f) => f.name)).toContain(name);
  });

  for (const f of fixtures) {
    for (const mode of VALIDATION_MODES) {
      const tolerated = TOLERATED[f.name];
      if (BROKEN[f.name]) {
        it(`${mode}: refuses ${f.name} with the strict message`, () => {
          const err = refusal(f.json, mode);
          expect(err.details?.map((d) => d.path)).toContain(BROKEN[f.name]);
          expect(err.message).toBe(refusal(f.json, 'strict').message);
        });
      } else if (tolerated && !accepts(mode, tolerated.from)) {
        it(`${mode}: refuses ${f.name} at ${tolerated.paths[0]}`, () => {
          expect(refusal(f.json, mode).details?.map((d) => d.path)).toContain(tolerated.paths[0]);
        });
      } else {
        it(`${mode}: accepts ${f.name}${tolerated ? ' with warnings' : ''}, keeping the caller's object`, () => {
          const c = classifyVcon(f.json, undefined, mode);
          expect(c.doc).toBe(f.json);
          expect(c.warnings.map((w) => w.path)).toEqual(tolerated?.paths ?? []);
        });
      }
    }
  }
});

// Crafted minimal documents (not from any producer), one per slip the lenient mode reads.
const crafted = {
  objectBodyNone: { analysis: [{ type: 'transcript', vendor: 'v', encoding: 'none', body: { transcript: 'refund the parcel' } }] },
  arrayBodyNoEncoding: { analysis: [{ type: 'transcript', vendor: 'v', body: [{ text: 'hello' }] }] },
  numberBodyJson: { analysis: [{ type: 'score', vendor: 'v', encoding: 'json', body: 0.93 }] },
  base64Dialog: { parties: [{}], dialog: [{ type: 'text', parties: [0], encoding: 'base64', body: 'aGk=' }] },
  rfc2822: {
    created_at: 'Wed, 18 May 2022 23:05:05 -0000',
    updated_at: 'Thu, 19 May 2022 01:00:00 +0200',
    dialog: [{ type: 'text', start: '18 May 2022 23:05:05 GMT', body: 'x', encoding: 'none' }],
    attachments: [{ purpose: 'note', start: 'Wed, 18 May 2022 23:05:05 -0000', body: 'n' }],
  },
  video: { dialog: [{ type: 'video', url: 'https://example.com/v' }] },
  noVendor: { analysis: [{ type: 'summary', body: 's' }] },
};

describe('crafted slips', () => {
  it('ietf takes any JSON value as an analysis body with encoding json, and nothing else strict refuses', () => {
    expect(refusal(crafted.numberBodyJson, 'strict').details).toEqual([
      { path: 'analysis[0].body', message: expect.stringMatching(/must be a string/) },
    ]);
    expect(classifyVcon(crafted.numberBodyJson, undefined, 'ietf').warnings).toEqual([
      { path: 'analysis[0].body', message: 'is a JSON value with encoding "json", which the IETF vCon draft allows: stored as sent' },
    ]);
    for (const doc of [crafted.objectBodyNone, crafted.arrayBodyNoEncoding, crafted.base64Dialog, crafted.rfc2822, crafted.video, crafted.noVendor]) {
      expect(refusal(doc, 'ietf').message).toBe(refusal(doc, 'strict').message);
    }
  });

  it('lenient takes each slip and says what it made of it', () => {
    const warnings = (doc: unknown) => classifyVcon(doc, undefined, 'lenient').warnings;
    expect(warnings(crafted.objectBodyNone)).toEqual([{ path: 'analysis[0].body', message: 'is a JSON object with encoding "none": read as JSON' }]);
    expect(warnings(crafted.arrayBodyNoEncoding)).toEqual([
      { path: 'analysis[0].body', message: 'is a JSON array with encoding absent: read as JSON' },
    ]);
    expect(warnings(crafted.base64Dialog)).toEqual([
      { path: 'dialog[0].encoding', message: `"base64" is not a vCon encoding: read as standard base64, base64url's sibling` },
    ]);
    expect(warnings(crafted.rfc2822)).toEqual([
      { path: 'created_at', message: 'is an RFC 2822 date: read as 2022-05-18T23:05:05.000Z' },
      { path: 'updated_at', message: 'is an RFC 2822 date: read as 2022-05-18T23:00:00.000Z' },
      { path: 'dialog[0].start', message: 'is an RFC 2822 date: read as 2022-05-18T23:05:05.000Z' },
      { path: 'attachments[0].start', message: 'is an RFC 2822 date: read as 2022-05-18T23:05:05.000Z' },
    ]);
    expect(warnings(crafted.video)).toEqual([{ path: 'dialog[0].type', message: '"video" is not a vCon dialog type: stored as sent' }]);
    expect(warnings(crafted.noVendor)).toEqual([{ path: 'analysis[0].vendor', message: 'is missing: accepted without a vendor' }]);
  });

  it('refuses broken documents in every mode with the strict messages', () => {
    const broken = [
      { uuid: 'SAMPLE-1234-abcd-5678' },
      { parties: [{}], dialog: [{ type: 'text', parties: [3] }] },
      { dialog: [{ type: 'recording', duration: -30 }] },
      { dialog: [{ type: 'recording', duration: 'long' }] },
      { parties: null },
      { dialog: [{ type: 7 }] },
      { dialog: [{ type: '' }] },
      { created_at: 'Wed, 31 Feb 2022 23:05:05 -0000' },
      { created_at: 'yesterday' },
      { analysis: [{ type: 'summary', vendor: 'v', encoding: 'none', body: 42 }] },
      { analysis: [{ type: 'summary', vendor: 'v', encoding: 'base64url', body: { a: 1 } }] },
      { analysis: [{ type: 'summary', vendor: 7 }] },
      { dialog: [{ type: 'text', encoding: 'hex' }] },
    ];
    for (const doc of broken) {
      const strict = refusal(doc, 'strict');
      for (const mode of ['ietf', 'lenient'] as const) expect(refusal(doc, mode).message, JSON.stringify(doc)).toBe(strict.message);
    }
  });

  it('appends are validated under the mode too', () => {
    const body = { type: 'transcript', vendor: 'v', encoding: 'json', body: { text: 'hi' } };
    expect(() => validateItem('analysis', body, 'strict', 'analysis')).toThrow(/body: must be a string/);
    expect(validateItem('analysis', body, 'ietf', 'analysis')).toEqual([
      { path: 'body', message: 'is a JSON value with encoding "json", which the IETF vCon draft allows: stored as sent' },
    ]);
    expect(() => validateItem('dialog', { type: 'video' }, 'ietf', 'dialog')).toThrow(/type: must be one of/);
    expect(validateItem('dialog', { type: 'video' }, 'lenient', 'dialog')).toEqual([
      { path: 'type', message: '"video" is not a vCon dialog type: stored as sent' },
    ]);
    expect(() => validateItem('dialog', { type: 'recording', duration: -1 }, 'lenient', 'dialog')).toThrow(/duration: must be ≥ 0/);
  });
});

describe('downstream reads the tolerated forms', () => {
  it('an RFC 2822 date is the instant it names', () => {
    expect(readDocumentDate('Wed, 18 May 2022 23:05:05 -0000')?.toISOString()).toBe('2022-05-18T23:05:05.000Z');
    expect(readDocumentDate('18 May 2022 23:05 +0130')?.toISOString()).toBe('2022-05-18T21:35:00.000Z');
    expect(readDocumentDate('Wed, 31 Feb 2022 23:05:05 -0000')).toBeUndefined();
    // A year below 100 is that year, not 19xx; 0100 is no leap year.
    expect(readDocumentDate('Sat, 01 Jan 0050 00:00:00 +0000')?.toISOString()).toBe('0050-01-01T00:00:00.000Z');
    expect(readDocumentDate('29 Feb 0100 00:00 GMT')).toBeUndefined();
    expect(readDocumentDate('29 Feb 2000 00:00 GMT')?.toISOString()).toBe('2000-02-29T00:00:00.000Z');
    const rows = deriveRows(crafted.rfc2822, 'plain', new Date(0));
    expect(rows.created_at.toISOString()).toBe('2022-05-18T23:05:05.000Z');
    expect(rows.updated_at?.toISOString()).toBe('2022-05-18T23:00:00.000Z');
  });

  it('search indexes the text values of an object body sent with encoding none, not its keys', () => {
    const units = extractUnits(crafted.objectBodyNone);
    expect(units).toEqual([{ source: 'analysis', idx: 0, body: 'refund the parcel' }]);
    expect(extractUnits(crafted.arrayBodyNoEncoding)).toEqual([{ source: 'analysis', idx: 0, body: 'hello' }]);
  });
});
