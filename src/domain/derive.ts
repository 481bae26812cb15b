// Pure extraction of the derived rows of a stored vCon (docs/architecture.md "Storage model"): what
// lists, filters, discovery, tags and analytics read instead of scanning documents. The search
// units the indexer reads are extracted in src/search/units.ts.
import type { JsonObject, VconKind } from './vcon.js';
import { readDocumentDate } from './dates.js';

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

// PostgreSQL text can't hold NUL or lone surrogates. Validation refuses both (domain/text.ts); the
// derived copies still drop NUL and turn lone surrogates into U+FFFD, for documents stored before.
export const noNul = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '') : s).toWellFormed();
/** A string field as derived rows store it, else null. */
export const textField = (v: unknown): string | null => (typeof v === 'string' ? noNul(v) : null);
/** Classification values (types, purposes, vendors) are indexed: keep them short enough for a btree. */
export const MAX_LABEL_CHARS = 200;
const label = (v: unknown): string | null => {
  const s = textField(v);
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
export const ownFields = (o: JsonObject): JsonObject => (Object.getPrototypeOf(o) === Object.prototype ? o : { ...o });
/** An array field's objects (anything else in it reads as an empty object). */
export const objectsOf = (v: unknown): JsonObject[] =>
  Array.isArray(v) ? v.map((x) => (x && typeof x === 'object' && !Array.isArray(x) ? ownFields(x as JsonObject) : {})) : [];
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
  doc = ownFields(doc);
  const map = new Map<string, string>();
  for (const a of objectsOf(doc.attachments)) {
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
  doc = ownFields(doc);
  const parties = objectsOf(doc.parties);
  const dialogs = objectsOf(doc.dialog);
  const analyses = objectsOf(doc.analysis);
  const attachments = objectsOf(doc.attachments);
  return {
    subject: textField(doc.subject),
    created_at: date(doc.created_at) ?? fallbackCreatedAt,
    updated_at: date(doc.updated_at),
    counts: { parties: parties.length, dialog: dialogs.length, analysis: analyses.length, attachments: attachments.length },
    parties: parties.map((p, idx) => ({
      idx,
      name: textField(p.name),
      tel: textField(p.tel),
      mailto: textField(p.mailto),
      party_uuid: textField(p.uuid),
    })),
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
