// An in-memory index of the 256-bit sign codes of one vector space: the candidate stage of the
// semantic search. Scanning 100k codes here takes a few milliseconds, where the same Hamming scan
// in SQL (bit_count(code # q) on every row) measured 70–100 ms on this machine under load.
// PostgreSQL stays the source of truth: the service reloads and catches up from vcon_codes.
import { CODE_BITS } from './code.js';

const WORDS = CODE_BITS / 32;

const popcount = (x: number) => {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
};

/** Packs code bytes (bit i = MSB-first bit of byte i >> 3, as varbit_send) into 32-bit words. */
export function codeWords(bytes: Uint8Array): Uint32Array {
  const out = new Uint32Array(WORDS);
  for (let w = 0; w < WORDS; w++) {
    out[w] = ((bytes[w * 4] << 24) | (bytes[w * 4 + 1] << 16) | (bytes[w * 4 + 2] << 8) | bytes[w * 4 + 3]) >>> 0;
  }
  return out;
}

export interface CodeFilter {
  /** Inclusive lower bound of created_at, ms. */
  from?: number;
  /** Exclusive upper bound of created_at, ms. */
  to?: number;
}

export function createCodeIndex() {
  let cap = 1024;
  let n = 0;
  let words = new Uint32Array(cap * WORDS);
  let created = new Float64Array(cap);
  let live = new Uint8Array(cap);
  let uuids: string[] = [];
  const slots = new Map<string, number>();

  const grow = () => {
    cap *= 2;
    const w = new Uint32Array(cap * WORDS);
    w.set(words);
    words = w;
    const c = new Float64Array(cap);
    c.set(created);
    created = c;
    const l = new Uint8Array(cap);
    l.set(live);
    live = l;
  };

  return {
    get size() {
      return slots.size;
    },

    clear() {
      n = 0;
      uuids = [];
      slots.clear();
      live.fill(0);
    },

    /** Adds or replaces the code of a vCon. */
    upsert(uuid: string, createdAt: number, code: Uint32Array) {
      let s = slots.get(uuid);
      if (s === undefined) {
        if (n === cap) grow();
        s = n++;
        slots.set(uuid, s);
        uuids[s] = uuid;
      }
      words.set(code, s * WORDS);
      created[s] = createdAt;
      live[s] = 1;
    },

    /** Forgets a vCon (found deleted or moved to another space). */
    remove(uuid: string) {
      const s = slots.get(uuid);
      if (s === undefined) return;
      live[s] = 0;
      slots.delete(uuid);
    },

    /**
     * The `k` uuids nearest the query code, nearest first; equal distances in uuid order (as the
     * SQL path orders them). So the answer for `k` is the first `k` of the answer for any larger
     * `k`, whatever order the codes were loaded in: semantic pages rely on it.
     */
    nearest(query: Uint32Array, k: number, f: CodeFilter = {}): string[] {
      const dist = new Uint16Array(n);
      const hist = new Uint32Array(CODE_BITS + 2);
      const from = f.from ?? -Infinity;
      const to = f.to ?? Infinity;
      for (let s = 0; s < n; s++) {
        if (!live[s] || created[s] < from || created[s] >= to) {
          dist[s] = CODE_BITS + 1;
          continue;
        }
        const base = s * WORDS;
        let d = 0;
        for (let w = 0; w < WORDS; w++) d += popcount((words[base + w] ^ query[w]) >>> 0);
        dist[s] = d;
        hist[d]++;
      }
      // Counting sort on the distance: the cut-off distance, then the slots at or below it, sorted
      // (those below it are fewer than k; the ones at it are usually few too).
      let cut = 0;
      let below = 0;
      while (cut <= CODE_BITS && below + hist[cut] < k) below += hist[cut++];
      const picked: number[] = [];
      for (let s = 0; s < n; s++) if (dist[s] <= cut && dist[s] <= CODE_BITS) picked.push(s);
      picked.sort((a, b) => dist[a] - dist[b] || (uuids[a] < uuids[b] ? -1 : uuids[a] > uuids[b] ? 1 : 0));
      return picked.slice(0, k).map((s) => uuids[s]);
    },
  };
}

export type CodeIndex = ReturnType<typeof createCodeIndex>;
