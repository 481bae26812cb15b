// The ranking tsvector of plain text made here rather than by PostgreSQL's to_tsvector (for ingest speed):
// its parser cost ~0.4 ms of the database's CPU per vCon (~4 KB of text), most of an indexing
// round's. Only texts whose every token is unambiguous take this path: ASCII words, numbers,
// hyphenated words, separated by white space and punctuation that PostgreSQL's default parser
// reads as blanks; and the shapes of party texts ("Ann Lee ann.lee@example.com +15551234567",
// 'mailto:', 'tel:+1-555-2222'): e-mail addresses of letter-led alphanumeric runs joined by '.',
// '-' or '_' with a host ending in a label of two letters or more (its lexeme the address
// lower-cased, as the simple dictionary does), signed integers after a blank, a colon or another
// signed integer, and a word after 'word:'. Anything else (URLs, other addresses, hosts, file
// names, decimals, letters mixed with digits, non-ASCII text) returns null and goes to to_tsvector
// as before. Lexemes come from the database's own dictionary (ts_lexize, cached), so a stored
// tsvector is the one to_tsvector gives (tests/search/tsvector.test.ts compares them, by = and byte
// for byte, on fuzzed texts, addresses and phone numbers). A vCon's four weights are joined here as
// || joins them and sent in tsvector's binary format: reading the text form cost the database about
// as much again.

import { spanHash, spanSlot } from './span-table.js';

/** Longest text (characters) made here; to_tsvector takes the rest. */
const MAX_TEXT_CHARS = 50_000;
/** Longest token made here (PostgreSQL skips words of 2,047 bytes and more). */
const MAX_TOKEN_CHARS = 200;
/** Positions per lexeme made here (a tsvector keeps at most 255). */
const MAX_POSITIONS = 200;

/** Tokens of a text made here: positions past 16,383 are all 16,383 in a tsvector. */
const MAX_TOKENS = 16_000;

const [OTHER, LETTER, DIGIT, BLANK, DOT, COLON, HYPHEN, PLUS] = [0, 1, 2, 3, 4, 5, 6, 7];

/** Character classes of ASCII; everything else is OTHER (the text goes to to_tsvector). */
const CLASS = new Uint8Array(128);
for (let c = 65; c <= 90; c++) CLASS[c] = LETTER;
for (let c = 97; c <= 122; c++) CLASS[c] = LETTER;
for (let c = 48; c <= 57; c++) CLASS[c] = DIGIT;
// Blanks in every context: white space and punctuation with no meaning to the parser outside
// URLs (and a URL needs characters refused here: '/', a dot before a word).
for (const ch of ' \t\n\r,;!?()[]{}"\'*=|%$^#`') CLASS[ch.charCodeAt(0)] = BLANK;
CLASS[46] = DOT;
CLASS[58] = COLON;
CLASS[45] = HYPHEN;
CLASS[43] = PLUS;

const classOf = (text: string, i: number) => {
  const c = text.charCodeAt(i);
  return c < 128 ? CLASS[c] : OTHER;
};

/** How a token becomes its lexeme: a word by english_stem, a number is itself, an e-mail address lower-cased (the simple dictionary). */
const WORD = 0;
const NUMBER = 1;
const EMAIL = 2;
export type TokenKind = typeof WORD | typeof NUMBER | typeof EMAIL;

/** The token that ended where the scan stands: a colon or a sign after it reads differently. */
const [NO_TOKEN, PLAIN_WORD, OTHER_WORD, UNSIGNED, SIGNED, ADDRESS] = [0, 1, 2, 3, 4, 5];

const isDigitCode = (c: number) => c >= 48 && c <= 57;
const isLetterCode = (c: number) => (c | 32) >= 97 && (c | 32) <= 122;
const isAlnumCode = (c: number) => isDigitCode(c) || isLetterCode(c);
/** '.', '-' and '_': what joins the parts of an address. */
const isJoinCode = (c: number) => c === 46 || c === 45 || c === 95;

/** Whether text[from, to) is alphanumeric runs joined by single '.', '-' or '_', starting with a letter. */
function isJoinedRuns(text: string, from: number, to: number): boolean {
  if (from >= to || !isLetterCode(text.charCodeAt(from)) || !isAlnumCode(text.charCodeAt(to - 1))) return false;
  for (let i = from + 1; i < to; i++) if (isJoinCode(text.charCodeAt(i)) && !isAlnumCode(text.charCodeAt(i + 1))) return false;
  return true;
}

/**
 * The end of the e-mail address whose local part starts at `start` and whose '@' is at `at`, or -1
 * when the parser may read it otherwise. Taken: a local part and a host of letter-led alphanumeric
 * runs joined by single '.', '-' or '_', the host with a dot and a last label of two letters or more
 * (the parser's host states all take these; its host then ends there, dots after it are the text's).
 * A digit first can make a number ('1e5'), a last label with a digit or one letter is no host.
 */
function emailEnd(text: string, start: number, at: number): number {
  if (!isJoinedRuns(text, start, at)) return -1;
  let end = at + 1;
  while (end < text.length && (isAlnumCode(text.charCodeAt(end)) || isJoinCode(text.charCodeAt(end)))) end++;
  while (end > at + 1 && text.charCodeAt(end - 1) === 46) end--;
  if (!isJoinedRuns(text, at + 1, end)) return -1;
  const dot = text.lastIndexOf('.', end - 1);
  if (dot <= at || end - dot < 3) return -1;
  for (let i = dot + 1; i < end; i++) if (!isLetterCode(text.charCodeAt(i))) return -1;
  return end;
}

/**
 * Calls `visit` with the start, end and kind of each token of a text in the order the default
 * parser gives them, one position each: words, numbers, for a hyphenated word the whole word then
 * its parts, e-mail addresses, and signed integers ('+15551234567', '-5'; after a signed one the
 * next sign starts another: '+1-555-2222' is three). False when the text holds anything else (the
 * scan stops there) or `visit` returned false.
 */
export function scanPlain(text: string, visit: (start: number, end: number, kind: TokenKind) => boolean | void): boolean {
  const n = text.length;
  if (n > MAX_TEXT_CHARS) return false;
  let count = 0;
  let i = 0;
  let last = NO_TOKEN;
  while (i < n) {
    const k = classOf(text, i);
    if (k === LETTER || k === DIGIT) {
      let j = i + 1;
      while (j < n && classOf(text, j) === k) j++;
      // Letters then '@', or then '.', '-', '_' or digits up to an '@': an e-mail address, or not here.
      if (k === LETTER && j < n && (isJoinCode(text.charCodeAt(j)) || isDigitCode(text.charCodeAt(j)) || text.charCodeAt(j) === 64)) {
        let at = j;
        while (at < n && (isAlnumCode(text.charCodeAt(at)) || isJoinCode(text.charCodeAt(at)))) at++;
        if (at < n && text.charCodeAt(at) === 64) {
          const end = emailEnd(text, i, at);
          if (end < 0 || end - i > MAX_TOKEN_CHARS || ++count > MAX_TOKENS || visit(i, end, EMAIL) === false) return false;
          last = ADDRESS;
          i = end;
          continue;
        }
      }
      // Letters next to digits (a numword, a float, a version): not here.
      if (j < n && classOf(text, j) === (k === LETTER ? DIGIT : LETTER)) return false;
      if (k === DIGIT) {
        if (j - i > MAX_TOKEN_CHARS || ++count > MAX_TOKENS || visit(i, j, NUMBER) === false) return false;
        last = UNSIGNED;
      } else {
        // A hyphenated word: letters, then '-' and letters, again and again.
        const first = j;
        let parts: number[] | undefined;
        while (j + 1 < n && text.charCodeAt(j) === 45 && classOf(text, j + 1) === LETTER) {
          let e = j + 2;
          while (e < n && classOf(text, e) === LETTER) e++;
          if (e < n && classOf(text, e) === DIGIT) return false;
          (parts ??= []).push(j + 1, e);
          j = e;
        }
        if (j - i > MAX_TOKEN_CHARS) return false;
        if (!parts) {
          if (++count > MAX_TOKENS || visit(i, j, WORD) === false) return false;
          last = PLAIN_WORD;
        } else {
          count += 2 + parts.length / 2;
          if (count > MAX_TOKENS || visit(i, j, WORD) === false || visit(i, first, WORD) === false) return false;
          for (let p = 0; p < parts.length; p += 2) if (visit(parts[p], parts[p + 1], WORD) === false) return false;
          last = OTHER_WORD;
        }
      }
      i = j;
      continue;
    }
    const next = i + 1 < n ? classOf(text, i + 1) : BLANK;
    switch (k) {
      case BLANK:
        break;
      case DOT: {
        // Before a word or number dots make hosts, files, decimals; two dots are a file name ('..').
        let j = i + 1;
        while (j < n && text.charCodeAt(j) === 46) j++;
        const after = j < n ? classOf(text, j) : BLANK;
        if ((j - i !== 1 && j - i !== 3) || after === LETTER || after === DIGIT) return false;
        last = NO_TOKEN;
        i = j;
        continue;
      }
      case COLON:
        // Before a number: times, ports. Before a word: URLs, except after a plain word, which the
        // parser ends there as it is no protocol ('mailto:ann@example.org', 'tel:+1555').
        if (next === DIGIT || (next === LETTER && last !== PLAIN_WORD)) return false;
        break;
      case HYPHEN:
      case PLUS: {
        const prev = i > 0 ? classOf(text, i - 1) : BLANK;
        // A sign before digits where the parser starts a token (after blanks, a colon or a signed
        // integer, which ends at a sign): a signed integer, up to the next non-digit; a letter
        // after it can be a mantissa ('+1e5').
        if (next === DIGIT && (prev === BLANK || prev === COLON || last === SIGNED)) {
          let j = i + 2;
          while (j < n && classOf(text, j) === DIGIT) j++;
          if (j < n && classOf(text, j) === LETTER) return false;
          if (j - i > MAX_TOKEN_CHARS || ++count > MAX_TOKENS || visit(i, j, NUMBER) === false) return false;
          last = SIGNED;
          i = j;
          continue;
        }
        // Otherwise a hyphen only alone between blanks: after a token it ends a hyphenated word
        // oddly, before one it makes a hyphenated part. A plus elsewhere: not here.
        if (k === PLUS || prev === LETTER || prev === DIGIT || next === LETTER || next === DIGIT) return false;
        break;
      }
      default:
        return false;
    }
    last = NO_TOKEN;
    i++;
  }
  return true;
}

/** The tokens of scanPlain as strings; null when the text is not plain. */
export function plainTokens(text: string): string[] | null {
  const out: string[] = [];
  return scanPlain(text, (s, e) => {
    out.push(text.slice(s, e));
  })
    ? out
    : null;
}

/**
 * A tsvector made here, one weight of one text: its lexemes (first seen first) and each one's
 * positions as PostgreSQL stores them (WordEntryPos: the weight in the top two bits, A = 3 … D = 0),
 * lexeme j's at pos[start[j]] to pos[start[j + 1] - 1]. Three typed arrays per text instead of an
 * array per lexeme: those arrays (grown by push) were a fifth of an indexing round's garbage.
 */
export interface Tsv {
  lexemes: string[];
  start: Uint32Array;
  pos: Uint16Array;
}

/** Positions of lexeme j of a tsvector. */
export const positionsOf = (t: Tsv, j: number): Uint16Array => t.pos.subarray(t.start[j], t.start[j + 1]);

const WEIGHT_BITS = { A: 3 << 14, B: 2 << 14, C: 1 << 14, D: 0 } as const;
const POS_MASK = 0x3fff;
/** Positions past this are all this one (LIMITPOS); a lexeme keeps at most MAXNUMPOS of them. */
const MAX_ENTRY_POS = 16_383;
const MAX_NUM_POS = 256;

/**
 * A lexeme of the tsvector being made. Its positions in the current text are a list through the
 * lexicon's scratch arrays (first and last occurrence, how many): numbers only, so an entry, which
 * lives in the lexicon for good, holds nothing of a text once it is made.
 */
interface Entry {
  lexeme: string;
  /** The text (a counter) whose positions the list holds. */
  text: number;
  first: number;
  last: number;
  count: number;
}

const entry = (lexeme: string): Entry => ({ lexeme, text: 0, first: 0, last: 0, count: 0 });

/** A lexeme as tsvector text: bare when it is letters, digits and hyphens (every lexeme made here), else quoted. */
const quote = (lexeme: string) => (/^[a-z0-9-]+$/.test(lexeme) ? lexeme : `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`);
const WEIGHT_LETTER = ['', 'C', 'B', 'A'];

/** The text form of a tsvector made here (weight D's positions carry no letter: D is a position's default). */
export function tsvectorText(t: Tsv): string {
  let out = '';
  t.lexemes.forEach((l, j) => {
    out += `${out ? ' ' : ''}${quote(l)}:`;
    positionsOf(t, j).forEach((p, k) => (out += `${k ? ',' : ''}${p & POS_MASK}${WEIGHT_LETTER[p >>> 14]}`));
  });
  return out;
}

/** A tsvector in binary format (tsvectorsend), as made by the database. */
export function parseTsvector(b: Uint8Array): Tsv {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const count = buf.readInt32BE(0);
  const lexemes = new Array<string>(count);
  const start = new Uint32Array(count + 1);
  // At most (bytes - 4) / 2 positions: sized once, trimmed after.
  const pos = new Uint16Array(Math.max(0, (buf.length - 4) >>> 1));
  let at = 4;
  let p = 0;
  for (let j = 0; j < count; j++) {
    const end = buf.indexOf(0, at);
    lexemes[j] = buf.toString('utf8', at, end);
    const n = buf.readUInt16BE(end + 1);
    at = end + 3;
    start[j] = p;
    for (let k = 0; k < n; k++, at += 2) pos[p++] = buf.readUInt16BE(at);
  }
  start[count] = p;
  return { lexemes, start, pos: pos.subarray(0, p) };
}

const isAscii = (s: string) => {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 127) return false;
  return true;
};

/** Lexemes sorted by this many leading characters as one number (7 bits each: 42 bits, 11 for the index). */
const KEY_CHARS = 6;
const KEY_INDEX = 2048;

/** Bytewise order of two lexemes, then their index (equal lexemes keep their order). */
const byBytes = (names: string[]) => (a: number, b: number) => Buffer.compare(Buffer.from(names[a]), Buffer.from(names[b])) || a - b;

/** Whether lexeme a comes before lexeme b (UTF-16 order, bytewise in ASCII), or is the same one earlier. */
const before = (names: string[], a: number, b: number) => names[a] < names[b] || (names[a] === names[b] && a < b);

/** A comparator of lexeme indexes by `before`. */
const byUnits = (names: string[]) => (a: number, b: number) => (a === b ? 0 : before(names, a, b) ? -1 : 1);

/**
 * The indexes of some lexemes in the database's order: bytewise, which in ASCII is UTF-16 order;
 * equal lexemes keep their order. Sorting strings was most of a join's time; ASCII lexemes are
 * sorted as numbers made of their first six characters (0 past the end sorts a prefix first) and
 * their index, and only a run sharing those six characters is sorted again (a short one by
 * insertion). Otherwise the UTF-8 bytes are compared.
 */
function lexemeOrder(names: string[], ascii: boolean): number[] {
  const n = names.length;
  const order = new Array<number>(n);
  for (let i = 0; i < n; i++) order[i] = i;
  if (!ascii) return order.sort(byBytes(names));
  if (n >= KEY_INDEX) return order.sort(byUnits(names));
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const l = names[i];
    let k = 0;
    for (let c = 0; c < KEY_CHARS; c++) k = k * 128 + (c < l.length ? l.charCodeAt(c) : 0);
    keys[i] = k * KEY_INDEX + i;
  }
  keys.sort();
  for (let i = 0; i < n; i++) order[i] = keys[i] % KEY_INDEX;
  for (let i = 0; i < n;) {
    const prefix = Math.floor(keys[i] / KEY_INDEX);
    let j = i + 1;
    while (j < n && Math.floor(keys[j] / KEY_INDEX) === prefix) j++;
    // Six characters alike: lexemes of the same prefix, or one lexeme of several parts. A long run
    // (many lexemes of one prefix, first seen in reverse order: insertion would be quadratic) is
    // sorted with the comparator.
    if (j - i > 16) {
      const run = order.slice(i, j).sort(byUnits(names));
      for (let x = i; x < j; x++) order[x] = run[x - i];
      i = j;
      continue;
    }
    for (let x = i + 1; x < j; x++) {
      const v = order[x];
      let y = x - 1;
      for (; y >= i && before(names, v, order[y]); y--) order[y + 1] = order[y];
      order[y + 1] = v;
    }
    i = j;
  }
  return order;
}

/**
 * ((A || B) || C) || D of some tsvectors, in tsvector's binary format (tsvectorsend, what a binary
 * COPY reads): the lexeme count (int32), then per lexeme in the database's order (bytewise) its
 * UTF-8 bytes, a NUL, its position count (uint16) and its positions (uint16 each). || shifts each
 * right side's positions past the left side's last one and keeps a lexeme's positions in order.
 * Null where || would cap or drop positions (a lexeme past 256 of them, a position past 16,383):
 * the database joins those, as before.
 */
export function joinTsvectors(parts: Tsv[]): Uint8Array | null {
  // Each part's positions move past the last position of the parts before it; none reaches the cap.
  const shifts: number[] = [];
  let max = 0;
  let positions = 0;
  let total = 0;
  for (const part of parts) {
    shifts.push(max);
    let last = 0;
    // A lexeme's positions ascend: its last one is its greatest.
    for (let j = 0; j < part.lexemes.length; j++) last = Math.max(last, part.pos[part.start[j + 1] - 1] & POS_MASK);
    positions += part.start[part.lexemes.length];
    total += part.lexemes.length;
    max += last;
  }
  if (max >= MAX_ENTRY_POS) return null;
  // Every part's lexemes in one list (part · 2^16 + index beside each), sorted: a lexeme of several
  // parts comes once per part, in part order, and is written once. No map of lexemes: its entries
  // were most of what a join allocated.
  const names = new Array<string>(total);
  const places = new Int32Array(total);
  let ascii = true;
  let bytes = 4 + 2 * positions;
  for (let k = 0, i = 0; k < parts.length; k++) {
    const ls = parts[k].lexemes;
    for (let j = 0; j < ls.length; j++, i++) {
      names[i] = ls[j];
      places[i] = k * 0x10000 + j;
      if (ascii && !isAscii(ls[j])) ascii = false;
    }
  }
  for (const l of names) bytes += (ascii ? l.length : Buffer.byteLength(l)) + 3;
  const order = lexemeOrder(names, ascii);
  // Sized for every lexeme of every part; a lexeme of several parts takes less.
  const out = Buffer.allocUnsafe(bytes);
  let o = 4;
  let lexemes = 0;
  for (let g = 0; g < total;) {
    const l = names[order[g]];
    let h = g + 1;
    while (h < total && names[order[h]] === l) h++;
    let n = 0;
    for (let x = g; x < h; x++) {
      const where = places[order[x]];
      const { start } = parts[where >>> 16];
      n += start[(where & 0xffff) + 1] - start[where & 0xffff];
    }
    if (n > MAX_NUM_POS) return null;
    if (ascii) for (let i = 0; i < l.length; i++) out[o++] = l.charCodeAt(i);
    else o += out.write(l, o, 'utf8');
    out[o++] = 0;
    o = out.writeUInt16BE(n, o);
    for (let x = g; x < h; x++) {
      const where = places[order[x]];
      const { start, pos } = parts[where >>> 16];
      const shift = shifts[where >>> 16];
      const j = where & 0xffff;
      for (let i = start[j]; i < start[j + 1]; i++) {
        const q = pos[i] + shift;
        out[o++] = q >>> 8;
        out[o++] = q & 0xff;
      }
    }
    lexemes++;
    g = h;
  }
  out.writeInt32BE(lexemes, 0);
  return out.subarray(0, o);
}

/**
 * A word whose lexeme (ts_lexize with english_stem, which lower-cases as the simple dictionary does)
 * tells whether the database lower-cases ASCII capitals as ASCII: an e-mail address with capitals
 * is made here only then (not in a Turkish locale, say).
 */
export const CASE_PROBE = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** Words the lexicon keeps (a language's words are few; a flood of new ones starts it afresh). */
const MAX_WORDS = 200_000;

/**
 * The lexemes of the english configuration by token, as the database's dictionary gives them
 * (ts_lexize with english_stem for words; a number is its own lexeme, the simple dictionary), and
 * the tsvectors made from them.
 */
export function createLexicon(maxWords = MAX_WORDS) {
  // By token: its lexeme's entry; null for a stop word (a position, no lexeme); false when the
  // dictionary gave anything but one lexeme. An open-addressing table looked up with the token
  // where it stands in its text: a string sliced for every token was most of a round's garbage.
  let keys: (string | undefined)[] = [];
  let hashes = new Int32Array(0);
  let values: (Entry | null | false)[] = [];
  let size = 0;
  const reset = (capacity: number) => {
    keys = new Array<string | undefined>(capacity).fill(undefined);
    hashes = new Int32Array(capacity);
    values = new Array<Entry | null | false>(capacity).fill(null);
    size = 0;
  };
  reset(1024);
  const hashOf = spanHash;
  /** The slot of the token s[from, to): its own, or the empty one where it would go. */
  const slotOf = (s: string, from: number, to: number, h: number) => spanSlot(keys, hashes, s, from, to, h);
  const setWord = (w: string, value: Entry | null | false) => {
    if (2 * (size + 1) > keys.length) {
      const [ks, vs] = [keys, values];
      reset(keys.length * 2);
      ks.forEach((k, i) => k !== undefined && setWord(k, vs[i]));
    }
    const h = hashOf(w, 0, w.length);
    const i = slotOf(w, 0, w.length, h);
    if (keys[i] === undefined) {
      keys[i] = w;
      hashes[i] = h;
      size++;
    }
    values[i] = value;
  };
  const byLexeme = new Map<string, Entry>();
  let texts = 0;
  // The current text's occurrences, in text order: each one's position, and the next occurrence of
  // the same lexeme (scanPlain visits at most MAX_TOKENS tokens a text).
  const occPos = new Uint16Array(MAX_TOKENS);
  const occNext = new Int32Array(MAX_TOKENS);
  return {
    /** Learns what ts_lexize('english_stem', word) gave for each word (null: the dictionary did not know it). */
    learn(ws: string[], lexemes: (string[] | null)[]): void {
      if (size + ws.length > maxWords) {
        reset(1024);
        byLexeme.clear();
      }
      ws.forEach((w, n) => {
        const l = lexemes[n];
        if (l === null || l.length > 1) setWord(w, false);
        else if (l.length === 0) setWord(w, null);
        else {
          let e = byLexeme.get(l[0]);
          if (!e) byLexeme.set(l[0], (e = entry(l[0])));
          setWord(w, e);
        }
      });
    },

    /**
     * setweight(to_tsvector('english', text), weight) made here; null when the text is not plain
     * (scanPlain), a word is not plain or a lexeme has too many positions; undefined when words are
     * not in the lexicon yet (added to `unknown`: learn them, then ask again).
     */
    tsvector(text: string, weight: 'A' | 'B' | 'C' | 'D', unknown: Set<string>): Tsv | null | undefined {
      const id = ++texts;
      const bits = WEIGHT_BITS[weight];
      const used: Entry[] = [];
      let numbers: Map<string, Entry> | undefined;
      let complete = true;
      let refused = false;
      let position = 0;
      let occurrences = 0;
      const plain = scanPlain(text, (from, to, kind) => {
        position++;
        let e: Entry | null | false | undefined;
        if (kind !== WORD) {
          let t = text.slice(from, to);
          if (kind === EMAIL && /[A-Z]/.test(t)) {
            // Lower-cased as the database lower-cases: asked once (CASE_PROBE).
            const p = slotOf(CASE_PROBE, 0, CASE_PROBE.length, hashOf(CASE_PROBE, 0, CASE_PROBE.length));
            if (keys[p] === undefined) {
              unknown.add(CASE_PROBE);
              complete = false;
              return;
            }
            const probe = values[p];
            if (!probe || probe.lexeme !== CASE_PROBE.toLowerCase()) return !(refused = true);
            t = t.toLowerCase();
          }
          numbers ??= new Map();
          e = numbers.get(t);
          if (!e) numbers.set(t, (e = entry(t)));
        } else {
          const i = slotOf(text, from, to, hashOf(text, from, to));
          if (keys[i] === undefined) {
            unknown.add(text.slice(from, to));
            complete = false;
            return;
          }
          e = values[i];
        }
        if (e === false) return !(refused = true);
        if (e === null || !complete) return;
        const k = occurrences++;
        occPos[k] = bits | position;
        occNext[k] = -1;
        if (e.text !== id) {
          e.text = id;
          e.first = e.last = k;
          e.count = 1;
          used.push(e);
        } else {
          occNext[e.last] = k;
          e.last = k;
          e.count++;
        }
      });
      if (!plain || refused) return null;
      if (!complete) return undefined;
      const lexemes = new Array<string>(used.length);
      const start = new Uint32Array(used.length + 1);
      const pos = new Uint16Array(occurrences);
      let p = 0;
      for (let j = 0; j < used.length; j++) {
        const e = used[j];
        if (e.count > MAX_POSITIONS) return null;
        lexemes[j] = e.lexeme;
        start[j] = p;
        for (let k = e.first; k >= 0; k = occNext[k]) pos[p++] = occPos[k];
      }
      start[used.length] = p;
      return { lexemes, start, pos };
    },
  };
}

export type Lexicon = ReturnType<typeof createLexicon>;
