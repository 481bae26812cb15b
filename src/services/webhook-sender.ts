// One HTTP attempt of a webhook delivery, with the target's address checked where it is used: in
// the resolver the connection itself calls and on the connected socket, so a DNS answer that
// changes between a check and the connection (rebinding) cannot reach a private address.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { literalHost, privateAddressProblem } from '../domain/addresses.js';

/**
 * What an attempt came to: the response's status and Retry-After, or an error before any status:
 * `error` in full (the delivery's last_error, for key holders), `reason` in words that name no
 * host or address (the endpoint's, which /health shows without a key).
 */
export type SendResult = { status: number; retryAfter: string | undefined } | { status: null; error: string; reason: string };

/** Network error codes in words; others are shown as their code. */
const REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

/** An error's reason from its code only: a message may name the host, a code never does. */
export function reasonOf(err: { code?: unknown }): string {
  const code = typeof err.code === 'string' && /^[A-Z][A-Z0-9_]{0,59}$/.test(err.code) ? err.code : undefined;
  if (!code) return 'connection failed';
  if (REASONS[code]) return REASONS[code];
  // Node's TLS failures: CERT_HAS_EXPIRED, DEPTH_ZERO_SELF_SIGNED_CERT, ERR_TLS_CERT_ALTNAME_INVALID, ...
  if (/CERT|TLS|SSL/.test(code)) return `TLS failed (${code})`;
  return `connection failed (${code})`;
}

/** A resolver that refuses every answer holding a private address (the connection's own lookup). */
function guardedLookup(): net.LookupFunction {
  return ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err);
      for (const a of addresses) {
        const problem = privateAddressProblem(a.address);
        if (problem) return callback(Object.assign(new Error(`${hostname} resolves to ${problem}`), { code: 'EWEBHOOKPRIVATE' }));
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  }) as net.LookupFunction;
}

const REFUSED = 'refused: a private, loopback, link-local or reserved address (WEBHOOK_ALLOW_PRIVATE is off)';

export interface Sender {
  send(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
  close(): void;
}

/**
 * Sends POSTs with a response timeout; no redirect is followed (a 3xx is the caller's failure).
 * Keep-alive agents per scheme: a socket is reused only after its address passed the check.
 */
export function createSender(opts: { allowPrivate: boolean; timeoutMs: number }): Sender {
  const lookup = opts.allowPrivate ? undefined : guardedLookup();
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  return {
    send(target, headers, body) {
      return new Promise<SendResult>((resolve) => {
        const url = new URL(target);
        const literal = literalHost(url);
        const refused = !opts.allowPrivate && literal ? privateAddressProblem(literal) : undefined;
        if (refused) return resolve({ status: null, error: `refused: ${refused}`, reason: REFUSED });
        const secure = url.protocol === 'https:';
        const req = (secure ? https : http).request(url, {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          agent: secure ? agents.https : agents.http,
          lookup,
        });
        let settled = false;
        const finish = (r: SendResult) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(r);
        };
        const timer = setTimeout(() => {
          const error = `no response within ${opts.timeoutMs / 1000} s`;
          finish({ status: null, error, reason: error });
          req.destroy();
        }, opts.timeoutMs);
        req.on('socket', (socket) => {
          // The address actually connected to: checked again, whatever resolved it.
          const check = () => {
            const problem = opts.allowPrivate ? undefined : privateAddressProblem(socket.remoteAddress ?? '');
            if (problem) {
              finish({ status: null, error: `refused: ${problem}`, reason: REFUSED });
              req.destroy();
            }
          };
          if ((socket as net.Socket).connecting) socket.once('connect', check);
          else check();
        });
        req.on('response', (res) => {
          const retryAfter = res.headers['retry-after'];
          // The body is not read for anything: drain it so the socket can be reused.
          res.resume();
          res.on('end', () => finish({ status: res.statusCode ?? 0, retryAfter }));
          res.on('error', () => finish({ status: res.statusCode ?? 0, retryAfter }));
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          const msg = err.code === 'EWEBHOOKPRIVATE' ? `refused: ${err.message}` : err.message || err.code || 'connection failed';
          finish({ status: null, error: msg, reason: err.code === 'EWEBHOOKPRIVATE' ? REFUSED : reasonOf(err) });
        });
        req.end(body);
      });
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
