// The embedding provider interface (docs/architecture.md "Search"). A vector is only ever compared with
// vectors of the same `id` and `model`: both are stored beside every vector.

export interface EmbeddingProvider {
  /** Provider family: 'glove', 'hashing', 'openai'. */
  readonly id: string;
  /** Everything that changes the vector space: model name, dimensions, algorithm version. */
  readonly model: string;
  /** Vector length; known up front for local providers, after the first call for remote ones. */
  dimensions(): number;
  /**
   * True when embedding is cheap and local, so it runs inside the write transaction
   * (read-your-writes); false for a remote provider, which embeds in the background.
   */
  readonly inline: boolean;
  /**
   * Unit-length vectors, one per text, in order. `signal` ends a remote call early (an indexing
   * round that failed while it embedded); local providers, which answer at once, may ignore it.
   */
  embed(texts: string[], opts?: { signal?: AbortSignal }): Promise<Float32Array[]>;
  /**
   * Spelling neighbours of a word from the provider's vocabulary (closest first), and whether the
   * word itself is a common word there. Keyword search keeps those found in the group's own texts.
   */
  suggest?(word: string): Promise<{ known: boolean; words: string[] }>;
  /** Loads what the provider needs (a cache file, a first request) before the first write. */
  warm?(): Promise<void>;
}

/** Raised when a provider can't embed (missing cache package, remote endpoint failing). */
export class EmbeddingError extends Error {
  override name = 'EmbeddingError';
}
