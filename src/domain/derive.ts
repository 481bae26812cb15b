// Pure extraction of the derived rows of a stored vCon (docs/architecture.md "Storage model"): what
// lists, filters, discovery, tags, analytics and search read instead of scanning documents.
import type { JsonObject, VconKind } from './vcon.js';
import { readDocumentDate } from './dates.js';
import { decodeBase64Text, emailText, isEmailMediatype } from './email.js';

export interface PartyRow {
  idx: number;
  name: string | null;
  tel: string | null;
  mailto: string | null;
  party_uuid: string | null;
}
/** The facts analytics reads of a vCon's dialogs, one array per field in dialog order (one row per vCon). */
export interface DialogFacts {
  types: (string | null)[];
  durations: (number | null)[];
  mediatypes: (string | null)[];
  encodings: (string | null)[];
  body_bytes: (number | null)[];
}
export interface AnalysisRow {
  idx: number;
  type: string | null;
  vendor: string | null;
  product: string | null;
  schema: string | null;
  encoding: string | null;
  body_bytes: number | null;
}
export interface AttachmentRow {
  idx: number;
  purpose: string | null;
  type: string | null;
  encoding: string | null;
  mediatype: string | null;
  body_bytes: number | null;
}
export interface TagRow {
  key: string;
  value: string;
}
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

export interface Derived {
  subject: string | null;
  created_at: Date;
  updated_at: Date | null;
  counts: { parties: number; dialog: number; analysis: number; attachments: number };
  parties: PartyRow[];
  /** Null when the vCon has no dialog (no row). */
  dialogs: DialogFacts | null;
  analyses: AnalysisRow[];
  attachments: AttachmentRow[];
  tags: TagRow[];
}

/** Longest text we index per unit; tsvector has a 1 MB limit and snippets need only the start. */
export const MAX_UNIT_CHARS = 100_000;

// PostgreSQL text can't hold NUL or lone surrogates. Validation refuses both (domain/text.ts); the
// derived copies still drop NUL and turn lone surrogates into U+FFFD, for documents stored before.
const noNul = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '') : s).toWellFormed();
const str = (v: unknown): string | null => (typeof v === 'string' ? noNul(v) : null);
/** Classification values (types, purposes, vendors) are indexed: keep them short enough for a btree. */
export const MAX_LABEL_CHARS = 200;
const label = (v: unknown): string | null => {
  const s = str(v);
  if (s === null || s.length <= MAX_LABEL_CHARS) return s;
  // Cut between characters: half a surrogate pair is text PostgreSQL refuses (the whole write failed).
  const cut = s.slice(0, MAX_LABEL_CHARS);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
};
/** Longest tag value indexed; longer ones stay in the document but are not searchable by tag. */
export const MAX_TAG_VALUE_CHARS = 1000;
/**
 * And at most this many bytes of UTF-8: a btree entry of vcon_tags (key, value, vcon_uuid) holds at
 * most 2704 bytes, and 1000 characters of CJK are 3000 (the whole write failed, a 500). With a key
 * of 200 characters (at most 600 bytes) the entry stays under 2650.
 */
export const MAX_TAG_VALUE_BYTES = 2000;
/**
 * The object with its own fields only: derived rows must say what the stored document says, and
 * an object whose prototype was replaced (a "__proto__" member assigned somewhere) would answer
 * reads of fields it does not have from that prototype. A parsed document needs no copy.
 */
const own = (o: JsonObject): JsonObject => (Object.getPrototypeOf(o) === Object.prototype ? o : { ...o });
const arr = (v: unknown): JsonObject[] =>
  Array.isArray(v) ? v.map((x) => (x && typeof x === 'object' && !Array.isArray(x) ? own(x as JsonObject) : {})) : [];
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const bodyBytes = (v: unknown): number | null =>
  v === undefined || v === null ? null : Buffer.byteLength(typeof v === 'string' ? v : JSON.stringify(v));
const date = (v: unknown): Date | null => (typeof v === 'string' ? (readDocumentDate(v) ?? null) : null);

/** True for the tags attachment, under `purpose` or legacy `type`. */
export const isTagsAttachment = (a: JsonObject): boolean => a.purpose === 'tags' || a.type === 'tags';

/** Splits `key:value` at the first colon only: values keep their colons. */
export function splitTag(s: string): TagRow | null {
  const i = s.indexOf(':');
  if (i <= 0) return null;
  return { key: s.slice(0, i), value: s.slice(i + 1) };
}

/**
 * Reads a tags attachment body: an array of `key:value` strings, a flat object, or a JSON string
 * holding either. Anything else reads as no tags, never as a failure.
 */
export function readTagsBody(body: unknown): TagRow[] {
  let b = body;
  if (typeof b === 'string') {
    try {
      b = JSON.parse(b);
    } catch {
      return [];
    }
  }
  if (Array.isArray(b)) {
    return b.flatMap((s) => (typeof s === 'string' ? [splitTag(s)].filter((t): t is TagRow => t !== null) : []));
  }
  if (b && typeof b === 'object') {
    return Object.entries(b as JsonObject).flatMap(([key, v]) =>
      key && !key.includes(':') && (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') ? [{ key, value: String(v) }] : [],
    );
  }
  return [];
}

/** All tags of a vCon (later attachments and later entries win for a repeated key). */
export function readTags(doc: JsonObject): TagRow[] {
  doc = own(doc);
  const map = new Map<string, string>();
  for (const a of arr(doc.attachments)) {
    if (!isTagsAttachment(a)) continue;
    for (const t of readTagsBody(a.body)) map.set(t.key, t.value);
  }
  return [...map].map(([key, value]) => ({ key, value }));
}

/** The tags that go to the derived table (indexable: no NUL, bounded sizes). */
function indexedTags(doc: JsonObject): TagRow[] {
  return readTags(doc)
    .map((t) => ({ key: noNul(t.key), value: noNul(t.value) }))
    .filter(
      (t) =>
        t.key !== '' && t.key.length <= MAX_LABEL_CHARS && t.value.length <= MAX_TAG_VALUE_CHARS && Buffer.byteLength(t.value) <= MAX_TAG_VALUE_BYTES,
    );
}

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

const mediatypeOf = (o: JsonObject) => str(o.mediatype) ?? str(o.mimetype);
const isBase64 = (encoding: unknown) => encoding === 'base64url' || encoding === 'base64';

/**
 * Decodes what derivation can't do synchronously: the email bodies (message/rfc822, plain or
 * base64url) of dialogs, analyses and attachments. Call before extractUnits and pass the result.
 */
export async function decodeBodies(doc: JsonObject): Promise<DecodedBodies> {
  doc = own(doc);
  const out = new Map<string, string>();
  const lists: [UnitSource, JsonObject[]][] = [
    ['dialog', arr(doc.dialog)],
    ['analysis', arr(doc.analysis)],
    ['attachment', arr(doc.attachments)],
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
  doc = own(doc);
  const units: SearchUnit[] = [];
  const push = (source: UnitSource, idx: number, text: string) => {
    const body = clip(text);
    if (body) units.push({ source, idx, body });
  };
  if (typeof doc.subject === 'string') push('subject', 0, doc.subject);
  arr(doc.parties).forEach((p, i) => push('party', i, [str(p.name), str(p.mailto), str(p.tel)].filter(Boolean).join(' ')));
  const text = (source: UnitSource, i: number, o: JsonObject) =>
    isEmailMediatype(mediatypeOf(o)) ? (decoded.get(`${source}/${i}`) ?? '') : textOfBody(o.body, o.encoding, mediatypeOf(o));
  arr(doc.dialog).forEach((d, i) => {
    if (d.type !== 'text') return;
    push('dialog', i, text('dialog', i, d));
  });
  // An analysis object or array body is JSON whatever its encoding says, as validation reads it
  // (lenient groups store producers' transcript objects sent with encoding "none").
  arr(doc.analysis).forEach((a, i) => push('analysis', i, typeof a.body === 'object' && a.body !== null ? jsonText(a.body) : text('analysis', i, a)));
  arr(doc.attachments).forEach((a, i) => {
    if (isTagsAttachment(a)) return;
    push('attachment', i, text('attachment', i, a));
  });
  return units;
}

function dialogFacts(dialogs: JsonObject[]): DialogFacts {
  const f: DialogFacts = { types: [], durations: [], mediatypes: [], encodings: [], body_bytes: [] };
  for (const d of dialogs) {
    f.types.push(label(d.type));
    f.durations.push(num(d.duration));
    f.mediatypes.push(label(d.mediatype) ?? label(d.mimetype));
    f.encodings.push(label(d.encoding));
    f.body_bytes.push(bodyBytes(d.body));
  }
  return f;
}

/**
 * The derived rows a write stores with its document. Opaque (signed/encrypted) forms derive
 * nothing. Search units are not among them: the indexer extracts them later (extractUnits).
 */
export function deriveRows(doc: JsonObject, kind: VconKind, fallbackCreatedAt: Date): Derived {
  if (kind !== 'plain') {
    return {
      subject: null,
      created_at: fallbackCreatedAt,
      updated_at: null,
      counts: { parties: 0, dialog: 0, analysis: 0, attachments: 0 },
      parties: [],
      dialogs: null,
      analyses: [],
      attachments: [],
      tags: [],
    };
  }
  doc = own(doc);
  const parties = arr(doc.parties);
  const dialogs = arr(doc.dialog);
  const analyses = arr(doc.analysis);
  const attachments = arr(doc.attachments);
  return {
    subject: str(doc.subject),
    created_at: date(doc.created_at) ?? fallbackCreatedAt,
    updated_at: date(doc.updated_at),
    counts: { parties: parties.length, dialog: dialogs.length, analysis: analyses.length, attachments: attachments.length },
    parties: parties.map((p, idx) => ({ idx, name: str(p.name), tel: str(p.tel), mailto: str(p.mailto), party_uuid: str(p.uuid) })),
    dialogs: dialogs.length === 0 ? null : dialogFacts(dialogs),
    analyses: analyses.map((a, idx) => ({
      idx,
      type: label(a.type),
      vendor: label(a.vendor),
      product: label(a.product),
      schema: label(a.schema),
      encoding: label(a.encoding),
      body_bytes: bodyBytes(a.body),
    })),
    attachments: attachments.map((a, idx) => ({
      idx,
      purpose: label(a.purpose),
      type: label(a.type),
      encoding: label(a.encoding),
      mediatype: label(a.mediatype) ?? label(a.mimetype),
      body_bytes: bodyBytes(a.body),
    })),
    tags: indexedTags(doc),
  };
}
