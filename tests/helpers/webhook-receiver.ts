// A local webhook receiver for tests: records every request and answers as the test decides.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** An answer: a status (with headers), or 'hang' (never answer). */
export type Answer = number | { status: number; headers?: Record<string, string> } | 'hang';

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Decides each answer (default 204). */
  answer: (r: Received, n: number) => Answer;
  /** Requests left unanswered so far. */
  hanging: ServerResponse[];
  /** Stops listening and drops every connection (a crashed receiver). */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
}

export async function startReceiver(answer: Receiver['answer'] = () => 204, port = 0): Promise<Receiver> {
  let server: Server;
  const r: Receiver = {
    url: '',
    port,
    received: [],
    answer,
    hanging: [],
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      r.hanging.length = 0;
    },
    async start() {
      server = createServer((req, res) => {
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (c: string) => (body += c));
        req.on('end', () => {
          const got = { headers: req.headers, body };
          r.received.push(got);
          const a = r.answer(got, r.received.length);
          if (a === 'hang') {
            r.hanging.push(res);
            return;
          }
          const { status, headers } = typeof a === 'number' ? { status: a, headers: {} } : a;
          res.writeHead(status, headers).end();
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(r.port, '127.0.0.1', () => resolve());
      });
      r.port = (server.address() as AddressInfo).port;
      r.url ||= `http://127.0.0.1:${r.port}/hook-${randomBytes(4).toString('hex')}`;
    },
  };
  await r.start();
  return r;
}
