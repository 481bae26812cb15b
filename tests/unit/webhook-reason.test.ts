// An endpoint's last error is shown by the keyless /health: it is made from an error's code alone,
// never its message, which names the host and port ("connect ECONNREFUSED 10.1.2.3:443").
import { describe, expect, it } from 'vitest';
import { reasonOf } from '../../src/services/webhook-sender.js';

const err = (code: unknown, message = 'connect to hooks.internal.example 10.1.2.3:443 failed') => Object.assign(new Error(message), { code });

describe('reasonOf', () => {
  it('says what common network errors are, in words', () => {
    expect(reasonOf(err('ECONNREFUSED'))).toBe('connection refused');
    expect(reasonOf(err('ECONNRESET'))).toBe('connection reset');
    expect(reasonOf(err('ENOTFOUND'))).toBe('host name not found');
    expect(reasonOf(err('ETIMEDOUT'))).toBe('connection timed out');
  });

  it('names TLS failures and other codes by their code', () => {
    expect(reasonOf(err('CERT_HAS_EXPIRED'))).toBe('TLS failed (CERT_HAS_EXPIRED)');
    expect(reasonOf(err('ERR_TLS_CERT_ALTNAME_INVALID'))).toBe('TLS failed (ERR_TLS_CERT_ALTNAME_INVALID)');
    expect(reasonOf(err('EPROTO'))).toBe('connection failed (EPROTO)');
  });

  it('never shows the message, nor a code that is not a plain identifier', () => {
    for (const code of [undefined, 42, 'host 10.1.2.3', 'x'.repeat(80)]) {
      const reason = reasonOf(err(code));
      expect(reason).toBe('connection failed');
    }
  });
});
