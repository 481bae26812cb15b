// Open-addressing tables looked up with a token where it stands in its text (s[from, to)), so a
// lookup slices no string: the tsvector lexicon (tsvector.ts) and the embedder's word cache
// (embeddings/features.ts). The caller keeps the key strings and their hashes in two arrays of a
// power-of-two length, at most half full, and its values in a third.

/** FNV-1a of s[from, to), as a signed 32-bit integer (what an Int32Array of hashes holds). */
export function spanHash(s: string, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** The slot of s[from, to) with hash h (linear probing): its own, or the empty one where it would go. */
export function spanSlot(keys: readonly (string | undefined)[], hashes: Int32Array, s: string, from: number, to: number, h: number): number {
  const mask = keys.length - 1;
  const len = to - from;
  for (let i = h & mask; ; i = (i + 1) & mask) {
    const k = keys[i];
    if (k === undefined) return i;
    if (hashes[i] !== h || k.length !== len) continue;
    let c = 0;
    while (c < len && k.charCodeAt(c) === s.charCodeAt(from + c)) c++;
    if (c === len) return i;
  }
}
