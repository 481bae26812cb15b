// Counting a body's JSON values on its bytes, before the parse: exact for valid JSON (the real
// vCons of the fixtures, and the corners: strings holding structure, escapes, empty containers,
// bare scalars), and stopping at the bound instead of walking the rest.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { countJsonValues, checkJsonValues } from '../../src/domain/elements.js';
import { classifyVcon, DEFAULT_MAX_ELEMENTS } from '../../src/domain/vcon.js';
import { packageRoot } from '../../src/paths.js';

/** The values of a parsed document, walked. */
function valuesOf(doc: unknown): number {
  let n = 0;
  const stack = [doc];
  while (stack.length) {
    const v = stack.pop();
    n++;
    if (typeof v === 'object' && v !== null) stack.push(...Object.values(v));
  }
  return n;
}

const bytes = (text: string) => Buffer.from(text);

describe('countJsonValues', () => {
  it('counts what the parse would make, for every fixture vCon, compact and pretty', () => {
    const dir = path.join(packageRoot, 'tests', 'fixtures', 'vcons');
    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(30);
    let largest = 0;
    for (const f of files) {
      const text = readFileSync(path.join(dir, f), 'utf8');
      const doc = JSON.parse(text) as unknown;
      const n = valuesOf(doc);
      largest = Math.max(largest, n);
      expect(countJsonValues(bytes(text)), f).toBe(n);
      expect(countJsonValues(bytes(JSON.stringify(doc))), f).toBe(n);
      expect(countJsonValues(bytes(JSON.stringify(doc, null, 2))), f).toBe(n);
    }
    // The default bound leaves room for many of the largest real vCon in one body.
    expect(largest).toBeLessThan(2_000);
    expect(DEFAULT_MAX_ELEMENTS / largest).toBeGreaterThan(100);
  });

  it('is exact in the corners', () => {
    const cases = [
      '{}',
      '[]',
      '[ ]',
      '[[],[ ],{}]',
      '"x"',
      '42',
      'null',
      ' \n true ',
      '\ufeff{"a":1}',
      '{"a:b,c[{":"]}\\"\\\\","d":[1,"\\"",[{"e":null}]]}',
      '{"k\\\\":"v\\\\\\"still, inside:"}',
      '[1, 2 ,3,\n[ 4 , { "x" : [ ] } ] ]',
      JSON.stringify({ a: 'é漢字😀', b: ['€', { '"q"': 'a"b' }] }),
    ];
    for (const text of cases) expect(countJsonValues(bytes(text)), text).toBe(valuesOf(JSON.parse(text.replace(/^\ufeff/, ''))));
  });

  it('stops at the bound: 1.8 million {} are refused after the first values past it', () => {
    const text = `{"attachments":[{"body":[${Array(1_800_000).fill('{}').join(',')}]}]}`;
    expect(countJsonValues(bytes(text), 1000)).toBe(1001);
    expect(() => checkJsonValues(bytes(text), DEFAULT_MAX_ELEMENTS)).toThrow(
      expect.objectContaining({ status: 413, code: 'too_many_elements', message: expect.stringMatching(/more than 250000 JSON values/) }),
    );
    // A recording is one value however long.
    const recording = JSON.stringify({ dialog: [{ type: 'recording', body: 'A'.repeat(14 * 1024 * 1024) }] });
    expect(countJsonValues(bytes(recording))).toBe(5);
  });
});

describe('the bound on a parsed vCon', () => {
  it('refuses a document with more values than the bound, naming it', () => {
    const doc = { vcon: '0.3.0', attachments: [{ type: 'x', body: Array.from({ length: 1_000 }, () => ({})) }] };
    expect(() => classifyVcon(doc, 1_000)).toThrow(expect.objectContaining({ status: 413, code: 'too_many_elements' }));
    expect(classifyVcon(doc, 1_006).kind).toBe('plain');
  });
});
