// An OpenAI-compatible HTTP provider (OpenAI, Ollama, vLLM, LocalAI). Remote and slow compared
// with the local ones, so vectors are made by the background indexer (src/services/search-indexer.ts).
import type OpenAI from 'openai';
import type { EmbeddingProvider } from './types.js';
import { EmbeddingError } from './types.js';
import { normalize } from './text.js';

export interface OpenAiProviderOptions {
  url?: string;
  model?: string;
  apiKey?: string;
  /** Requested output size for models that support it (0 = the model's own). */
  dimensions?: number;
  /** Texts per request. */
  batchSize?: number;
  timeoutMs?: number;
}

/** Longest text sent; embedding endpoints reject inputs over their context length. */
const MAX_INPUT_CHARS = 8_000;

export function createOpenAiProvider(opts: OpenAiProviderOptions): EmbeddingProvider {
  const model = opts.model ?? 'text-embedding-3-small';
  // The SDK (~150 modules) loads on the first embed: a process that never uses this provider,
  // as most groups don't, pays nothing for it at start.
  let client: Promise<OpenAI> | undefined;
  const connect = () =>
    (client ??= import('openai').then(
      ({ default: OpenAI }) =>
        new OpenAI({
          baseURL: opts.url,
          // Local servers (Ollama, vLLM) accept any key; the client insists on one.
          apiKey: opts.apiKey ?? 'not-needed',
          timeout: opts.timeoutMs ?? 30_000,
          maxRetries: 2,
        }),
    ));
  let dims = opts.dimensions || 0;
  const batch = opts.batchSize ?? 64;
  return {
    id: 'openai',
    model: `${model}${opts.dimensions ? `@${opts.dimensions}` : ''}`,
    inline: false,
    dimensions: () => dims,
    async embed(texts, call) {
      const signal = call?.signal;
      const out: Float32Array[] = [];
      for (let i = 0; i < texts.length; i += batch) {
        // An aborted round sends no further request, and the one in flight is cancelled (the SDK
        // takes the signal), instead of running on for its timeout and retries.
        signal?.throwIfAborted();
        const input = texts.slice(i, i + batch).map((t) => t.slice(0, MAX_INPUT_CHARS) || ' ');
        // encoding_format 'float': without it some servers answer base64 or empty vectors silently.
        const res = await (
          await connect()
        ).embeddings.create(
          {
            model,
            input,
            encoding_format: 'float',
            ...(opts.dimensions ? { dimensions: opts.dimensions } : {}),
          },
          // A signal of this request's own, following the round's: the SDK adds an abort listener
          // to the signal it is given and never removes it, so the round's signal would gather one
          // per request (and Node warns of a leak past 10 of them).
          { signal: signal && AbortSignal.any([signal]) },
        );
        const rows = [...res.data].sort((a, b) => a.index - b.index);
        if (rows.length !== input.length) throw new EmbeddingError(`embedding endpoint returned ${rows.length} vectors for ${input.length} inputs`);
        for (const r of rows) {
          if (!Array.isArray(r.embedding) || r.embedding.length === 0) throw new EmbeddingError('embedding endpoint returned an empty vector');
          const v = normalize(Float32Array.from(r.embedding));
          if (dims && v.length !== dims) throw new EmbeddingError(`embedding length changed from ${dims} to ${v.length}`);
          dims = v.length;
          out.push(v);
        }
      }
      return out;
    },
  };
}
