// The ranking tsvector of plain text made here rather than by PostgreSQL's to_tsvector (issue 17):
// its parser cost ~0.4 ms of the database's CPU per vCon (~4 KB of text), most of an indexing
// round's. Only texts whose every token is unambiguous take this path: ASCII words, numbers,
// hyphenated words, separated by white space and punctuation that PostgreSQL's default parser
// reads as blanks. Anything else (URLs, e-mail addresses, hosts, file names, decimals, signed
// numbers, letters mixed with digits, non-ASCII text) returns null and goes to to_tsvector as
// before. Lexemes come from the database's own dictionary (ts_lexize, cached), so a stored
// tsvector is the one to_tsvector gives (tests/search/tsvector.test.ts compares them).

/** Longest text (characters) made here; to_tsvector takes the rest. */
const MAX_TEXT_CHARS = 50_000;
/** Longest token made here (PostgreSQL skips words of 2,047 bytes and more). */
const MAX_TOKEN_CHARS = 200;
/** Positions per lexeme made here (a tsvector keeps at most 255). */
const MAX_POSITIONS = 200;

/** Tokens of a text made here: positions past 16,383 are all 16,383 in a tsvector. */
const MAX_TOKENS = 16_000;

const [OTHER, LETTER, DIGIT, BLANK, DOT, COLON, HYPHEN] = [0, 1, 2, 3, 4, 5, 6];

/** Character classes of ASCII; everything else is OTHER (the text goes to to_tsvector). */
const CLASS = new Uint8Array(128);
for (let c = 65; c <= 90; c++) CLASS[c] = LETTER;
for (let c = 97; c <= 122; c++) CLASS[c] = LETTER;
for (let c = 48; c <= 57; c++) CLASS[c] = DIGIT;
// Blanks in every context: white space and punctuation with no meaning to the parser outside
// URLs (and a URL needs characters refused here: '/', '@', a dot or colon before a word).
for (const ch of ' \t\n\r,;!?()[]{}"\'*=|%$^#`') CLASS[ch.charCodeAt(0)] = BLANK;
CLASS[46] = DOT;
CLASS[58] = COLON;
CLASS[45] = HYPHEN;

const classOf = (text: string, i: number) => {
  const c = text.charCodeAt(i);
  return c < 128 ? CLASS[c] : OTHER;
};

/**
 * The tokens of a text in the order the default parser gives them, one position each: words,
 * numbers, and for a hyphenated word the whole word then its parts. Null when the text holds
 * anything else.
 */
export function plainTokens(text: string): string[] | null {
  const n = text.length;
  if (n > MAX_TEXT_CHARS) return null;
  const out: string[] = [];
  let i = 0;
  while (i < n) {
    const k = classOf(text, i);
    if (k === LETTER || k === DIGIT) {
      let j = i + 1;
      while (j < n && classOf(text, j) === k) j++;
      // Letters next to digits (a numword, a float, a version): not here.
      if (j < n && classOf(text, j) === (k === LETTER ? DIGIT : LETTER)) return null;
      if (k === DIGIT) {
        out.push(text.slice(i, j));
      } else {
        // A hyphenated word: letters, then '-' and letters, again and again.
        const parts = [text.slice(i, j)];
        while (j + 1 < n && text.charCodeAt(j) === 45 && classOf(text, j + 1) === LETTER) {
          let e = j + 2;
          while (e < n && classOf(text, e) === LETTER) e++;
          if (e < n && classOf(text, e) === DIGIT) return null;
          parts.push(text.slice(j + 1, e));
          j = e;
        }
        if (parts.length > 1) out.push(text.slice(i, j), ...parts);
        else out.push(parts[0]);
      }
      if (j - i > MAX_TOKEN_CHARS) return null;
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
        if ((j - i !== 1 && j - i !== 3) || after === LETTER || after === DIGIT) return null;
        i = j;
        continue;
      }
      case COLON:
        // Before a word or number: URLs, times.
        if (next === LETTER || next === DIGIT) return null;
        break;
      case HYPHEN: {
        // Alone between blanks only: after a token it ends a hyphenated word oddly, before one it
        // makes a signed number or a hyphenated part.
        const prev = i > 0 ? classOf(text, i - 1) : BLANK;
        if (prev === LETTER || prev === DIGIT || next === LETTER || next === DIGIT) return null;
        break;
      }
      default:
        return null;
    }
    i++;
  }
  return out.length > MAX_TOKENS ? null : out;
}

const isDigitCode = (c: number) => c >= 48 && c <= 57;

/** A lexeme of the tsvector being made: its text form, and its positions in the current text. */
interface Entry {
  quoted: string;
  /** The text (a counter) whose positions `positions` holds. */
  text: number;
  /** The positions with their weight, as written ("3A,7A"), and how many. */
  positions: string;
  count: number;
}

/** Positions as text ('1'…), made once: a position's conversion cost more than the rest of its work. */
const POSITION_TEXT: string[] = [];
const positionText = (p: number) => (POSITION_TEXT[p] ??= String(p));

/** A lexeme as tsvector text: bare when it is letters, digits and hyphens (every lexeme made here), else quoted. */
const quote = (lexeme: string) => (/^[a-z0-9-]+$/.test(lexeme) ? lexeme : `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`);
const entry = (lexeme: string): Entry => ({ quoted: quote(lexeme), text: 0, positions: '', count: 0 });

/**
 * Drops the positions a text left on its entries and returns `result`: entries live in the lexicon
 * for good, and a lexeme's last positions string (up to ~1 KB) kept for each of 200k words would
 * be gigabytes.
 */
function release<T>(used: Entry[], result: T): T {
  for (const e of used) e.positions = '';
  return result;
}

/** Words the lexicon keeps (a language's words are few; a flood of new ones starts it afresh). */
const MAX_WORDS = 200_000;

/**
 * The lexemes of the english configuration by token, as the database's dictionary gives them
 * (ts_lexize with english_stem for words; a number is its own lexeme, the simple dictionary), and
 * the tsvectors made from them.
 */
export function createLexicon(maxWords = MAX_WORDS) {
  /** By token: its lexeme's entry; null for a stop word (a position, no lexeme); false when the dictionary gave anything but one lexeme. */
  const words = new Map<string, Entry | null | false>();
  const byLexeme = new Map<string, Entry>();
  let texts = 0;
  return {
    /** Learns what ts_lexize('english_stem', word) gave for each word (null: the dictionary did not know it). */
    learn(ws: string[], lexemes: (string[] | null)[]): void {
      if (words.size + ws.length > maxWords) {
        words.clear();
        byLexeme.clear();
      }
      ws.forEach((w, n) => {
        const l = lexemes[n];
        if (l === null || l.length > 1) words.set(w, false);
        else if (l.length === 0) words.set(w, null);
        else {
          let e = byLexeme.get(l[0]);
          if (!e) byLexeme.set(l[0], (e = entry(l[0])));
          words.set(w, e);
        }
      });
    },

    /**
     * The text form of setweight(to_tsvector('english', text), weight) from the text's tokens
     * (plainTokens); null when a word is not plain or a lexeme has too many positions; undefined
     * when words are not in the lexicon yet (added to `unknown`: learn them, then ask again).
     */
    tsvector(tokens: string[], weight: 'A' | 'B' | 'C' | 'D', unknown: Set<string>): string | null | undefined {
      const text = ++texts;
      const used: Entry[] = [];
      let numbers: Map<string, Entry> | undefined;
      let complete = true;
      for (let i = 0; i < tokens.length; i++) {
        const t = tokens[i];
        let e: Entry | null | false | undefined;
        if (isDigitCode(t.charCodeAt(0))) {
          numbers ??= new Map();
          e = numbers.get(t);
          if (!e) numbers.set(t, (e = entry(t)));
        } else e = words.get(t);
        if (e === undefined) {
          unknown.add(t);
          complete = false;
          continue;
        }
        if (e === false) return release(used, null);
        if (e === null || !complete) continue;
        // D is the weight of a position without one: the letter is left out.
        const p = weight === 'D' ? positionText(i + 1) : positionText(i + 1) + weight;
        if (e.text !== text) {
          e.text = text;
          e.positions = p;
          e.count = 1;
          used.push(e);
        } else {
          e.positions += `,${p}`;
          e.count++;
        }
      }
      if (!complete) return release(used, undefined);
      let out = '';
      for (const e of used) {
        if (e.count > MAX_POSITIONS) return release(used, null);
        out += `${out ? ' ' : ''}${e.quoted}:${e.positions}`;
      }
      return release(used, out);
    },

    /** Characters of positions held between texts (0: each text's are dropped once it is made). */
    retained(): number {
      let n = 0;
      for (const e of byLexeme.values()) n += e.positions.length;
      return n;
    },
  };
}

export type Lexicon = ReturnType<typeof createLexicon>;
