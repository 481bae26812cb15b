import { z } from 'zod';
import { NotFoundError } from '../domain/errors.js';
import { isTagsAttachment, readTags } from '../domain/derive.js';
import { parseBody, parseParams, TagKey, TagPut, TagSearchQuery } from '../domain/params.js';
import type { JsonObject } from '../domain/vcon.js';
import { runHook, type Plugin } from '../plugins/hooks.js';
import type { RequestCtx } from './context.js';
import type { VconService } from './vcon-service.js';

export interface TagReadRepo {
  unique(): Promise<{ total_vcons_with_tags: number; keys: { key: string; vcon_count: number; values: { value: string; count: number }[] }[] }>;
  search(tags: Record<string, string>, limit: number, offset: number): Promise<string[]>;
}

/**
 * Rewrites a document's tags as one attachment {purpose: tags, encoding: json, body: ["k:v"]};
 * with no tags left there is no tags attachment at all (attachments_count counts real ones).
 */
function writeTags(doc: JsonObject, tags: Map<string, string>): void {
  const attachments = (Array.isArray(doc.attachments) ? doc.attachments : []) as JsonObject[];
  const body = [...tags].map(([k, v]) => `${k}:${v}`);
  const first = attachments.findIndex((a) => a && typeof a === 'object' && isTagsAttachment(a));
  if (tags.size === 0) {
    if (first === -1) return;
    doc.attachments = attachments.filter((a) => !(a && typeof a === 'object' && isTagsAttachment(a)));
    return;
  }
  if (first === -1) {
    attachments.push({ purpose: 'tags', encoding: 'json', body });
  } else {
    // Fold every tags attachment into the first (keeping its other fields) so there is one truth.
    const keep = attachments[first];
    keep.purpose = 'tags';
    keep.encoding = 'json';
    keep.body = body;
    for (let i = attachments.length - 1; i > first; i--) if (isTagsAttachment(attachments[i])) attachments.splice(i, 1);
  }
  doc.attachments = attachments;
}

const KeyArgs = z.object({ key: TagKey });
/** A tag key (REST: a path segment); 400 invalid_parameter naming `key`. */
const checkKey = (key: unknown): string => parseParams(KeyArgs, { key }).key;

/** Tags in the vCon's tags attachment; the derived tag table is rewritten in the same transaction. */
export function createTagService(deps: { vcons: VconService; repo: TagReadRepo; plugins: readonly Plugin[] }) {
  const { vcons, repo, plugins } = deps;

  async function change(uuid: string, ctx: RequestCtx, changes: JsonObject, apply: (tags: Map<string, string>) => void) {
    const final = await runHook(plugins, 'beforeUpdate', changes, { ...ctx, uuid });
    const { doc } = await vcons.modify(uuid, { kind: 'tags_changed', keyId: ctx.keyId }, (doc) => {
      const tags = new Map(readTags(doc).map((t) => [t.key, t.value]));
      apply(tags);
      writeTags(doc, tags);
      return { doc, result: undefined };
    });
    await runHook(plugins, 'afterUpdate', doc, ctx);
    return final;
  }

  return {
    async get(uuid: string, ctx: RequestCtx): Promise<Record<string, string>> {
      const { doc } = await vcons.readDoc(uuid, ctx);
      return Object.fromEntries(readTags(doc).map((t) => [t.key, t.value]));
    },

    async getOne(uuid: string, key: string, ctx: RequestCtx): Promise<string> {
      const tags = await this.get(uuid, ctx);
      if (!Object.hasOwn(tags, key)) throw new NotFoundError('tag', `${key} on vCon ${uuid}`);
      return tags[key];
    },

    /** Sets one tag; the value is checked as the `value` of REST's PUT body. */
    async set(uuid: string, key: string, value: unknown, ctx: RequestCtx): Promise<{ key: string; value: string }> {
      checkKey(key);
      const v = String(parseBody(TagPut, { value }).value);
      await change(uuid, ctx, { tags: { set: { [key]: v } } }, (tags) => {
        tags.delete(key); // re-set moves the key last
        tags.set(key, v);
      });
      return { key, value: v };
    },

    async remove(uuid: string, key: string, ctx: RequestCtx): Promise<void> {
      checkKey(key);
      await change(uuid, ctx, { tags: { remove: [key] } }, (tags) => {
        tags.delete(key);
      });
    },

    async removeAll(uuid: string, ctx: RequestCtx): Promise<void> {
      await change(uuid, ctx, { tags: { remove_all: true } }, (tags) => tags.clear());
    },

    async unique(ctx: RequestCtx) {
      await runHook(plugins, 'beforeSearch', { kind: 'tags', query: { unique: true } }, ctx);
      return repo.unique();
    },

    /** vCons having every given tag, newest tag change first. */
    async search(raw: unknown, ctx: RequestCtx) {
      const { tags, limit, offset } = parseParams(TagSearchQuery, raw);
      const criteria = await runHook(plugins, 'beforeSearch', { kind: 'tags', query: { tags, limit, offset } }, ctx);
      const q = criteria.query as { tags: Record<string, string>; limit: number; offset: number };
      const rows = await repo.search(q.tags, q.limit + 1, q.offset);
      const uuids = await runHook(plugins, 'afterSearch', rows.slice(0, q.limit), { ...ctx, criteria });
      return { count: uuids.length, uuids, pagination: { limit: q.limit, offset: q.offset, has_more: rows.length > q.limit } };
    },
  };
}

export type TagService = ReturnType<typeof createTagService>;
