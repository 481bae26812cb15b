// The change log's vocabulary (docs/api.md "Changes"): what a log entry says and how a reader asks for it.
import { z } from 'zod';
import { AppError } from './errors.js';

/**
 * What happened to a vCon: created (a new uuid), updated (replaced, or PATCH), appended (a dialog,
 * analysis or attachment added), tags_changed (a tag set or removed), deleted.
 */
export const CHANGE_KINDS = ['created', 'updated', 'appended', 'tags_changed', 'deleted'] as const;
export const ChangeKind = z.enum(CHANGE_KINDS);
export type ChangeKind = z.infer<typeof ChangeKind>;

/** Who made a write and what it was: logged with the write, in its statement. */
export interface ChangeMark {
  kind: ChangeKind;
  /** The API key's id (a digest prefix), never the key; null when auth is off. */
  keyId: string | null;
}

/** One entry of the log as the REST page and the stream show it. Cursors are decimal strings. */
export interface ChangeEntry {
  cursor: string;
  uuid: string;
  kind: ChangeKind;
  time: string;
  key_id: string | null;
}

/** 410: entries after the reader's cursor were pruned (the log keeps CHANGES_RETENTION_HOURS). */
export class CursorExpiredError extends AppError {
  constructor(after: bigint, oldest: string | null, prunedThrough: bigint) {
    const held = oldest === null ? `no entry is held; resume with after=${prunedThrough}` : `the oldest cursor still held is ${oldest}`;
    super(410, 'cursor_expired', `cursor ${after} has expired: entries up to ${prunedThrough} were pruned; ${held}`, [
      { path: 'after', message: `older than the log keeps; ${held}` },
    ]);
  }
}
