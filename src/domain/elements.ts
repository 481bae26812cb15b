// How many JSON values a document holds (objects, arrays, strings, numbers, booleans, nulls), and
// the bound on it. Bytes alone do not bound the work a body costs: 5.4 MB of `{}` is 1.8 million
// values, and JSON.parse alone held the process ~20 s on them, every other request waiting. A
// recording of 14 MB is one value. The text of a body is counted before it is parsed, so an
// over-the-bound body costs one pass over its bytes (strings skipped whole), not a parse.
import { AppError } from './errors.js';

/** 413 too_many_elements, naming the bound. */
export function tooManyElements(max: number): AppError {
  return new AppError(
    413,
    'too_many_elements',
    `The document holds more than ${max} JSON values (VCON_MAX_ELEMENTS)`,
    [{ path: '(root)', message: `must hold at most ${max} JSON values (objects, arrays, strings, numbers, booleans and nulls together)` }],
    'Split the request (a batch counts all its vCons together), or raise VCON_MAX_ELEMENTS',
  );
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Skips a string that starts at `i` (its opening quote); answers the index after its closing quote. */
function skipString(bytes: Uint8Array, i: number): number {
  for (let from = i + 1; ;) {
    const q = bytes.indexOf(QUOTE, from);
    if (q < 0) return bytes.length;
    // A quote preceded by an odd number of backslashes is escaped.
    let k = q - 1;
    while (bytes[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/**
 * The JSON values in the UTF-8 text of a document, counting at most to `max + 1` (it stops there).
 * Exact for valid JSON: the root, one per member (its ':'), one per array element (the first after
 * a non-empty '[', the others after ','). Invalid JSON gets some count and fails its parse after.
 */
export function countJsonValues(bytes: Uint8Array, max = Infinity, counts?: { members: number }): number {
  let n = 0;
  let members = 0;
  // Per open container, from the outermost: 1 an array, 0 an object.
  const arrays: number[] = [];
  const length = bytes.length;
  for (let i = 0; i < length && n <= max; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      if (n === 0) n = 1;
      i = skipString(bytes, i) - 1;
    } else if (c === 0x3a /* : */) {
      n++;
      members++;
    } else if (c === 0x2c /* , */) n += arrays.length > 0 ? arrays[arrays.length - 1] : 0;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (n === 0) n = 1;
      const isArray = c === 0x5b ? 1 : 0;
      arrays.push(isArray);
      if (isArray) {
        let j = i + 1;
        while (j < length && (bytes[j] === 0x20 || bytes[j] === 0x0a || bytes[j] === 0x0d || bytes[j] === 0x09)) j++;
        if (j < length && bytes[j] !== 0x5d /* ] */) n++;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) arrays.pop();
    else if (n === 0 && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09 && c !== 0xef && c !== 0xbb && c !== 0xbf) n = 1; // a bare scalar (a BOM aside)
  }
  if (counts) counts.members = members;
  return n;
}

/**
 * Throws 413 too_many_elements when the UTF-8 text of a body holds more than `max` values; else
 * answers how many object members it holds (checkUniqueMembers compares it with the parse).
 */
export function checkJsonValues(bytes: Uint8Array, max: number): number {
  const counts = { members: 0 };
  if (countJsonValues(bytes, max, counts) > max) throw tooManyElements(max);
  return counts.members;
}

/**
 * checkJsonValues for a body body-parser read as `encoding`: UTF-16 and UTF-32 bodies are counted
 * as UTF-8. Answers the members it holds.
 */
export function checkBodyValues(buf: Buffer, encoding: string, max: number): number {
  const utf8 = /^utf-?8$/i.test(encoding) ? buf : Buffer.from(new TextDecoder(encoding).decode(buf));
  return checkJsonValues(utf8, max);
}
