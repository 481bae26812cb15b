// JSON text that can be stored exactly as it was sent. JSON.parse reads every number as a double
// and decoding turns invalid UTF-8 into U+FFFD: `1e400` would be stored as null,
// 123456789012345678901234567890 as 1.2345678901234568e+29 and a stray byte as "�", each
// acknowledged as if stored. Such bodies are refused instead, naming the JSON path.
import { isUtf8 } from 'node:buffer';
import { formatPath, invalid, type ErrorDetail } from './errors.js';

/**
 * Part of a number token that might not survive as a double: 16 or more digits and dots in a row
 * (more than the 15 significant digits every double keeps), or an exponent of 3 digits or more. A
 * token with neither has at most 15 significant digits and a magnitude between 1e-113 and 1e114,
 * inside the doubles' normal range, so it reads back as written. Strings match too (a hash's
 * "e893"): each match is judged where it stands.
 */
const MAYBE_INEXACT = /[0-9.]{16}|[eE][+-]?[0-9]{3}/g;
/** Characters of a number token: digits, dot, exponent letter and signs. */
const inToken = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const NUMBER = /-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** A decimal's value as sign, digits (no leading or trailing zeros) and exponent, to compare two spellings. */
function decimalValue(s: string): string {
  const neg = s.startsWith('-');
  const body = neg ? s.slice(1) : s;
  const e = body.search(/[eE]/);
  const mantissa = e < 0 ? body : body.slice(0, e);
  let exp = e < 0 ? 0 : Number(body.slice(e + 1));
  const dot = mantissa.indexOf('.');
  let digits = mantissa;
  if (dot >= 0) {
    digits = mantissa.slice(0, dot) + mantissa.slice(dot + 1);
    exp -= mantissa.length - dot - 1;
  }
  digits = digits.replace(/^0+/, '');
  const trimmed = digits.replace(/0+$/, '');
  exp += digits.length - trimmed.length;
  // Zero has no sign in a decimal's value (-0 is stored as 0, the same number).
  return trimmed === '' ? '0' : `${neg ? '-' : ''}${trimmed}e${exp}`;
}

const shown = (token: string) => (token.length > 40 ? `${token.slice(0, 37)}...` : token);

/**
 * Why a JSON number token can't be stored exactly, or undefined when it can: it must parse to a
 * finite double whose shortest spelling (what is stored and read back) has the same value.
 */
export function numberProblem(token: string): string | undefined {
  const v = Number(token);
  if (!Number.isFinite(v)) return `number ${shown(token)} is outside the range a JSON number can be stored losslessly (about ±1.8e308)`;
  const stored = String(v);
  if (stored === token || decimalValue(stored) === decimalValue(token)) return undefined;
  return `number ${shown(token)} can't be stored exactly (it would be read back as ${stored}): send it as a string`;
}

/**
 * What the scan reports: a number, a string value or a field name, with its place in the text;
 * with `sameKey`, a field name its object already holds ('duplicate', instead of 'key').
 */
type Visit = (kind: 'number' | 'string' | 'key' | 'duplicate', start: number, end: number, path: () => (string | number)[]) => boolean | void;

interface Frame {
  array: boolean;
  index: number;
  keyStart: number;
  keyEnd: number;
  /** The object's field names so far (with `sameKey`): the first 16, then all of them. */
  names?: string[];
  keys?: Set<string>;
}

/**
 * Walks JSON text, calling `visit` for every number, string and field name with a function giving
 * its path, until `visit` returns true. Strings are skipped with indexOf, so the cost follows the
 * number of values, not the length of the text. Tolerates broken text (it stops at its end).
 * `decodeKey` turns a field name's text (quotes included) into the name.
 */
function scanJson(text: string, visit: Visit, decodeKey: (raw: string) => string, sameKey?: (raw: string) => string): void {
  const stack: Frame[] = [];
  let expectKey = false;
  const path = () =>
    stack.map((f) => {
      if (f.array) return f.index;
      try {
        return decodeKey(text.slice(f.keyStart, f.keyEnd));
      } catch {
        return text.slice(f.keyStart + 1, f.keyEnd - 1);
      }
    });
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = text.indexOf('"', i + 1);
      for (;;) {
        if (j < 0) break;
        let k = j - 1;
        while (text.charCodeAt(k) === 0x5c) k--;
        if ((j - k) % 2 === 1) break; // an even number of backslashes: the quote ends the string
        j = text.indexOf('"', j + 1);
      }
      const end = j < 0 ? n : j + 1;
      const top = stack[stack.length - 1];
      if (expectKey && top !== undefined) {
        top.keyStart = i;
        top.keyEnd = end;
        expectKey = false;
        let kind: 'key' | 'duplicate' = 'key';
        if (sameKey) {
          const key = sameKey(text.slice(i, end));
          // Most objects have a few names: a list is cheaper than a set until it grows.
          const names = (top.names ??= []);
          if (names.length < 16) {
            if (names.includes(key)) kind = 'duplicate';
            else names.push(key);
          } else {
            top.keys ??= new Set(names);
            if (top.keys.has(key)) kind = 'duplicate';
            else top.keys.add(key);
          }
        }
        if (visit(kind, i, end, path)) return;
      } else if (visit('string', i, end, path)) return;
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      stack.push({ array: c === 0x5b, index: 0, keyStart: 0, keyEnd: 0 });
      expectKey = c === 0x7b;
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      expectKey = false;
      i++;
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top?.array) top.index++;
      else expectKey = true;
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const end = NUMBER.exec(text) ? NUMBER.lastIndex : i + 1;
      if (visit('number', i, end, path)) return;
      i = end;
    } else i++;
  }
}

/**
 * Whether any number of JSON text might not be stored exactly. Each candidate is judged on its own
 * (a real 0.5600001000000001 is fine; a token not after a colon, comma or bracket is inside a
 * string), so the structural scan runs only when one is refused, and then tells a number from a
 * string that looks like one. Nearly every body costs one regex pass.
 */
function anyInexact(text: string): boolean {
  MAYBE_INEXACT.lastIndex = 0;
  for (let m = MAYBE_INEXACT.exec(text); m !== null; m = MAYBE_INEXACT.exec(text)) {
    let start = m.index;
    while (start > 0 && inToken(text.charCodeAt(start - 1))) start--;
    let end = MAYBE_INEXACT.lastIndex;
    while (end < text.length && inToken(text.charCodeAt(end))) end++;
    MAYBE_INEXACT.lastIndex = end;
    let before = start - 1;
    while (before >= 0 && isSpace(text.charCodeAt(before))) before--;
    const c = before < 0 ? 0x2c : text.charCodeAt(before);
    if (c !== 0x3a && c !== 0x2c && c !== 0x5b) continue;
    if (numberProblem(text.slice(start, end)) !== undefined) return true;
  }
  return false;
}

/** The numbers of JSON text that can't be stored exactly (the first `max`), with their paths. */
export function inexactNumbers(text: string, prefix: readonly (string | number)[] = [], max = 20, decodeKey = JSON.parse): ErrorDetail[] {
  if (!anyInexact(text)) return [];
  const out: ErrorDetail[] = [];
  scanJson(
    text,
    (kind, start, end, path) => {
      if (kind !== 'number') return false;
      const problem = numberProblem(text.slice(start, end));
      if (problem !== undefined) out.push({ path: formatPath([...prefix, ...path()]), message: problem });
      return out.length >= max;
    },
    decodeKey,
  );
  return out;
}

/** The offset of the first byte of `buf` that is not part of well-formed UTF-8 (called only when there is one). */
function firstInvalidByte(buf: Buffer): number {
  for (let i = 0; i < buf.length;) {
    const b = buf[i];
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (len === 0 || i + len > buf.length) return i;
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    if (len > 1 && (buf[i + 1] < lo || buf[i + 1] > hi)) return i;
    for (let k = 2; k < len; k++) if (buf[i + k] < 0x80 || buf[i + k] > 0xbf) return i;
    i += len;
  }
  return buf.length;
}

/** A field name of UTF-8 bytes viewed as latin1 text (one character per byte), as its name. */
const decodeLatin1Key = (raw: string): string => JSON.parse(Buffer.from(raw, 'latin1').toString('utf8')) as string;

/**
 * Throws a ValidationError naming the path when a JSON body read as `encoding` (body-parser's
 * charset name; UTF-8 when undefined) would not be stored exactly: bytes that are not UTF-8, or
 * numbers a double can't hold. Other charsets are decoded strictly (a malformed one is refused).
 */
export function checkJsonBytes(buf: Buffer, encoding = 'utf-8', what = 'body'): void {
  let text: string;
  let decodeKey: (raw: string) => string = JSON.parse;
  if (encoding === 'utf-8' || encoding === 'utf8') {
    if (!isUtf8(buf)) {
      const at = firstInvalidByte(buf);
      // The value or field name holding the byte, found on the bytes as latin1 (JSON's syntax is ASCII).
      let detail: ErrorDetail = { path: '(root)', message: `is not valid UTF-8 (byte ${at} of the body): send UTF-8 text` };
      scanJson(
        buf.toString('latin1'),
        (kind, start, end, path) => {
          if (kind === 'number' || at < start || at >= end) return start > at;
          const message = `${kind === 'key' ? 'field name ' : ''}is not valid UTF-8 (byte ${at} of the body): send UTF-8 text`;
          detail = { path: formatPath(path()), message };
          return true;
        },
        decodeLatin1Key,
      );
      throw invalid(what, [detail]);
    }
    // Numbers and JSON's syntax are ASCII: the one-byte view finds them without decoding.
    text = buf.toString('latin1');
    decodeKey = decodeLatin1Key;
  } else {
    try {
      text = new TextDecoder(encoding, { fatal: true }).decode(buf);
    } catch (err) {
      if (err instanceof RangeError) return; // a charset TextDecoder lacks: the parser judges it
      throw invalid(what, [{ path: '(root)', message: `is not valid ${encoding.toUpperCase()} text` }]);
    }
  }
  const details = inexactNumbers(text, [], 20, decodeKey);
  if (details.length > 0) throw invalid(what, details);
}

/**
 * The first field name of JSON text that its object already holds, or undefined. JSON.parse keeps
 * the last of them and drops the others without a word (data loss the writer is never told of);
 * I-JSON (RFC 7493) forbids duplicate names, so they are refused. Names are compared as decoded
 * ("a" and "\u0061" are one name). `utf8View`: the text is UTF-8 bytes viewed as latin1.
 */
export function duplicateKey(text: string, decodeKey: (raw: string) => string = JSON.parse, utf8View = false): ErrorDetail | undefined {
  // Without a backslash the quoted text is the name itself; with one, decode it into the same view.
  const sameKey = (raw: string) => {
    if (!raw.includes('\\')) return raw;
    const name = decodeKey(raw);
    return utf8View ? `"${Buffer.from(name, 'utf8').toString('latin1')}"` : JSON.stringify(name);
  };
  let found: ErrorDetail | undefined;
  scanJson(
    text,
    (kind, start, end, path) => {
      if (kind !== 'duplicate') return false;
      const p = path();
      found = {
        path: formatPath(p),
        message: `field name ${JSON.stringify(p[p.length - 1])} appears more than once in its object: send each name once (a JSON parser would keep only the last)`,
      };
      return true;
    },
    decodeKey,
    sameKey,
  );
  return found;
}

/** The members of every object of a parsed JSON value ("__proto__" included: JSON.parse makes it an own member). */
function countMembers(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push(x);
      continue;
    }
    for (const k of Object.keys(v)) {
      n++;
      const x = (v as Record<string, unknown>)[k];
      if (x !== null && typeof x === 'object') stack.push(x);
    }
  }
  return n;
}

/**
 * Throws a ValidationError naming the path of a repeated field name when `value`, the parse of
 * `buf` (read as `encoding`), holds fewer members than the `members` its text was counted to hold:
 * the parse kept only the last of some name. The count is what makes this cheap; the text is
 * scanned only to name the path.
 */
export function checkUniqueMembers(value: unknown, members: number, buf: Buffer, encoding = 'utf-8', what = 'body'): void {
  if (countMembers(value) === members) return;
  const utf8 = encoding === 'utf-8' || encoding === 'utf8';
  const text = utf8 ? buf.toString('latin1') : new TextDecoder(encoding).decode(buf);
  const duplicate = duplicateKey(text, utf8 ? decodeLatin1Key : JSON.parse, utf8);
  if (duplicate) throw invalid(what, [duplicate]);
}
