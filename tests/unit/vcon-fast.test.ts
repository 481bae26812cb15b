// The hand-written acceptor of plain vCons (src/domain/vcon.ts acceptsPlainVcon) skips the zod
// schema on writes: it may refuse what the schema accepts (the schema then decides), never accept
// what the schema refuses. Checked on real and generated vCons and on every small mutation of them.
import { describe, expect, it } from 'vitest';
import { acceptsPlainVcon, checkDepth, classifyVcon, scanDocument, Vcon, type JsonObject } from '../../src/domain/vcon.js';
import { unstorableText } from '../../src/domain/text.js';
import { ValidationError } from '../../src/domain/errors.js';
import { EXAMPLES } from '../../src/domain/examples.js';
import { loadFixtures } from '../helpers/fixtures.js';
import { generateVcon } from '../../scripts/bench/corpus.js';

const VALUES: unknown[] = [
  undefined,
  null,
  -1,
  0,
  1,
  2.5,
  1e10,
  2 ** 53,
  '',
  'x',
  'text',
  'incomplete',
  'summary',
  'not a date',
  '2024-02-30T00:00:00Z',
  '2024-01-01T00:00:00Z',
  '0000-01-01T00:00:00Z',
  'text/plain',
  'bad media',
  'json',
  'base64url',
  '6a3f0c2e-8b1d-4c5e-9f7a-0123456789ab',
  [],
  [0],
  [1, 0],
  [[0, 1]],
  [7],
  ['a'],
  [{}],
  {},
  true,
];

type Path = (string | number)[];

/** Paths of every value in `doc` down to `depth`, not inside bodies (large, and not checked by the schema). */
function paths(v: unknown, depth: number, at: Path = []): Path[] {
  if (depth === 0 || typeof v !== 'object' || v === null || at[at.length - 1] === 'body') return [];
  const keys: (string | number)[] = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return keys.flatMap((k) => [[...at, k], ...paths((v as Record<string | number, unknown>)[k], depth - 1, [...at, k])]);
}

function mutate(doc: JsonObject, path: Path, value: unknown): JsonObject {
  const copy = structuredClone(doc);
  let o = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) o = o[k] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (value === undefined && !Array.isArray(o)) delete o[last];
  else o[last] = value;
  return copy;
}

const docs: [string, JsonObject][] = [
  ...loadFixtures().map((f) => [f.name, f.json] as [string, JsonObject]),
  ...Object.entries(EXAMPLES),
  ...[0, 1, 2].map((i) => [`corpus ${i}`, generateVcon(3, i)] as [string, JsonObject]),
  ['minimal', {}],
  ['incomplete dialog', { parties: [{}], dialog: [{ type: 'incomplete', disposition: 'no-answer', parties: [0] }] }],
  ['attachment refs', { parties: [{}], dialog: [{ type: 'text' }], attachments: [{ party: 0, dialog: 0, start: '2024-01-01T00:00:00Z' }] }],
];

// Every small mutation of every document (over 30,000 checks): over a minute beside a second full
// run on 2 cores, so the timeout is the fuzz and equivalence tests' ceiling for a hang.
describe('acceptsPlainVcon', { timeout: 600_000 }, () => {
  it('accepts only what the Vcon schema accepts, on real vCons and every small mutation of them', () => {
    let accepted = 0;
    let valid = 0;
    let checked = 0;
    const loose: string[] = [];
    for (const [name, doc] of docs) {
      if ('payload' in doc || 'ciphertext' in doc) continue;
      const variants: [string, JsonObject][] = [[name, doc]];
      for (const p of paths(doc, 4).slice(0, 70))
        for (const value of VALUES) variants.push([`${name} ${JSON.stringify(p)}=${JSON.stringify(value)}`, mutate(doc, p, value)]);
      for (const extra of ['dialog', 'analysis', 'attachments', 'parties']) {
        if (Array.isArray(doc[extra]) && (doc[extra] as unknown[]).length) {
          variants.push([`${name} ${extra}[0].schema_version`, mutate(doc, [extra, 0, 'schema_version'], '1')]);
          variants.push([`${name} ${extra}[0].type=incomplete`, mutate(doc, [extra, 0, 'type'], 'incomplete')]);
        }
      }
      variants.push([`${name} __proto__`, JSON.parse(`{"__proto__":{"uuid":"x"},${JSON.stringify(doc).slice(1)}`.replace(',}', '}'))]);
      for (const [label, v] of variants) {
        checked++;
        const fast = acceptsPlainVcon(v);
        const schema = Vcon.safeParse(v).success;
        if (fast && !schema) loose.push(label);
        if (schema) valid++;
        if (fast && schema) accepted++;
      }
    }
    expect(loose).toEqual([]);
    expect(checked).toBeGreaterThan(30_000);
    // The fast path is taken for most valid documents, not refused wholesale.
    expect(accepted / valid).toBeGreaterThan(0.9);
    expect(
      docs.filter(([, d]) => !('payload' in d) && !('ciphertext' in d) && Vcon.safeParse(d).success && !acceptsPlainVcon(d)).map(([n]) => n),
    ).toEqual([]);
  });

  it('leaves refusals to the schema: the same problems, named the same way', () => {
    const problems = (doc: unknown) => {
      try {
        classifyVcon(doc);
        return undefined;
      } catch (err) {
        return { message: (err as ValidationError).message, details: (err as ValidationError).details };
      }
    };
    expect(problems({ parties: [{}], dialog: [{ type: 'text', parties: [0, 3] }] })).toEqual({
      message: 'Invalid vCon: dialog[0].parties: party index 3 is out of range (1 parties)',
      details: [{ path: 'dialog[0].parties', message: 'party index 3 is out of range (1 parties)' }],
    });
    expect(problems({ subject: 'a\u0000b' })?.details).toEqual([{ path: 'subject', message: 'must not contain NUL characters (\\u0000)' }]);
    expect(problems({ uuid: '6A3F0C2E-8B1D-4C5E-9F7A-0123456789AB' })).toBeUndefined();
    expect(classifyVcon({ uuid: '6A3F0C2E-8B1D-4C5E-9F7A-0123456789AB' }).uuid).toBe('6a3f0c2e-8b1d-4c5e-9f7a-0123456789ab');
  });
});

describe('scanDocument (the depth check and the text check of a create in one walk)', () => {
  const nest = (levels: number, leaf: unknown): unknown => (levels === 0 ? leaf : { a: [nest(levels - 1, leaf)] });
  const outcome = (f: () => unknown) => {
    try {
      return f();
    } catch (err) {
      return err instanceof ValidationError ? `${err.message} ${JSON.stringify(err.details)}` : err;
    }
  };
  it('throws where checkDepth throws, and else finds unstorable text where unstorableText does', () => {
    const docs: unknown[] = [
      ...Object.values(EXAMPLES),
      ...Array.from({ length: 20 }, (_, i) => generateVcon(3, i)),
      { subject: 'nul \u0000 here' },
      { ['key\u0000']: 'x' },
      { parties: [{ name: 'lone \ud800' }] },
      { ok: '😀 paired' },
      'a string',
      null,
      [1, [2, [3]]],
    ];
    // Depths around the bound (an object at level max + 1 is too deep, a string there is not),
    // with good and bad text on the way and at the bottom.
    for (const levels of [48, 49, 50, 51])
      for (const leaf of ['fine', 'bad \u0000', { k: 'v' }, 7]) docs.push(nest(levels, leaf), { x: 'bad \u0000', deep: nest(levels, leaf) });
    for (const doc of docs) {
      const expected = outcome(() => {
        checkDepth(doc);
        return { unstorable: unstorableText(doc, [], 1).length > 0 };
      });
      expect(outcome(() => scanDocument(doc))).toEqual(expected);
    }
    // Each level of nest is two (an object, an array): the 101st container is too deep, text or not.
    expect(outcome(() => scanDocument(nest(50, { k: 'bad \u0000' })))).toMatch(/nested deeper than 100 levels/);
    expect(scanDocument(nest(49, { k: 'bad \u0000' }))).toEqual({ unstorable: true });
    expect(scanDocument(nest(50, 'fine'))).toEqual({ unstorable: false });
  });
});
