// What the fast paths' tests share (fast-get.test.ts, fast-create.test.ts): the configurations they
// compare the fast path with express's in, and an instance whose log lines are kept.
import type { EnvInput } from '../../src/config.js';
import { waitFor } from '../helpers/poll.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

export const KEY = 'fast-key-rw';
export const RO_KEY = 'fast-key-ro';

export interface Logged {
  level: number;
  msg: string;
  req?: { id: string; method: string; path: string };
  res?: { statusCode: number };
  responseTime?: number;
}

export interface Started extends TestServer {
  lines: Logged[];
}

/** The configurations each fast path is compared with express's in: name, env, auth headers. */
export const SETUPS: [string, EnvInput, Record<string, string>][] = [
  ['defaults (Bearer key, CORS *)', {}, { authorization: `Bearer ${KEY}` }],
  [
    'a key header, an origin list, another base path',
    { API_KEY_HEADER: 'x-api-key', CORS_ORIGIN: 'https://a.example.com', REST_API_BASE_PATH: '/v2' },
    { 'x-api-key': KEY },
  ],
  ['no authentication', { API_AUTH_REQUIRED: 'false' }, {}],
];

/** A real instance whose log lines (level info) are kept; a busy pool answers after 200 ms. */
export async function start(env: EnvInput): Promise<Started> {
  const lines: Logged[] = [];
  const s = await startTestServer(
    { API_KEYS: KEY, API_KEYS_READONLY: RO_KEY, LOG_LEVEL: 'info', DB_QUEUE_TIMEOUT_MS: '200', ...env },
    { logTo: { write: (l: string) => lines.push(JSON.parse(l) as Logged) } },
  );
  return Object.assign(s, { lines });
}

/**
 * The log lines of one request (those that carry its request; with `byReqId` also those naming it
 * as req_id), once one is written: the access line is written when the response closes, just
 * after the client has its answer.
 */
export async function loggedLines(s: Started, id: string, byReqId = false): Promise<Logged[]> {
  const mine = () => s.lines.filter((l) => l.req?.id === id || (byReqId && (l as { req_id?: string }).req_id === id));
  await waitFor(() => mine().length > 0, 60_000, 5, `the log line of request ${id}`);
  return mine();
}
