// The search units of a vCon: the texts the indexer makes its tsvector and vectors from, each with
// its source and index (Search in docs/architecture.md). Audio and binary payloads never appear;
// e-mails appear as their readable text (email.ts).
import type { JsonObject } from '../domain/vcon.js';
import { isTagsAttachment, noNul, objectsOf, ownFields, textField } from '../domain/derive.js';
import { decodeBase64Text, emailText, isEmailMediatype } from './email.js';

export type UnitSource = 'subject' | 'party' | 'dialog' | 'analysis' | 'attachment';
export interface SearchUnit {
  source: UnitSource;
  idx: number;
  body: string;
}

/** Units in (source, idx) order: the order they are stored and joined in. */
export const sortedUnits = (units: SearchUnit[]) => [...units].sort((a, b) => (a.source === b.source ? a.idx - b.idx : a.source < b.source ? -1 : 1));

/** Sources in the order extractUnits gives them. */
const EXTRACTED_FIRST: Record<UnitSource, number> = { subject: 0, party: 1, dialog: 2, analysis: 3, attachment: 4 };

/** Units in the order extractUnits gives them (source as above, then idx), from any order (stored units come in sortedUnits'). */
export const extractedOrder = (units: SearchUnit[]) =>
  [...units].sort((a, b) => EXTRACTED_FIRST[a.source] - EXTRACTED_FIRST[b.source] || a.idx - b.idx);

/** A vCon's units as search_units stores them (and the indexer signs): a JSON array of {source, idx, body} in (source, idx) order. */
export const unitsJson = (units: SearchUnit[]) => JSON.stringify(sortedUnits(units).map((u) => ({ source: u.source, idx: u.idx, body: u.body })));

/** Longest text we index per unit; tsvector has a 1 MB limit and snippets need only the start. */
export const MAX_UNIT_CHARS = 100_000;

/** Text parts of a MIME multipart body (text/plain preferred, then text/html stripped of tags). */
export function stripMime(body: string, mediatype: string | null): string {
  const boundary = /boundary="?([^";]+)"?/i.exec(mediatype ?? '')?.[1] ?? /^--([^\r\n]+)\r?\n/m.exec(body)?.[1];
  if (!boundary) return body;
  const parts = body.split(`--${boundary}`).slice(1);
  const texts: string[] = [];
  for (const part of parts) {
    if (part.startsWith('--')) break;
    const sep = part.search(/\r?\n\r?\n/);
    const headers = sep >= 0 ? part.slice(0, sep) : '';
    const content = sep >= 0 ? part.slice(sep).trim() : part.trim();
    const ctype = /content-type:\s*([^;\r\n]+)/i.exec(headers)?.[1]?.toLowerCase() ?? 'text/plain';
    if (/content-transfer-encoding:\s*base64/i.test(headers)) continue;
    if (ctype.startsWith('multipart/')) texts.push(stripMime(content, headers));
    else if (ctype === 'text/plain') texts.push(content);
    else if (ctype === 'text/html') texts.push(content.replace(/<[^>]+>/g, ' '));
  }
  return texts.join('\n').trim();
}

/** Reduces a JSON transcript (string or parsed) to its text: `transcript`/`text` fields, segment texts. */
export function jsonText(value: unknown, depth = 0): string {
  if (depth > 6 || value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (Array.isArray(value))
    return value
      .map((v) => jsonText(v, depth + 1))
      .filter(Boolean)
      .join('\n');
  if (typeof value === 'object') {
    const o = value as JsonObject;
    for (const key of ['transcript', 'text', 'summary', 'content', 'message']) {
      if (typeof o[key] === 'string' && (o[key] as string).trim()) return o[key] as string;
    }
    for (const key of ['segments', 'utterances', 'results', 'channels', 'alternatives', 'paragraphs', 'sentences']) {
      if (o[key] !== undefined) {
        const t = jsonText(o[key], depth + 1);
        if (t) return t;
      }
    }
  }
  return '';
}

/** Readable texts of bodies that take asynchronous decoding (emails), by `source/idx`. */
export type DecodedBodies = ReadonlyMap<string, string>;

const mediatypeOf = (o: JsonObject) => textField(o.mediatype) ?? textField(o.mimetype);
const isBase64 = (encoding: unknown) => encoding === 'base64url' || encoding === 'base64';

/**
 * Decodes what derivation can't do synchronously: the email bodies (message/rfc822, plain or
 * base64url) of dialogs, analyses and attachments. Call before extractUnits and pass the result.
 */
export async function decodeBodies(doc: JsonObject): Promise<DecodedBodies> {
  doc = ownFields(doc);
  const out = new Map<string, string>();
  const lists: [UnitSource, JsonObject[]][] = [
    ['dialog', objectsOf(doc.dialog)],
    ['analysis', objectsOf(doc.analysis)],
    ['attachment', objectsOf(doc.attachments)],
  ];
  for (const [source, items] of lists) {
    for (let i = 0; i < items.length; i++) {
      const o = items[i];
      if (typeof o.body !== 'string' || !isEmailMediatype(mediatypeOf(o))) continue;
      if (source === 'dialog' && o.type !== 'text') continue;
      out.set(`${source}/${i}`, await emailText(isBase64(o.encoding) ? decodeBase64Text(o.body) : o.body));
    }
  }
  return out;
}

function textOfBody(body: unknown, encoding: unknown, mediatype: string | null): string {
  if (isBase64(encoding)) {
    // Encoded text is indexed as its decoded text; anything else (audio, images) never is.
    const mt = (mediatype ?? '').toLowerCase();
    const texty = mt.startsWith('text/') || mt.startsWith('multipart/') || mt.includes('json');
    return texty && typeof body === 'string' ? textOfBody(decodeBase64Text(body), 'none', mediatype) : '';
  }
  if (typeof body !== 'string') return encoding === 'json' ? jsonText(body) : '';
  if (encoding === 'json') {
    try {
      return jsonText(JSON.parse(body));
    } catch {
      return body;
    }
  }
  const mt = (mediatype ?? '').toLowerCase();
  if (mt && !mt.startsWith('text/') && !mt.startsWith('multipart/') && !mt.includes('json')) return '';
  if (mt.startsWith('multipart/') || /^--\S+\r?\nContent-Type:/im.test(body)) return stripMime(body, mediatype);
  if (mt.includes('json')) {
    try {
      return jsonText(JSON.parse(body));
    } catch {
      return body;
    }
  }
  // A long unbroken run of base64 characters is a payload sent without encoding, not text.
  if (body.length > 200 && /^[A-Za-z0-9+/=_-]+$/.test(body.slice(0, 4000))) return '';
  return body;
}

const clip = (s: string) => noNul(s.length > MAX_UNIT_CHARS ? s.slice(0, MAX_UNIT_CHARS) : s).trim();

/**
 * The searchable texts of a vCon, each with its source and index. Audio and binary payloads never
 * appear; emails appear as `decoded` holds them (decodeBodies), else not at all.
 */
export function extractUnits(doc: JsonObject, decoded: DecodedBodies = new Map()): SearchUnit[] {
  doc = ownFields(doc);
  const units: SearchUnit[] = [];
  const push = (source: UnitSource, idx: number, text: string) => {
    const body = clip(text);
    if (body) units.push({ source, idx, body });
  };
  if (typeof doc.subject === 'string') push('subject', 0, doc.subject);
  objectsOf(doc.parties).forEach((p, i) => push('party', i, [textField(p.name), textField(p.mailto), textField(p.tel)].filter(Boolean).join(' ')));
  const text = (source: UnitSource, i: number, o: JsonObject) =>
    isEmailMediatype(mediatypeOf(o)) ? (decoded.get(`${source}/${i}`) ?? '') : textOfBody(o.body, o.encoding, mediatypeOf(o));
  objectsOf(doc.dialog).forEach((d, i) => {
    if (d.type !== 'text') return;
    push('dialog', i, text('dialog', i, d));
  });
  // An analysis object or array body is JSON whatever its encoding says, as validation reads it
  // (lenient groups store producers' transcript objects sent with encoding "none").
  objectsOf(doc.analysis).forEach((a, i) =>
    push('analysis', i, typeof a.body === 'object' && a.body !== null ? jsonText(a.body) : text('analysis', i, a)),
  );
  objectsOf(doc.attachments).forEach((a, i) => {
    if (isTagsAttachment(a)) return;
    push('attachment', i, text('attachment', i, a));
  });
  return units;
}
