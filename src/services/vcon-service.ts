import { randomUUID } from 'node:crypto';
import { AppError, NotFoundError, ValidationError } from '../domain/errors.js';
import { deriveRows, isTagsAttachment } from '../domain/derive.js';
import { parseBatch, parseBody, parseListQuery, VconPatch, type ListQuery } from '../domain/params.js';
import type { BatchItem, BatchResult } from '../domain/responses.js';
import {
  checkDepth,
  classifyVcon,
  DEFAULT_MAX_ELEMENTS,
  MAX_DEPTH,
  setMember,
  validate,
  validateItem,
  withWarnings,
  vconSchemas,
  type ClassifiedVcon,
  type JsonObject,
  type ValidationMode,
  type ValidationWarning,
} from '../domain/vcon.js';
import { runHook, type Plugin } from '../plugins/hooks.js';
import type { RequestCtx } from './context.js';
import { stageSync } from '../stages.js';
import type { ListRow, StoredVcon, VconRecord, VconRepo } from '../db/vcon-repo.js';
import type { IndexNotifier } from '../search.js';
import type { ChangeMark } from '../domain/changes.js';

export type Transact = <T>(fn: (repo: VconRepo) => Promise<T>) => Promise<T>;

/** Where the service says what a validation mode tolerated (pino's shape). */
interface VconLog {
  warn(obj: object, msg: string): void;
}

export interface VconServiceDeps {
  repo: VconRepo;
  transact: Transact;
  plugins: readonly Plugin[];
  /** Search indexing of written vCons (queued in the write's transaction, indexed after it). */
  index?: IndexNotifier;
  now?: () => Date;
  /** VCON_MAX_ELEMENTS: the JSON values one vCon may hold, as created and after every change. */
  maxElements?: number;
  /** What the group accepts (VCON_VALIDATION); strict unless given. */
  validation?: ValidationMode;
  log?: VconLog;
}

/** Options of a write: `waitFor: 'search'` answers only once the written vCons are searchable. */
export interface WriteOptions {
  waitFor?: 'search';
}

export type SubResource = 'dialog' | 'analysis' | 'attachments';

/** vCons per insert statement of a batch: bounds one statement's parameters and PostgreSQL's work per round trip. */
export const INSERT_CHUNK = 32;

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Puts the service-set fields in, keeping the caller's key order for everything else. */
function withServiceFields(doc: JsonObject, uuid: string, createdAt: string | undefined, updatedAt: string | undefined): JsonObject {
  const out: JsonObject = Object.hasOwn(doc, 'uuid') ? {} : { uuid };
  for (const [k, v] of Object.entries(doc)) setMember(out, k, v);
  if (typeof out.uuid === 'string') out.uuid = uuid;
  if (createdAt && !Object.hasOwn(doc, 'created_at')) out.created_at = createdAt;
  if (updatedAt) out.updated_at = updatedAt;
  return out;
}

/** The creation time a replacement keeps: the stored document's own, else the stored column's. */
function createdAtOf(record: VconRecord): string {
  const own = record.doc.created_at;
  return typeof own === 'string' ? own : record.created_at.toISOString();
}

function toStored(c: ClassifiedVcon, uuid: string, now: Date): StoredVcon {
  return { uuid, kind: c.kind, doc: c.doc, derived: stageSync('derive: rows', () => deriveRows(c.doc, c.kind, now)) };
}

/** Metadata view: every top-level field except the three arrays of content. */
function metadataOf(doc: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(doc)) if (k !== 'dialog' && k !== 'analysis' && k !== 'attachments') setMember(out, k, v);
  return out;
}

/** The list item of `format=metadata`. */
export function listMetadata(r: ListRow): JsonObject {
  return {
    uuid: r.uuid,
    subject: r.subject,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at ? r.updated_at.toISOString() : null,
    parties_count: r.parties_count,
    dialog_count: r.dialog_count,
    analysis_count: r.analysis_count,
    attachments_count: r.attachments_count,
  };
}

/** Create, read, list, update, delete and append: the vCon use cases both transports call. */
export function createVconService(deps: VconServiceDeps) {
  const { repo, transact, plugins } = deps;
  const now = deps.now ?? (() => new Date());
  const maxElements = deps.maxElements ?? DEFAULT_MAX_ELEMENTS;
  const mode = deps.validation ?? 'strict';
  /** Documents per export page, and the text a page may hold once its first document is in. */
  const EXPORT_PAGE = 200;
  const EXPORT_PAGE_BYTES = 4 * 1024 * 1024;
  const hasReadHooks = plugins.some((p) => p.hooks?.beforeRead || p.hooks?.afterRead);
  const hasCreateHooks = plugins.some((p) => p.hooks?.beforeCreate);

  /** After a write committed: the indexer starts on it now; wait_for=search waits for it (bounded). */
  async function written(uuids: string[], opts: WriteOptions | undefined): Promise<void> {
    if (!deps.index || uuids.length === 0) return;
    deps.index.written(uuids);
    if (opts?.waitFor === 'search') await deps.index.awaitIndexed(uuids);
  }

  /** Logs what the validation mode tolerated in a document that is being written. */
  function tolerated(uuid: string | undefined, warnings: ValidationWarning[], ctx: RequestCtx): void {
    if (warnings.length > 0) deps.log?.warn({ uuid, mode, warnings, requestId: ctx.requestId }, 'vcon accepted with validation warnings');
  }

  /** Validation plus beforeCreate (which may transform; the result is validated again). */
  async function prepareCreate(input: unknown, ctx: RequestCtx): Promise<ClassifiedVcon> {
    const first = stageSync('validate', () => classifyVcon(input, maxElements, mode));
    const transformed = await runHook(plugins, 'beforeCreate', first.doc, ctx);
    const c = transformed === first.doc ? first : classifyVcon(transformed, maxElements, mode);
    tolerated(c.uuid, c.warnings, ctx);
    return c;
  }

  /** beforeRead, load, afterRead: every read of a document passes here. */
  async function readDoc(uuid: string, ctx: RequestCtx): Promise<{ record: VconRecord; doc: JsonObject }> {
    const target = (await runHook(plugins, 'beforeRead', uuid, ctx)) ?? uuid;
    const record = await repo.get(target);
    if (!record) throw new NotFoundError('vcon', target);
    const doc = await runHook(plugins, 'afterRead', record.doc, ctx);
    return { record, doc };
  }

  /**
   * Locks a vCon, applies a change to its document and stores it with fresh derived rows, in one
   * transaction: concurrent modifications of one vCon serialise and none is lost. The change is
   * logged as `mark` says, in the same transaction.
   */
  async function modify<T>(
    uuid: string,
    mark: ChangeMark,
    change: (doc: JsonObject, record: VconRecord) => { doc: JsonObject; result: T },
    opts?: WriteOptions,
  ): Promise<{ doc: JsonObject; result: T }> {
    const out = await transact(async (tx) => {
      const record = await tx.lock(uuid);
      if (!record) throw new NotFoundError('vcon', uuid);
      if (record.kind !== 'plain') {
        throw new ValidationError(`vCon ${uuid} is ${record.kind} and stored opaque: it can't be modified, only replaced`);
      }
      const { doc, result } = change(structuredClone(record.doc), record);
      doc.updated_at = now().toISOString();
      const classified = classifyVcon(doc, maxElements, mode);
      await tx.upsert([toStored(classified, uuid, record.created_at)], mark);
      return { doc, result };
    });
    await written([uuid], opts);
    return out;
  }

  return {
    /** Creates a vCon, or replaces it when its uuid exists (created: false). */
    async create(
      input: unknown,
      ctx: RequestCtx,
      opts?: WriteOptions,
    ): Promise<{ uuid: string; created: boolean; vcon: JsonObject; warnings: ValidationWarning[] }> {
      const c = await prepareCreate(input, ctx);
      const uuid = c.uuid ?? randomUUID();
      const stamp = now();
      // A new uuid (the common case) is one statement, no transaction: one round trip.
      const fresh = c.kind === 'plain' ? withServiceFields(c.doc, uuid, stamp.toISOString(), undefined) : c.doc;
      if ((await repo.insertNew([toStored({ ...c, doc: fresh }, uuid, stamp)], ctx.keyId)).size === 1) {
        await written([uuid], opts);
        return { uuid, created: true, vcon: await runHook(plugins, 'afterCreate', fresh, ctx), warnings: c.warnings };
      }
      // The uuid exists: replace it under its row lock.
      const { created, doc } = await transact(async (tx) => {
        const existed = await tx.lock(uuid);
        // A replacement without created_at keeps the stored one: a vCon's creation does not move.
        const createdAt = existed ? createdAtOf(existed) : stamp.toISOString();
        const doc = c.kind === 'plain' ? withServiceFields(c.doc, uuid, createdAt, existed ? stamp.toISOString() : undefined) : c.doc;
        const stored = toStored({ ...c, doc }, uuid, existed?.created_at ?? stamp);
        const flags = await tx.upsert([stored], { kind: 'updated', keyId: ctx.keyId });
        return { created: flags.get(uuid) ?? !existed, doc };
      });
      await written([uuid], opts);
      const after = await runHook(plugins, 'afterCreate', doc, ctx);
      return { uuid, created, vcon: after, warnings: c.warnings };
    },

    /**
     * Stores up to 100 independent vCons: valid items are written together in one transaction, in
     * input order: an item repeating an earlier item's uuid replaces it, as a second request would.
     */
    async batch(input: unknown, ctx: RequestCtx, opts?: WriteOptions): Promise<BatchResult> {
      const items = parseBatch(input);
      const results: BatchItem[] = [];
      const seen = new Set<string>();
      const stamp = now();
      const at = stamp.toISOString();
      type Ready = { index: number; c: ClassifiedVcon; uuid: string };
      // Items whose uuid an earlier valid item has: written after every other one, the last of each uuid winning.
      const repeats: Ready[] = [];
      let next = 0;
      /** Validates items from the next one on until `count` more are ready to store, or none is left. */
      const prepareNext = async (count: number): Promise<Ready[]> => {
        const out: Ready[] = [];
        for (; next < items.length && out.length < count; next++) {
          const index = next;
          try {
            const c = await prepareCreate(items[index], ctx);
            const uuid = c.uuid ?? randomUUID();
            results[index] = { index, uuid, status: 201, ...withWarnings(c.warnings) };
            if (seen.has(uuid)) repeats.push({ index, c, uuid });
            else {
              seen.add(uuid);
              out.push({ index, c, uuid });
            }
          } catch (err) {
            if (!(err instanceof AppError)) throw err;
            const item = items[index];
            const uuid = isObject(item) && typeof item.uuid === 'string' ? item.uuid : null;
            results[index] = { index, uuid, status: 400, error: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) };
          }
        }
        return out;
      };
      /** createdAt: a replaced vCon's stored creation time, which an item without created_at keeps. */
      const storedOf = (r: Ready, replacing: boolean, createdAt = at) =>
        toStored(
          { ...r.c, doc: r.c.kind === 'plain' ? withServiceFields(r.c.doc, r.uuid, createdAt, replacing ? at : undefined) : r.c.doc },
          r.uuid,
          stamp,
        );
      // Without beforeCreate hooks, items after the first chunk are validated while PostgreSQL
      // inserts the chunks before them; a hook (which may wait on anything) runs before the
      // transaction takes a connection.
      const pending = await prepareNext(hasCreateHooks ? items.length : INSERT_CHUNK);
      const takeChunk = () => (pending.length > 0 ? pending.splice(0, INSERT_CHUNK) : prepareNext(INSERT_CHUNK));
      if (pending.length > 0) {
        const ready: Ready[] = [];
        const docs = await transact(async (tx) => {
          // New uuids (the common case): documents, derived rows and queue rows, one statement per
          // chunk of items, each sent before the next chunk is validated and built (postgres.js
          // pipelines them on the transaction's connection), so PostgreSQL inserts a chunk while
          // this process prepares the next. Those that exist already are replaced after them.
          const fresh: StoredVcon[] = [];
          const sent: Promise<Set<string>>[] = [];
          for (let chunk = await takeChunk(); chunk.length > 0; chunk = await takeChunk()) {
            ready.push(...chunk);
            const stored = chunk.map((r) => storedOf(r, false));
            fresh.push(...stored);
            const insert = tx.insertNew(stored, ctx.keyId);
            // Awaited below; a failure fails the transaction. Handled now so that it is not reported
            // unhandled while the next chunk is prepared.
            insert.catch(() => undefined);
            sent.push(insert);
            // The driver writes the statement on a later tick: let it, before preparing the next.
            if (pending.length > 0 || next < items.length) await new Promise((r) => setImmediate(r));
          }
          const inserted = new Set((await Promise.all(sent)).flatMap((s) => [...s]));
          const rest = ready.filter((r) => !inserted.has(r.uuid));
          const kept = await tx.lockCreatedAt(rest.map((r) => r.uuid));
          const replaced = new Map(rest.map((r) => [r.uuid, storedOf(r, true, kept.get(r.uuid))]));
          const flags = await tx.upsert([...replaced.values()], { kind: 'updated', keyId: ctx.keyId });
          for (const r of ready) results[r.index].status = inserted.has(r.uuid) || flags.get(r.uuid) === true ? 201 : 200;
          const docs = fresh.map((s) => replaced.get(s.uuid)?.doc ?? s.doc);
          // Repeats replace what was written above. Only the last of each uuid is written (the
          // others would be overwritten unseen in this transaction), so one upsert of distinct
          // uuids: 100 repeats of one uuid one by one held the transaction ~15 times as long.
          const last = new Map(repeats.map((r) => [r.uuid, r]));
          // Read after the writes above, as a second request would see them.
          const keptByRepeats = await tx.lockCreatedAt([...last.keys()]);
          const stored = [...last.values()].map((r) => storedOf(r, true, keptByRepeats.get(r.uuid)));
          await tx.upsert(stored, { kind: 'updated', keyId: ctx.keyId });
          for (const r of repeats) results[r.index].status = 200;
          docs.push(...stored.map((x) => x.doc));
          return docs;
        });
        await written([...seen], opts);
        for (const doc of docs) await runHook(plugins, 'afterCreate', doc, ctx);
      }
      const created = results.filter((r) => r.status === 201).length;
      const updated = results.filter((r) => r.status === 200).length;
      const failed = results.filter((r) => r.status === 400).length;
      return { success: failed === 0, total: items.length, created, updated, failed, results };
    },

    /**
     * One page of the group's export (GET /vcons/export): documents after `after` in uuid order, as
     * JSON text exactly as stored, or through the plugins' afterRead hooks when there are any.
     */
    async exportPage(after: string | undefined, ctx: RequestCtx): Promise<{ uuid: string; text: string }[]> {
      const rows = await repo.exportPage(after, EXPORT_PAGE, EXPORT_PAGE_BYTES);
      if (!hasReadHooks) return rows.map((r) => ({ uuid: r.uuid, text: r.doc }));
      const out: { uuid: string; text: string }[] = [];
      for (const r of rows)
        out.push({ uuid: r.uuid, text: JSON.stringify(await runHook(plugins, 'afterRead', JSON.parse(r.doc) as JsonObject, ctx)) });
      return out;
    },

    /**
     * The whole document as the bytes of its stored JSON text, when no plugin has a read hook to
     * run (otherwise undefined: the caller goes through get). Saves a parse and a re-serialisation
     * per read.
     */
    async getStored(uuid: string): Promise<Buffer | undefined> {
      if (hasReadHooks) return undefined;
      const bytes = await repo.getBytes(uuid);
      if (bytes === undefined) throw new NotFoundError('vcon', uuid);
      return bytes;
    },

    /** One vCon; `summary` = metadata plus summary analyses, `metadata` = no content arrays. */
    async get(uuid: string, format: 'full' | 'summary' | 'metadata', ctx: RequestCtx): Promise<JsonObject> {
      const { doc } = await readDoc(uuid, ctx);
      if (format === 'full') return doc;
      const meta = metadataOf(doc);
      if (format === 'summary') {
        meta.analysis = (Array.isArray(doc.analysis) ? doc.analysis : []).filter((a) => isObject(a) && a.type === 'summary');
      }
      return meta;
    },

    /** A page of vCons, newest first (or by latest tag change with `tags`). */
    async list(raw: unknown, ctx: RequestCtx) {
      const parsed = parseListQuery(raw);
      const criteria = await runHook(plugins, 'beforeSearch', { kind: 'list', query: parsed as unknown as Record<string, unknown> }, ctx);
      const q = criteria.query as unknown as ListQuery;
      const rows = await repo.list(q, { withDoc: q.format === 'full' });
      const has_more = rows.length > q.limit;
      const page = rows.slice(0, q.limit);
      let data: unknown[];
      if (q.format === 'ids_only') data = page.map((r) => r.uuid);
      else if (q.format === 'full') data = await Promise.all(page.map((r) => runHook(plugins, 'afterRead', r.doc as JsonObject, ctx)));
      else data = page.map(listMetadata);
      data = await runHook(plugins, 'afterSearch', data, { ...ctx, criteria });
      return { data, pagination: { limit: q.limit, offset: q.offset, has_more } };
    },

    /** PATCH of subject, extensions, critical (legacy must_support is stored as critical). */
    async update(uuid: string, body: unknown, ctx: RequestCtx, opts?: WriteOptions): Promise<JsonObject> {
      const patch = parseBody(VconPatch, body);
      const changes = await runHook(plugins, 'beforeUpdate', patch, { ...ctx, uuid });
      const { doc } = await modify(
        uuid,
        { kind: 'updated', keyId: ctx.keyId },
        (doc) => {
          for (const [k, v] of Object.entries(changes)) {
            if (k === 'must_support') {
              doc.critical = v;
              delete doc.must_support;
            } else {
              doc[k] = v;
            }
          }
          validate(vconSchemas(mode).Vcon, doc, 'update');
          return { doc, result: undefined };
        },
        opts,
      );
      await runHook(plugins, 'afterUpdate', doc, ctx);
      return runHook(plugins, 'afterRead', doc, ctx);
    },

    async remove(uuid: string, ctx: RequestCtx): Promise<{ uuid: string; deleted: true }> {
      const target = (await runHook(plugins, 'beforeDelete', uuid, ctx)) ?? uuid;
      const deleted = await repo.remove(target, ctx.keyId);
      if (!deleted) throw new NotFoundError('vcon', target);
      await runHook(plugins, 'afterDelete', target, ctx);
      return { uuid: target, deleted: true };
    },

    /** Appends a dialog, analysis or attachment atomically; the index is the real one. */
    async append(
      uuid: string,
      kind: SubResource,
      item: unknown,
      ctx: RequestCtx,
    ): Promise<{ uuid: string; index: number; item: JsonObject; warnings: ValidationWarning[] }> {
      const what = kind === 'attachments' ? 'attachment' : kind;
      if (!isObject(item))
        throw new ValidationError(`Invalid ${what}: the body must be a JSON object`, [{ path: '(root)', message: 'must be an object' }]);
      checkDepth(item, MAX_DEPTH - 2);
      const warnings = validateItem(what, item, mode, what);
      tolerated(uuid, warnings, ctx);
      const changes = await runHook(plugins, 'beforeUpdate', { [kind]: item } as JsonObject, { ...ctx, uuid });
      const toAdd = isObject(changes[kind]) ? (changes[kind] as JsonObject) : item;
      const { doc, result: index } = await modify(uuid, { kind: 'appended', keyId: ctx.keyId }, (doc) => {
        const list = Array.isArray(doc[kind]) ? (doc[kind] as unknown[]) : [];
        list.push(toAdd);
        doc[kind] = list;
        const index = list.length - 1;
        // Index references are checked against the whole document; report them at the item's own path.
        const r = vconSchemas(mode).Vcon.safeParse(doc);
        if (!r.success) {
          const details = r.error.issues
            .filter((i) => i.path[0] === kind && i.path[1] === index)
            .map((i) => ({ path: i.path.slice(2).join('.') || '(root)', message: i.message }));
          throw new ValidationError(`Invalid ${what}: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`, details);
        }
        return { doc, result: index };
      });
      await runHook(plugins, 'afterUpdate', doc, ctx);
      return { uuid, index, item: toAdd, warnings };
    },

    /** Analyses of a vCon, optionally of one type (read through the read hooks). */
    async getAnalysis(uuid: string, type: string | undefined, ctx: RequestCtx): Promise<JsonObject[]> {
      const { doc } = await readDoc(uuid, ctx);
      const list = (Array.isArray(doc.analysis) ? doc.analysis : []).filter(isObject);
      return type === undefined ? list : list.filter((a) => a.type === type);
    },

    /** Attachments, by `purpose` (legacy `type` when no purpose) and/or legacy `type`. */
    async getAttachments(uuid: string, filter: { purpose?: string; type?: string }, ctx: RequestCtx): Promise<JsonObject[]> {
      const { doc } = await readDoc(uuid, ctx);
      const list = (Array.isArray(doc.attachments) ? doc.attachments : []).filter(isObject);
      return list.filter((a) => {
        if (filter.purpose !== undefined) {
          const ok =
            filter.purpose === 'tags' ? isTagsAttachment(a) : a.purpose === filter.purpose || (a.purpose === undefined && a.type === filter.purpose);
          if (!ok) return false;
        }
        if (filter.type !== undefined) {
          const ok = filter.type === 'tags' ? isTagsAttachment(a) : a.type === filter.type;
          if (!ok) return false;
        }
        return true;
      });
    },

    /** Locks, changes and stores a document (used by the tag service). */
    modify,
    readDoc,
  };
}

export type VconService = ReturnType<typeof createVconService>;
