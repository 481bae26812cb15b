// The per-text work of the offline embedders, made cheap (it bounds indexing throughput). One tokenising pass feeds both
// halves of the default provider. What depends only on a word (its stem, its word and character
// n-gram features, its GloVe row) is computed once per distinct word and kept in a bounded cache.
// Each distinct feature key (`w:stem`, `c:gram`) gets a small integer id with its hash32, so a text
// sums its features in flat arrays indexed by id instead of a Map<string, number> of freshly built
// key strings. Ids stand for exact keys, never for hashes: two keys with the same 32-bit hash stay
// two features, as they were two Map keys. A text's distinct words are counted while it is scanned
// and each adds its features once, weighted by its count (of a fixture vCon's whole text 46 % of the
// words are distinct, of a bench corpus vCon's 22 %): the vectors are those of the plain algorithm
// up to float32 rounding (tests/unit/embed-equivalence.test.ts keeps a reference copy of it).
// Stored vectors stay valid.
import { FNV_OFFSET, fnvFinish, fnvUpdate, hash32, isContentToken, scanSpans, stem } from './text.js';
import { spanHash, spanSlot } from '../search/span-table.js';

const WORD_W = 1;
const BIGRAM_W = 0.6;
const NGRAM_W = 0.35;

/** FNV state after the bigram key prefix `b:`. */
const BIGRAM_STATE = fnvUpdate(FNV_OFFSET, 'b:');

/** Bigram keys are idA · 2^26 + idB: exact in a double while ids stay below 2^26. */
const ID_SPAN = 2 ** 26;

/** What the embedders need of one distinct token; `G` is the GloVe half's entry. */
export interface WordFeatures<G> {
  /** The token as tokenised (the GloVe lookup key). */
  token: string;
  /** Whether it is a content token (stop words are cached too, to skip them with one lookup). */
  content: boolean;
  stem: string;
  /** Feature id of `w:${stem}`. */
  wordId: number;
  /** FNV state after `b:${stem} `: a bigram's hash continues it over the next stem. */
  bigramState: number;
  /** Feature ids of `c:${gram}` for each character 3-, 4- and 5-gram of `<stem>`, in that order. */
  gramIds: Int32Array;
  /** Weight of each n-gram: NGRAM_W / √(number of n-grams). */
  share: number;
  /** The GloVe half's entry: undefined until first needed, null for a word without a vector. */
  glove: G | null | undefined;
  /** The scan that last counted this word, and its count in that text. */
  seenIn: number;
  tf: number;
}

/** A scanned text's content tokens in order, and its distinct ones in first-seen order with their counts (`tf`). */
export interface Scanned<G> {
  words: WordFeatures<G>[];
  count: number;
  distinct: WordFeatures<G>[];
  distinctCount: number;
}

/** Grows a typed array to at least `min` elements, keeping its contents. */
function grown<T extends Uint32Array | Int32Array | Float64Array>(a: T, min: number): T {
  let len = a.length;
  while (len < min) len *= 2;
  if (len === a.length) return a;
  const b = new (a.constructor as new (n: number) => T)(len);
  b.set(a as never);
  return b;
}

/**
 * A text's tokenizer and feature accumulator, with a cache of `maxWords` distinct tokens (full, it
 * starts afresh). The feature ids are bounded too: past `maxFeatures` the ids and the word cache
 * start afresh before the next text. Not reentrant: one text at a time, as the synchronous encoders
 * use it.
 */
export function createFeaturizer<G>(maxWords: number, maxFeatures = 1 << 16) {
  let ids = new Map<string, number>();
  let hashOf = new Uint32Array(1024);
  // Per feature id: the text (generation) whose sum it has, and that sum's index.
  let seenIn = new Uint32Array(1024);
  let entryOf = new Int32Array(1024);
  const idOf = (key: string): number => {
    let id = ids.get(key);
    if (id === undefined) {
      id = ids.size;
      ids.set(key, id);
      hashOf = grown(hashOf, id + 1);
      seenIn = grown(seenIn, id + 1);
      entryOf = grown(entryOf, id + 1);
      hashOf[id] = hash32(key);
    }
    return id;
  };

  // The word cache: open addressing on the token's FNV hash, looked up with the token where it
  // stands in the lower-cased text (a string sliced per token was most of the embedding's garbage).
  let wordKeys: (string | undefined)[] = [];
  let wordHashes = new Int32Array(0);
  let wordValues: (WordFeatures<G> | undefined)[] = [];
  let wordCount = 0;
  const clearWords = () => {
    const capacity = 2 ** Math.ceil(Math.log2(2 * maxWords + 2));
    wordKeys = new Array<string | undefined>(capacity).fill(undefined);
    wordHashes = new Int32Array(capacity);
    wordValues = new Array<WordFeatures<G> | undefined>(capacity).fill(undefined);
    wordCount = 0;
  };
  clearWords();
  const wordSlot = (s: string, from: number, to: number, h: number) => spanSlot(wordKeys, wordHashes, s, from, to, h);
  /** The cached features of the token s[from, to), built on first sight. */
  const wordAt = (s: string, from: number, to: number): WordFeatures<G> => {
    const h = spanHash(s, from, to);
    let i = wordSlot(s, from, to, h);
    const hit = wordValues[i];
    if (hit !== undefined) return hit;
    if (wordCount >= maxWords) {
      clearWords();
      i = wordSlot(s, from, to, h);
    }
    const w = build(s.slice(from, to));
    wordKeys[i] = w.token;
    wordHashes[i] = h;
    wordValues[i] = w;
    wordCount++;
    return w;
  };

  const build = (token: string): WordFeatures<G> => {
    const s = stem(token);
    const padded = `<${s}>`;
    const grams: number[] = [];
    for (let n = 3; n <= 5; n++) for (let j = 0; j + n <= padded.length; j++) grams.push(idOf(`c:${padded.slice(j, j + n)}`));
    return {
      token,
      content: isContentToken(token, false),
      stem: s,
      wordId: idOf(`w:${s}`),
      bigramState: fnvUpdate(fnvUpdate(BIGRAM_STATE, s), ' '),
      gramIds: Int32Array.from(grams),
      share: grams.length ? NGRAM_W / Math.sqrt(grams.length) : 0,
      glove: undefined,
      seenIn: 0,
      tf: 0,
    };
  };

  // The content tokens of the current text, and its distinct ones. A word's features are added once
  // with its count as weight rather than once per occurrence: a conversation repeats its words, and
  // per occurrence was most of the embedding's time.
  const scanned: Scanned<G> = { words: [], count: 0, distinct: [], distinctCount: 0 };
  const seq = scanned.words;
  const distinct = scanned.distinct;
  let count = 0;
  let distinctCount = 0;
  let scans = 0;
  // Single characters and digit runs are never content: skipped before the cache.
  const count1 = (w: WordFeatures<G>) => {
    if (!w.content) return;
    seq[count++] = w;
    if (w.seenIn !== scans) {
      w.seenIn = scans;
      w.tf = 0;
      distinct[distinctCount++] = w;
    }
    w.tf++;
  };
  let lower = '';
  const span = (from: number, to: number, digits: boolean) => {
    if (to - from <= 1 || (digits && to - from >= 3)) return;
    count1(wordAt(lower, from, to));
  };
  const token = (t: string, digits: boolean) => {
    if (t.length <= 1 || (digits && t.length >= 3)) return;
    count1(wordAt(t, 0, t.length));
  };

  /**
   * The content tokens of `text`, valid until the next call. A word evicted from the cache and
   * built again within the text is two distinct entries, their counts adding up to its count.
   */
  const scan = (text: string): Scanned<G> => {
    if (ids.size > maxFeatures) {
      ids = new Map();
      clearWords();
    }
    count = 0;
    distinctCount = 0;
    if (++scans === 0x7fffffff) {
      // After 2 billion texts: forget every mark rather than mistake an old one (0: never counted).
      for (const w of wordValues) if (w) w.seenIn = 0;
      scans = 1;
    }
    lower = text.toLowerCase();
    scanSpans(lower, span, token);
    lower = '';
    scanned.count = count;
    scanned.distinctCount = distinctCount;
    return scanned;
  };

  // The sums of one text, in first-seen order (the order the plain algorithm's Map iterated, so
  // the float sums round identically), with each one's hash.
  let sumHash = new Uint32Array(1024);
  let sums = new Float64Array(1024);
  let n = 0;
  let gen = 0;
  const addId = (id: number, w: number) => {
    if (seenIn[id] === gen) {
      sums[entryOf[id]] += w;
      return;
    }
    seenIn[id] = gen;
    entryOf[id] = n;
    push(hashOf[id], w);
  };
  const push = (h: number, w: number) => {
    if (n === sums.length) {
      sums = grown(sums, n + 1);
      sumHash = grown(sumHash, n + 1);
    }
    sumHash[n] = h;
    sums[n++] = w;
  };

  // Bigrams of the text: open addressing on their (idA, idB) key; a slot is live in its text only.
  let pairKey = new Float64Array(1024);
  let pairEntry = new Int32Array(1024);
  let pairGen = new Uint32Array(1024);
  let pairs = 0;
  const pairSlot = (key: number, a: number, b: number) => {
    const mask = pairKey.length - 1;
    let s = (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca6b)) & mask;
    while (pairGen[s] === gen && pairKey[s] !== key) s = (s + 1) & mask;
    return s;
  };
  const growPairs = () => {
    const [keys, entries, gens] = [pairKey, pairEntry, pairGen];
    pairKey = new Float64Array(keys.length * 2);
    pairEntry = new Int32Array(keys.length * 2);
    pairGen = new Uint32Array(keys.length * 2);
    for (let i = 0; i < keys.length; i++) {
      if (gens[i] !== gen) continue;
      const k = keys[i];
      const to = pairSlot(k, Math.floor(k / ID_SPAN), k % ID_SPAN);
      pairKey[to] = k;
      pairEntry[to] = entries[i];
      pairGen[to] = gen;
    }
  };
  const addBigram = (t: WordFeatures<G>, next: WordFeatures<G>) => {
    const key = t.wordId * ID_SPAN + next.wordId;
    let s = pairSlot(key, t.wordId, next.wordId);
    if (pairGen[s] === gen) {
      sums[pairEntry[s]] += BIGRAM_W;
      return;
    }
    if (2 * ++pairs > pairKey.length) {
      growPairs();
      s = pairSlot(key, t.wordId, next.wordId);
    }
    pairKey[s] = key;
    pairEntry[s] = n;
    pairGen[s] = gen;
    push(fnvFinish(fnvUpdate(t.bigramState, next.stem)), BIGRAM_W);
  };

  /**
   * Adds the hashed features of the scanned words into `out` (length = bucket count): words, word
   * bigrams and character 3–5-grams of the stems, each hashed with a sign. Term weights are
   * 1 + ln(tf), which stays ≥ 1: a log weight that can go negative spoils short texts.
   * Words and their n-grams are added once per distinct word, weighted by its count; bigrams per
   * occurrence.
   */
  const addHashed = (text: Scanned<G>, out: Float32Array) => {
    if (ids.size >= ID_SPAN) throw new Error('feature ids exceed the bigram key space');
    if (++gen === 0xffffffff) {
      // After 4 billion texts: forget every generation mark rather than mistake an old one.
      seenIn.fill(0);
      pairGen.fill(0);
      gen = 1;
    }
    n = 0;
    pairs = 0;
    const { words: ws, count: wc, distinct: ds, distinctCount: dc } = text;
    for (let i = 0; i < dc; i++) {
      const t = ds[i];
      const tf = t.tf;
      addId(t.wordId, WORD_W * tf);
      // Character n-grams let a typo still share most features with the right word.
      const { gramIds } = t;
      const share = t.share * tf;
      for (let g = 0; g < gramIds.length; g++) addId(gramIds[g], share);
    }
    for (let i = 0; i + 1 < wc; i++) addBigram(ws[i], ws[i + 1]);
    const dims = out.length;
    for (let e = 0; e < n; e++) {
      const h = sumHash[e];
      const w = sums[e];
      const weight = w >= 1 ? 1 + Math.log(w) : w;
      out[h % dims] += h & 0x80000000 ? -weight : weight;
    }
  };

  return { scan, addHashed };
}

export type Featurizer<G> = ReturnType<typeof createFeaturizer<G>>;
