// Which JSON numbers and bytes can be stored exactly (src/domain/exact-json.ts): a number must
// read back with the value it was sent with, and the bytes must be UTF-8.
import { describe, expect, test } from 'vitest';
import { checkJsonBytes, checkUniqueMembers, duplicateKey, inexactNumbers, numberProblem } from '../../src/domain/exact-json.js';
import { countJsonValues } from '../../src/domain/elements.js';
import { ValidationError } from '../../src/domain/errors.js';

const detailsOf = (f: () => void) => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).details;
  }
  return undefined;
};

describe('numbers', () => {
  test.each([
    '0',
    '-0',
    '1',
    '0.1',
    '1.0',
    '1E2',
    '1e-7',
    '123456789012345',
    '9007199254740992',
    '9007199254740991',
    '100000000000000000000',
    '1.7976931348623157e308',
    '5e-324',
    '0.30000000000000004',
    '1.5e300',
    '0.000000000000000000001',
    '12345678.9012345',
  ])('%s reads back with its value', (n) => {
    expect(numberProblem(n)).toBeUndefined();
    expect(inexactNumbers(`{"n":${n}}`)).toEqual([]);
  });

  test.each([
    ['1e400', /outside the range/],
    ['-1e400', /outside the range/],
    ['1e-400', /read back as 0/],
    ['123456789012345678901234567890', /read back as 1\.2345678901234568e\+29/],
    ['9007199254740993', /read back as 9007199254740992/],
    ['0.10000000000000000001', /read back as 0\.1/],
    ['2.4703282292062328e-324', /read back as 5e-324/],
  ])('%s is refused', (n, message) => {
    expect(numberProblem(n)).toMatch(message);
  });

  test('the path of each refused number, past strings that look like numbers', () => {
    const text = `{"s":"1e400 and 12345678901234567890","parties":[{"meta":{"n":1e400,"\\"k":[1,2,9007199254740993]}}],"ok":1.5}`;
    expect(inexactNumbers(text)).toEqual([
      { path: 'parties[0].meta.n', message: expect.stringMatching(/^number 1e400 is outside the range a JSON number can be stored losslessly/) },
      { path: 'parties[0].meta."k[2]', message: expect.stringMatching(/read back as 9007199254740992/) },
    ]);
    expect(inexactNumbers(JSON.stringify({ s: 'x'.repeat(100), hash: 'e3b0c442e123a9'.repeat(5), n: [1, 2.5, -3e10] }))).toEqual([]);
  });
});

describe('bytes', () => {
  test('invalid UTF-8 is refused at the value holding it; a field name is said to be one', () => {
    const body = Buffer.concat([Buffer.from('{"parties":[{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}]}')]);
    expect(detailsOf(() => checkJsonBytes(body))).toEqual([
      { path: 'parties[0].name', message: expect.stringMatching(/^is not valid UTF-8 \(byte 24 of the body\)/) },
    ]);
    const key = Buffer.concat([Buffer.from('{"a":{"k'), Buffer.from([0xff]), Buffer.from('":1}}')]);
    expect(detailsOf(() => checkJsonBytes(key))?.[0].message).toMatch(/^field name is not valid UTF-8/);
    // Overlong and surrogate encodings are not UTF-8 either.
    for (const bad of [
      [0xc0, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
    ]) {
      const b = Buffer.concat([Buffer.from('{"s":"'), Buffer.from(bad), Buffer.from('"}')]);
      expect(detailsOf(() => checkJsonBytes(b))?.[0].path).toBe('s');
    }
  });

  test('valid UTF-8 with numbers that read back passes; a refused number is named under any charset', () => {
    expect(detailsOf(() => checkJsonBytes(Buffer.from(JSON.stringify({ ünï: 'código 😀', n: 1e300 }))))).toBeUndefined();
    expect(detailsOf(() => checkJsonBytes(Buffer.from('{"ü":[1e400]}')))).toEqual([{ path: 'ü[0]', message: expect.any(String) }]);
    expect(detailsOf(() => checkJsonBytes(Buffer.from('{"ü":[1e400]}', 'utf16le'), 'utf-16le'))).toEqual([
      { path: 'ü[0]', message: expect.any(String) },
    ]);
  });
});

describe('field names repeated in one object', () => {
  const check = (text: string) =>
    detailsOf(() => {
      const bytes = Buffer.from(text);
      const counts = { members: 0 };
      countJsonValues(bytes, Infinity, counts);
      checkUniqueMembers(JSON.parse(text), counts.members, bytes);
    });

  test('named at the repeated name, however it is spelled', () => {
    expect(check('{"a":1,"b":{"x":1,"y":[{"z":1,"z":2}]}}')).toEqual([
      { path: 'b.y[0].z', message: expect.stringMatching(/^field name "z" appears more than once/) },
    ]);
    expect(check('{"x":{"\\u00e9":1,"é":2}}')?.[0].path).toBe('x.é');
    expect(check('{"q":{"\\"":1,"\\u0022":2}}')?.[0].path).toBe('q."');
    expect(check('{"__proto__":1,"__proto__":2}')?.[0].path).toBe('__proto__');
    expect(duplicateKey(`{${Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`).join(',')},"k39":0}`)?.path).toBe('k39');
  });

  test('the same name in different objects, or as a value, is no repetition', () => {
    for (const text of ['{"a":{"a":"a"},"b":[{"a":1},{"a":2}]}', '{"a":"\\"a\\":1","b":"a"}', '[]', '"a"', '{}'])
      expect(check(text), text).toBeUndefined();
  });
});
