// Text PostgreSQL can't hold, found anywhere in a document with its path (domain/text.ts): the
// first pass answers "none" without paths; when there is one, every problem is reported in order.
import { describe, expect, it } from 'vitest';
import { unstorableText } from '../../src/domain/text.js';

const clean = { vcon: '0.3.0', parties: [{ name: 'Zoë', tel: '+1' }], dialog: [{ body: 'ok 😀', n: 1, x: null, t: true }], e: {} };

describe('unstorableText', () => {
  it('finds nothing in a document PostgreSQL can hold', () => {
    expect(unstorableText(clean)).toEqual([]);
    expect(unstorableText('plain')).toEqual([]);
    expect(unstorableText([])).toEqual([]);
  });

  it('names each NUL and lone surrogate, in values and field names, in document order, up to max', () => {
    const doc = {
      ...clean,
      parties: [{ name: 'A\u0000B' }, { ['k\ud800']: 1 }],
      dialog: [{ body: ['ok', 'x\udc00'] }],
    };
    expect(unstorableText(doc)).toEqual([
      { path: 'parties[0].name', message: 'must not contain NUL characters (\\u0000)' },
      { path: 'parties[1].k\ud800', message: 'field name must not contain unpaired UTF-16 surrogates (\\ud800-\\udfff alone)' },
      { path: 'dialog[0].body[1]', message: 'must not contain unpaired UTF-16 surrogates (\\ud800-\\udfff alone)' },
    ]);
    expect(unstorableText(doc, ['item'], 1)).toEqual([{ path: 'item.parties[0].name', message: 'must not contain NUL characters (\\u0000)' }]);
    expect(unstorableText('\u0000')).toEqual([{ path: '(root)', message: 'must not contain NUL characters (\\u0000)' }]);
  });
});
