// Where a file import refuses stops being JSON (cli/json-syntax.ts): a line and column, the text never quoted.
import { describe, expect, test } from 'vitest';
import { jsonSyntaxPosition } from '../../cli/json-syntax.js';

describe('jsonSyntaxPosition', () => {
  test.each([
    ['root:x:0:0:root:/root:/bin/bash\n', 1, 1],
    ['{"a": 1,\n  "b": tru}', 2, 8],
    ['{"a": [1, 2,, 3]}', 1, 13],
    ['{"a": 1} x', 1, 10],
    ['{"a": "unterminated', 1, 7],
    ['[1, 2', 1, 6],
    ['\uFEFF{}', 1, 1],
    ['{"k" 1}', 1, 6],
    ['{"a": 01}', 1, 8],
    ['['.repeat(100_000), 1, 100_001],
  ])('%j breaks at line %i, column %i', (text, line, column) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(jsonSyntaxPosition(text)).toEqual({ line, column });
  });
});
