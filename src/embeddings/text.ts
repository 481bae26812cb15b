// Tokenising shared by the embedding providers: lower-case word tokens, a stop list, a light
// suffix stripper and a fast string hash. Deterministic: stored vectors depend on it, so any
// change here must bump the model id of the providers that use it (see MODEL_VERSION).

/**
 * Bumped whenever tokenising, weighting or what a stored vector is made of changes, so old vectors
 * stop matching new queries and `npm run reembed` redoes them. 2: the vCon vector is the embedding
 * of the whole text (d5bcd54), was the mean of the unit vectors.
 */
export const MODEL_VERSION = 2;

/**
 * Function words that carry no topic. The GloVe vocabulary lacks some of them ("i", "a") and
 * averaging the rest drags every text towards the same point.
 */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between both ' +
    'but by can could did do does doing down during each few for from further had has have having he her here hers ' +
    'herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on ' +
    'once only or other our ours ourselves out over own same she should so some such than that the their theirs them ' +
    'themselves then there these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself yourselves also get got im ive id youre dont cant ' +
    'wont didnt doesnt isnt wasnt arent hi hello hey thanks thank please ok okay yes yeah oh um uh well us let lets ' +
    'would could shall may might must one us'
  ).split(/\s+/),
);

/** Character classes of the tokeniser: letters (\p{L}), numbers (\p{N}), anything else. */
const OTHER = 0;
const LETTER = 1;
const NUMBER = 2;
const IS_LETTER = /^\p{L}$/u;
const IS_NUMBER = /^\p{N}$/u;

/** Classes of the BMP, filled on first sight (0 = not yet known, else class + 1). */
const bmpClass = new Uint8Array(0x10000);
const astralClass = new Map<number, number>();
const classOf = (ch: string) => (IS_LETTER.test(ch) ? LETTER : IS_NUMBER.test(ch) ? NUMBER : OTHER);

/**
 * Class of the code point at `i` in the low 2 bits, its width in UTF-16 units above them. A lone
 * surrogate is a code point of its own and neither letter nor number, as in a `u` regex.
 */
function classAt(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c < 128) return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) ? LETTER | 4 : c >= 48 && c <= 57 ? NUMBER | 4 : OTHER | 4;
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const lo = s.charCodeAt(i + 1);
    if (lo >= 0xdc00 && lo <= 0xdfff) {
      const cp = ((c - 0xd800) << 10) + (lo - 0xdc00) + 0x10000;
      let k = astralClass.get(cp);
      if (k === undefined) astralClass.set(cp, (k = classOf(String.fromCodePoint(cp))));
      return k | 8;
    }
  }
  let k = bmpClass[c];
  if (k === 0) bmpClass[c] = k = classOf(String.fromCharCode(c)) + 1;
  return (k - 1) | 4;
}

/**
 * Calls `visit` with each lower-case word token of `text` and whether it is all ASCII digits: the
 * tokens of the regex `[\p{L}\p{N}]+(?:['’]\p{L}+)*`, possessive 's dropped, other apostrophes
 * removed ("didn't" → "didnt"). A hand-written scanner: the regex with its replaces cost a few
 * times more, and every stored vector depends on this (tests/unit/embed-equivalence.test.ts).
 */
export function scanTokens(text: string, visit: (token: string, digits: boolean) => void): void {
  const s = text.toLowerCase();
  scanSpans(s, (start, end, digits) => visit(s.slice(start, end), digits), visit);
}

/**
 * scanTokens over an already lower-cased text, without a string per token: a token that is a
 * span of `s` as it stands goes to `span` (start, end); one with apostrophes, which are dropped,
 * goes to `token` as a string.
 */
export function scanSpans(
  s: string,
  span: (start: number, end: number, digits: boolean) => void,
  token: (token: string, digits: boolean) => void,
): void {
  const len = s.length;
  let i = 0;
  while (i < len) {
    let k = classAt(s, i);
    if ((k & 3) === OTHER) {
      i += k >> 2;
      continue;
    }
    const start = i;
    let digits = true;
    do {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) digits = false;
      i += k >> 2;
    } while (i < len && ((k = classAt(s, i)) & 3) !== OTHER);
    let apostrophes = false;
    while (i + 1 < len) {
      const c = s.charCodeAt(i);
      if (c !== 39 && c !== 0x2019) break;
      k = classAt(s, i + 1);
      if ((k & 3) !== LETTER) break;
      apostrophes = true;
      i += 1 + (k >> 2);
      while (i < len && ((k = classAt(s, i)) & 3) === LETTER) i += k >> 2;
    }
    if (!apostrophes) {
      span(start, i, digits);
      continue;
    }
    let t = s.slice(start, i).replace(/’/g, "'");
    if (t.endsWith("'s")) t = t.slice(0, -2);
    t = t.replace(/'/g, '');
    token(t, /^\d+$/.test(t));
  }
}

/** Lower-case word tokens; possessive 's dropped, n't kept inside the word ("didn't" → "didnt"). */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  scanTokens(text, (t) => out.push(t));
  return out;
}

/** Whether a token carries content: not a stop word, not a single character, not a long digit run (ids, numbers). */
export const isContentToken = (t: string, digits: boolean) => t.length > 1 && !(digits && t.length >= 3) && !STOP_WORDS.has(t);

/** Content tokens: not stop words, not single characters, not long digit runs (ids, numbers). */
export function contentTokens(text: string): string[] {
  const out: string[] = [];
  scanTokens(text, (t, digits) => {
    if (isContentToken(t, digits)) out.push(t);
  });
  return out;
}

/**
 * A crude English suffix stripper for the hashing features: "refunds", "refunded", "refunding"
 * all become "refund". Not a real stemmer; it only has to be consistent.
 */
export function stem(w: string): string {
  if (w.length <= 4) return w;
  if (w.endsWith('ies') && w.length > 5) return w.slice(0, -3) + 'y';
  if (w.endsWith('ing') && w.length > 6) return w.slice(0, -3);
  if (w.endsWith('ed') && w.length > 5) return w.slice(0, -2);
  if (w.endsWith('es') && /(?:ss|sh|ch|x|z)es$/.test(w)) return w.slice(0, -2);
  if (w.endsWith('s') && !w.endsWith('ss') && !w.endsWith('us') && !w.endsWith('is')) return w.slice(0, -1);
  return w;
}

export const FNV_OFFSET = 0x811c9dc5;

/** Continues an FNV-1a state over the characters of `s` (hash32 without the final avalanche). */
export function fnvUpdate(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h;
}

/** The final avalanche of hash32, so low bits (used for the bucket) depend on every character. */
export function fnvFinish(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a, 32 bits: fast, stable across runs and platforms. */
export function hash32(s: string, seed = FNV_OFFSET): number {
  return fnvFinish(fnvUpdate(seed >>> 0, s));
}

/** Scales a vector to unit length in place (a zero vector stays zero). */
export function normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  if (s > 0) {
    const k = 1 / Math.sqrt(s);
    for (let i = 0; i < v.length; i++) v[i] *= k;
  }
  return v;
}

export function dot(a: Float32Array, b: Float32Array): number {
  const n = Math.min(a.length, b.length);
  let s = 0;
  for (let i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/** Damerau-Levenshtein (optimal string alignment) distance, giving up above `max`. */
export function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const n = a.length;
  const m = b.length;
  let prev2 = new Array<number>(m + 1).fill(0);
  let prev = Array.from({ length: m + 1 }, (_, j) => j);
  let cur = new Array<number>(m + 1).fill(0);
  for (let i = 1; i <= n; i++) {
    cur[0] = i;
    let rowMin = cur[0];
    for (let j = 1; j <= m; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, prev2[j - 2] + 1);
      cur[j] = v;
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > max) return max + 1;
    [prev2, prev, cur] = [prev, cur, prev2];
  }
  return prev[m];
}
