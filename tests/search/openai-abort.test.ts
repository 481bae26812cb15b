// A remote embedding call ends when its indexing round is aborted: the request in flight is
// cancelled and no further batch is sent (before, it ran on for its timeout and retries).
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createOpenAiProvider } from '../../src/embeddings/openai.js';
import { waitFor } from '../helpers/poll.js';

describe('OpenAI-compatible provider and an aborted round', () => {
  let server: Server;
  let url: string;
  // Requests received, and those whose connection the client closed before an answer.
  const received: IncomingMessage[] = [];
  let closedEarly = 0;
  let onRequest: (() => void) | undefined;
  // Requests to this path are answered at once (a vector per input); others never.
  const ANSWERED = '/answered/v1/embeddings';

  beforeAll(async () => {
    // A stand-in for a slow endpoint (outbound HTTP is the only thing tests fake): it never answers.
    server = createServer((req, res) => {
      if (req.url === ANSWERED) {
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => {
          const n = (JSON.parse(body) as { input: string[] }).input.length;
          const data = Array.from({ length: n }, (_, index) => ({ object: 'embedding', index, embedding: [1, 2, 3] }));
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ object: 'list', data, model: 'm' }));
        });
        return;
      }
      received.push(req);
      res.on('close', () => {
        if (!res.writableEnded) closedEarly++;
      });
      onRequest?.();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  /**
   * A round trip to the server after the call under test, instead of a pause: a batch the
   * provider went on to send after the abort would have reached the server by then.
   */
  const answered = async () => {
    const provider = createOpenAiProvider({ url: url.replace(/\/v1$/, '/answered/v1'), model: 'm', timeoutMs: 60_000 });
    expect(await provider.embed(['marker'])).toHaveLength(1);
  };
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('the request in flight is cancelled and the next batch is never sent', async () => {
    // One text per request, a timeout far beyond the test's: only the abort can end the call.
    const provider = createOpenAiProvider({ url, model: 'm', batchSize: 1, timeoutMs: 60_000 });
    const stop = new AbortController();
    const first = new Promise<void>((r) => (onRequest = r));
    const call = provider.embed(['first text', 'second text', 'third text'], { signal: stop.signal });
    call.catch(() => undefined);
    await first;
    // Only the abort can end the call (the server never answers, the timeout is a minute).
    stop.abort();
    await expect(call).rejects.toThrow();
    // The connection of the cancelled request closes; nothing else arrives: the provider's answered
    // request after it is the next one the server sees.
    await waitFor(() => closedEarly === 1, 60_000, 10, 'the cancelled request to close');
    await answered();
    expect(closedEarly).toBe(1);
    expect(received).toHaveLength(1);
  });

  test('an already aborted signal sends nothing', async () => {
    const before = received.length;
    const provider = createOpenAiProvider({ url, model: 'm', timeoutMs: 60_000 });
    await expect(provider.embed(['text'], { signal: AbortSignal.abort() })).rejects.toThrow();
    await answered();
    expect(received).toHaveLength(before);
  });

  test("a round's many requests leave no listener on its signal (no leak warning)", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const base = url.replace(/\/v1$/, '/answered/v1');
      const provider = createOpenAiProvider({ url: base, model: 'm', batchSize: 1, timeoutMs: 10_000 });
      const stop = new AbortController();
      // 30 requests on one round's signal: the SDK's listener on each used to stay there.
      const vectors = await provider.embed(
        Array.from({ length: 30 }, (_, i) => `text ${i}`),
        { signal: stop.signal },
      );
      expect(vectors).toHaveLength(30);
      await waitFor(() => getEventListeners(stop.signal, 'abort').length === 0, 60_000, 10, 'no listener on the signal');
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });
});
