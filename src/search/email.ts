// What a person reads in an email: the Subject, the From/To names, the body (text/plain
// preferred, text/html reduced to text when it is the only body) and attachments' file names,
// parsed with postal-mime (headers unfolded, encoded words, quoted-printable and base64 decoded).
// Parsing is bounded: a hostile message is cut before it reaches the parser, so a write can't stall.
import type { Address } from 'postal-mime';

// The parsers (~50 modules) load with the first email: most groups never store one, and every
// module loaded at start is paid by every group's process (measured in the start time of 50 groups).
let parsers: Promise<{ PostalMime: typeof import('postal-mime').default; convert: typeof import('html-to-text').convert }> | undefined;
const loadParsers = () =>
  (parsers ??= Promise.all([import('postal-mime'), import('html-to-text')]).then(([p, h]) => ({ PostalMime: p.default, convert: h.convert })));

/** Characters of a message handed to the parser (the index keeps at most 100k per unit anyway). */
export const MAX_EMAIL_CHARS = 256_000;
/**
 * MIME boundary lines handed to the parser: its cost grows with parts × open boundaries
 * (measured: 20,000 parts in 800 kB took 10 s; 100 nested parts 84 ms). The rest is cut.
 */
export const MAX_EMAIL_PARTS = 100;
const HEADER_BYTES = 64 * 1024;
const NESTING = 8;

const EMAIL_TYPES = new Set(['message/rfc822', 'message/global', 'message/partial', 'application/mbox']);

/** True for the media types of a whole email message. */
export const isEmailMediatype = (mediatype: string | null): boolean =>
  mediatype !== null && EMAIL_TYPES.has(mediatype.split(';')[0].trim().toLowerCase());

/** Cuts a message to the parser's bounds: size first, then the boundary lines of many parts. */
function bounded(raw: string): string {
  let s = raw.length > MAX_EMAIL_CHARS ? raw.slice(0, MAX_EMAIL_CHARS) : raw;
  let seen = 0;
  const delim = /^--/gm;
  for (let m = delim.exec(s); m; m = delim.exec(s)) {
    if (++seen > MAX_EMAIL_PARTS) {
      s = s.slice(0, m.index);
      break;
    }
  }
  return s;
}

const names = (list: (Address | undefined)[]): string[] =>
  list.flatMap((a) => (!a ? [] : a.group ? names(a.group) : [a.name || a.address || ''])).filter((n) => n.trim() !== '');

/** HTML as the text a reader sees: no markup, scripts, styles or link targets. */
const htmlToText = (html: string, convert: typeof import('html-to-text').convert): string =>
  convert(html, {
    wordwrap: false,
    selectors: [
      { selector: 'a', options: { ignoreHref: true } },
      { selector: 'img', format: 'skip' },
      { selector: 'h1', options: { uppercase: false } },
      { selector: 'h2', options: { uppercase: false } },
      { selector: 'h3', options: { uppercase: false } },
      { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false } },
    ],
  }).trim();

/**
 * The readable text of an RFC 822 / MIME message: subject, then sender and recipient names, then
 * the body and attachment file names. A message the parser rejects reads as its raw text after
 * the header block (never the headers).
 */
export async function emailText(raw: string): Promise<string> {
  const input = bounded(raw);
  const { PostalMime, convert } = await loadParsers();
  try {
    const mail = await PostalMime.parse(input, { maxHeadersSize: HEADER_BYTES, maxNestingDepth: NESTING, attachmentEncoding: 'arraybuffer' });
    const who = [...names([mail.from]), ...names(mail.to ?? []), ...names(mail.cc ?? [])];
    const body = mail.text?.trim() || (mail.html ? htmlToText(mail.html, convert) : '');
    const files = mail.attachments.flatMap((a) => (a.filename ? [a.filename] : []));
    return [mail.subject ?? '', who.join(', '), body, files.join(', ')].filter((s) => s.trim() !== '').join('\n');
  } catch {
    const sep = input.search(/\r?\n\r?\n/);
    return sep >= 0 ? input.slice(sep).trim() : '';
  }
}

/** A base64url (or base64) body as UTF-8 text, cut to `maxChars` of input first. */
export function decodeBase64Text(body: string, maxChars = MAX_EMAIL_CHARS * 2): string {
  const s = body.length > maxChars ? body.slice(0, maxChars - (maxChars % 4)) : body;
  return Buffer.from(s.replace(/\s+/g, ''), 'base64url').toString('utf8');
}
