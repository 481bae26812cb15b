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
 * averaging the rest drags every text towards the same point (STACK.md "Embeddings offline").
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

const TOKEN_RE = /[\p{L}\p{N}]+(?:['’][\p{L}]+)*/gu;

/** Lower-case word tokens; possessive 's dropped, n't kept inside the word ("didn't" → "didnt"). */
export function tokenize(text: string): string[] {
  const out: string[] = [];
  const lower = text.toLowerCase();
  for (const m of lower.matchAll(TOKEN_RE)) {
    let t = m[0].replace(/’/g, "'");
    if (t.endsWith("'s")) t = t.slice(0, -2);
    t = t.replace(/'/g, '');
    if (t) out.push(t);
  }
  return out;
}

/** Content tokens: not stop words, not single characters, not long digit runs (ids, numbers). */
export function contentTokens(text: string): string[] {
  return tokenize(text).filter((t) => t.length > 1 && !STOP_WORDS.has(t) && !/^\d{3,}$/.test(t));
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

/** FNV-1a, 32 bits: fast, stable across runs and platforms. */
export function hash32(s: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // Final avalanche so low bits (used for the bucket) depend on every character.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
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
