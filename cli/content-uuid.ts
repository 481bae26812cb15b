// Import identity: a vCon file without a uuid gets one derived from its content, so importing the
// same file again replaces it instead of storing a copy.
import { createHash } from 'node:crypto';

/** The namespace of vcon-launch's content-derived uuids (a fixed random uuid; never change it). */
const NAMESPACE = '3f0c6a52-9d8e-4b6f-a1c4-7e2d5b9f0a13';

/** JSON with object keys sorted at every level and no whitespace: one text per value, whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** RFC 9562 name-based uuid (version 5, SHA-1) of a name in a namespace. */
export function uuidV5(name: string, namespace = NAMESPACE): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The uuid of a vCon that has none: the name-based uuid of its canonical JSON. */
export const contentUuid = (vcon: unknown): string => uuidV5(canonicalJson(vcon));
