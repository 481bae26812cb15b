// Queries that are identifiers: a phone number, an e-mail address, a uuid, an order or ticket
// number. Such a query names the vCons that hold it; no word of it means anything to an embedding
// and its digits match nothing in a tsvector unless written the same way, so every search route
// looks it up exactly first (parties' tel and mailto, the vCon uuid, the text's tokens).

export type IdentifierKind = 'phone' | 'email' | 'uuid' | 'reference';

export interface Identifier {
  kind: IdentifierKind;
  /** The query as typed, trimmed, without a tel:, mailto: or urn:uuid: prefix. */
  text: string;
  /** Phone numbers: the digits without leading zeros (a trunk prefix such as 0 or 00 is not part of the number). */
  digits?: string;
}

/** Fewest digits of a phone number: shorter runs of digits are years, amounts, codes. */
export const MIN_PHONE_DIGITS = 7;
/** Most digits of a phone number (E.164 allows 15; a little more for an extension's notation). */
const MAX_PHONE_DIGITS = 16;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EMAIL = /^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/;
/** Digits with the separators of the usual notations: +1 (234) 567-8901, 234.567.8901, 0049 30 1234567. */
const PHONE = /^\+?[\d\s().\-/]+$/;
/** One token of letters and digits with at least one digit: ORD-12345, #48213, INV/2024/001, AADSTS50105. */
const REFERENCE = /^#?(?=[^\s]*\d)[\p{L}\p{N}]+(?:[-_/.:][\p{L}\p{N}]+)*$/u;

/** The identifier a query is, or null when it is words. */
export function detectIdentifier(query: string): Identifier | null {
  const q = query.trim();
  const bare = q.replace(/^(?:tel:|mailto:|urn:uuid:)/i, '');
  if (UUID.test(bare)) return { kind: 'uuid', text: bare.toLowerCase() };
  if (EMAIL.test(bare)) return { kind: 'email', text: bare.toLowerCase() };
  if (PHONE.test(bare)) {
    const all = bare.replace(/\D/g, '');
    // A lone run of digits without + or separators is a phone number only when long enough; with
    // them, a short one is a reference (#48213 is handled below, 2024-11 is a date, not a number).
    if (all.length >= MIN_PHONE_DIGITS && all.length <= MAX_PHONE_DIGITS) return { kind: 'phone', text: bare, digits: all.replace(/^0+/, '') };
  }
  if (bare.length >= 3 && REFERENCE.test(bare)) return { kind: 'reference', text: bare.replace(/^#/, '') };
  return null;
}
