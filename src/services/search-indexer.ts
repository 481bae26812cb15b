// Indexing: what of a vCon becomes searchable and how (docs/architecture.md "Search"). Writes only
// queue their vCons (src/db/index-queue-repo.ts); indexing rounds claim queued vCons, derive their
// search units from the stored documents and write the units, the ranking tsvector and the vectors,
// a batch per transaction with one embed call. Rounds run in the background worker of every
// instance, in searches (which first index what was acknowledged before them) and in writes that
// ask to wait (wait_for=search). reembedMissing re-embeds after a provider change.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeBodies, extractedOrder, extractUnits, unitsJson, type SearchUnit } from '../search/units.js';
import type { SearchIndexRepo, VconRows, VconVectors } from '../db/search-index-repo.js';
import type { ClaimFilter, IndexQueueRepo } from '../db/index-queue-repo.js';
import type { EmbeddingProvider } from '../embeddings/types.js';
import { stage } from '../stages.js';

/** Whether a search saw every vCon written before it: `pending` of them were not searchable yet. */
export interface IndexState {
  pending: number;
  complete: boolean;
}

/** The repos of one transaction. */
export interface IndexRepos {
  index: SearchIndexRepo;
  queue: IndexQueueRepo;
}

/**
 * Runs `fn` in a transaction of its own, with repos bound to it. `lossy`: the commit need not wait
 * for its WAL flush, because what a crash could lose is still queued and is indexed again.
 */
export type IndexTransact = <T>(fn: (repos: IndexRepos) => Promise<T>, opts?: { lossy?: boolean }) => Promise<T>;

/** A vCon's searchable texts. */
export interface IndexItem {
  uuid: string;
  created_at: Date;
  units: SearchUnit[];
  /** False for a vCon never indexed (no rows to replace, no stored vectors to compare); unknown counts as indexed. */
  indexed?: boolean;
  /** unitsJson(units), made once a round for search_units and the signature. */
  json?: string;
}

/** The provider's embed call failed: the keyword index is written, the vectors wait for a retry. */
class EmbedFailure extends Error {
  override name = 'EmbedFailure';
}

/** Texts a local provider embeds before the indexer lets other work run (~4 ms). */
const EMBED_SLICE = 25;

/**
 * How long a search or wait_for=search waits for the background indexer before it indexes the
 * rows it needs itself (those no running round holds).
 */
export const HELP_AFTER_MS = 100;

/** vCons per round of such a request (~15 ms of CPU with the local provider). */
const HELP_BATCH = 20;

/** A waiting request's own indexing: rounds, vCons, ms spent in them, and ms spent before its last round. */
export interface HelpStats {
  rounds: number;
  vcons: number;
  ms: number;
  msBeforeLastRound: number;
}

/** Time one request spends helping at most (ms); then it waits for the index thread as before. */
export const HELP_BUDGET_MS = 250;

/** vCons per indexing round: one transaction and one embed call (~20 texts a vCon). */
export const INDEX_BATCH = 100;

/** What marks a signature of the stored units' JSON (unitsSig) apart from an earlier version's. */
const SIG_PREFIX = 'u2:';

/**
 * Signature of a vCon's searchable texts: unchanged texts are not re-embedded (tag writes). Made
 * of the JSON search_units stores, which a round makes anyway (one JSON text of the units less
 * per vCon than a JSON of their own).
 */
export const unitsSig = (units: SearchUnit[], json = unitsJson(units)) => SIG_PREFIX + createHash('sha1').update(json).digest('base64');

/** The signature earlier versions stored: still matches, so an upgrade re-embeds no unchanged vCon. */
export const legacyUnitsSig = (units: SearchUnit[]) =>
  createHash('sha1')
    .update(JSON.stringify(units.map((u) => [u.source, u.idx, u.body])))
    .digest('base64');

/** Whether a stored signature is that of these texts, in either form. */
const sameTexts = (stored: string, item: IndexItem) =>
  stored === unitsSig(item.units, item.json) || (!stored.startsWith(SIG_PREFIX) && stored === legacyUnitsSig(item.units));

/**
 * The units that get a vector. Party names and addresses carry no meaning for an embedding (a
 * generic "Customer" unit matched everything); keyword search covers them.
 */
export const embeddableUnits = <U extends Pick<SearchUnit, 'source'>>(units: U[]) => units.filter((u) => u.source !== 'party');

/**
 * The text the vCon vector is made from: all its embeddable units as one text, so the words of the
 * whole conversation are pooled together (a chat of many short messages is one description).
 * Measured on the development set against the mean of the unit vectors: MRR 0.60 vs 0.47.
 */
export const wholeText = (units: SearchUnit[]) => units.map((u) => u.body).join('\n');

interface IndexLog {
  warn(obj: object, msg: string): void;
}

export function createSearchIndexer(deps: {
  provider: EmbeddingProvider;
  transact: IndexTransact;
  /** The queue outside any transaction (marks and pending checks). */
  queue: IndexQueueRepo;
  log?: IndexLog;
  batch?: number;
}) {
  const { provider, transact, queue } = deps;
  const batch = deps.batch ?? (provider.inline ? INDEX_BATCH : 32);

  /**
   * One batch for the provider, in slices for a local one: a local embed runs on this thread, and
   * a round of 100 vCons in one piece would hold every request behind it. Between slices the
   * statements of the round in flight move on (indexRound writes the keyword rows meanwhile).
   */
  async function embedYielding(texts: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    if (!provider.inline) return provider.embed(texts, { signal });
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += EMBED_SLICE) {
      await new Promise((r) => setImmediate(r));
      // The round failed under it: its rows stay queued and the next round embeds them again.
      signal?.throwIfAborted();
      out.push(...(await provider.embed(texts.slice(i, i + EMBED_SLICE))));
    }
    return out;
  }

  /** What a round embeds: the vCons whose vectors are out of date, their old vectors dropped. */
  interface EmbedPlan {
    todo: IndexItem[];
    units: SearchUnit[][];
  }

  /**
   * The vCons to embed, their stored vectors dropped. Without `force`, vCons whose texts,
   * created_at and space are unchanged are skipped.
   */
  async function planEmbed(r: IndexRepos, items: IndexItem[], force = false): Promise<EmbedPlan> {
    let todo = items;
    if (!force && items.length > 0) {
      const stored = await r.index.vectorSigs(
        provider,
        items.filter((i) => i.indexed !== false).map((i) => i.uuid),
      );
      todo = items.filter((i) => {
        const s = stored.get(i.uuid);
        return !(s && s.created_at.getTime() === i.created_at.getTime() && sameTexts(s.units_sig, i));
      });
    }
    // A fresh vCon has no vectors to drop.
    if (todo.length > 0) await r.index.dropVectors(todo.filter((i) => i.indexed !== false).map((i) => i.uuid));
    // The whole text in extraction order whichever path read the units: re-embedded from stored
    // units (source, idx order) it was another text, whose vector the signature (of the sorted
    // units) then kept for good.
    return { todo, units: todo.map((i) => embeddableUnits(extractedOrder(i.units))) };
  }

  /** The vectors of a plan, ready to store (no statement: a round runs this while its keyword rows are written). */
  async function embedPlanned(r: IndexRepos, { todo, units }: EmbedPlan, signal?: AbortSignal): Promise<VconRows | null> {
    // Per vCon with units: each unit's text (unit matches, snippets), then the whole text. A local
    // provider stores no unit vectors: searches embed the units of their page (semanticMatches).
    const perUnit = !provider.inline;
    const texts = units.flatMap((u) => (u.length === 0 ? [] : [...(perUnit ? u.map((x) => x.body) : []), wholeText(u)]));
    if (texts.length === 0) return null;
    let vectors: Float32Array[];
    try {
      vectors = await stage('embed', () => embedYielding(texts, signal));
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new EmbedFailure((err as Error).message);
    }
    const out: VconVectors[] = [];
    let k = 0;
    todo.forEach((item, n) => {
      if (units[n].length === 0) return;
      const unitVecs = perUnit ? units[n].map((u) => ({ source: u.source, idx: u.idx, vec: vectors[k++] })) : [];
      out.push({ uuid: item.uuid, created_at: item.created_at, units_sig: unitsSig(item.units, item.json), units: unitVecs, vec: vectors[k++] });
    });
    return r.index.vectorRows(provider, out);
  }

  /**
   * Embeds and stores the vectors of the given vCons (replacing whatever they had, in any
   * space). Without `force`, vCons whose texts, created_at and space are unchanged are skipped.
   * Returns how many vCons got vectors.
   */
  async function embedVcons(r: IndexRepos, items: IndexItem[], opts: { force?: boolean } = {}): Promise<number> {
    const rows = await embedPlanned(r, await planEmbed(r, items, opts.force));
    if (rows) await r.index.writeVectorRows(rows);
    return rows?.count ?? 0;
  }

  /**
   * One indexing round in a transaction of its own: claims up to `n` queued vCons (SKIP LOCKED),
   * derives their units from the stored documents, writes units, ranking tsvector and vectors, and
   * takes them off the queue. When the embed call fails the keyword index is still written and the
   * rows stay queued for a retry. Returns how many vCons were claimed.
   */
  async function indexRound(n: number, filter: ClaimFilter = {}): Promise<number> {
    return transact(
      async (r) => {
        const uuids = await r.queue.claim(n, filter);
        if (uuids.length === 0) return 0;
        const docs = await r.index.docs(uuids);
        const items: IndexItem[] = await stage('derive: units', () =>
          Promise.all(
            docs.map(async (d) => {
              const units = d.kind === 'plain' ? extractUnits(d.doc, await decodeBodies(d.doc)) : [];
              return { uuid: d.uuid, created_at: d.created_at, indexed: d.indexed, units, json: units.length > 0 ? unitsJson(units) : undefined };
            }),
          ),
        );
        const plan = await planEmbed(r, items);
        // The keyword rows go to the database while this thread embeds, so both work at once. The
        // embedding issues no statement (the connection carries one COPY at a time) and never
        // rejects; the round ends only after the writes did, so an error rolls back a quiet connection.
        const stop = new AbortController();
        const written = (async () => {
          await r.index.writeUnits(items);
          await r.index.writeSearchDocs(items);
        })();
        // A failed write ends the round: the embedding stops at its next slice instead of running on
        // beside the next round's.
        written.catch(() => stop.abort());
        const embedded = embedPlanned(r, plan, stop.signal).then(
          (rows) => ({ rows }),
          (error: unknown) => ({ error }),
        );
        await written;
        const e = await embedded;
        if ('error' in e) {
          if (!(e.error instanceof EmbedFailure)) throw e.error;
          await r.queue.fail(uuids, e.error.message);
          deps.log?.warn({ err: e.error.message, vcons: uuids.length }, 'embedding failed; the vCons stay queued for a retry');
          return uuids.length;
        }
        if (e.rows) await r.index.writeVectorRows(e.rows);
        await r.queue.remove(uuids);
        return uuids.length;
      },
      // The round's index rows and the removal of its queue rows commit together: a crash that loses
      // them leaves the vCons queued.
      { lossy: true },
    );
  }

  // Whether a waiting request of this process indexes for itself now (at most one at a time).
  let helping = false;
  // What the latest wait that indexed vCons itself did: rounds that indexed some, their vCons, time
  // in all its rounds (ms) and that time as its last round started. Tests read it to check the
  // budget rule without timing the machine.
  let lastHelp: HelpStats = { rounds: 0, vcons: 0, ms: 0, msBeforeLastRound: 0 };

  /**
   * Waits until nothing the filter selects is queued (failed embeddings aside), at most
   * `deadlineMs`. With `help` it indexes the rows itself (SKIP LOCKED) while it waits, for an
   * instance without a background indexer; otherwise the indexer does it, and the request indexes
   * unclaimed rows itself only after `HELP_AFTER_MS`, one request of the process at a time: the
   * background thread runs at a low priority and may lag on a busy machine, and a search must not
   * answer without writes acknowledged before it. True when done.
   */
  async function drain(filter: ClaimFilter, deadlineMs: number, help: boolean): Promise<boolean> {
    const start = Date.now();
    const end = start + deadlineMs;
    let helped = 0;
    const stats: HelpStats = { rounds: 0, vcons: 0, ms: 0, msBeforeLastRound: 0 };
    for (;;) {
      // Helping is bounded: small rounds of a local provider only (a remote one's round takes
      // seconds of HTTP calls), none started too close to the deadline, and at most HELP_BUDGET_MS
      // of them per request (a backlog is the index thread's: a search must not carry a bulk import).
      const now = Date.now();
      const self = help || (provider.inline && !helping && now - start >= HELP_AFTER_MS && end - now >= HELP_AFTER_MS && helped < HELP_BUDGET_MS);
      if (self) {
        if (!help) helping = true;
        let n: number;
        try {
          n = await indexRound(help ? batch : HELP_BATCH, filter);
        } finally {
          if (!help) {
            helping = false;
            stats.msBeforeLastRound = helped;
            helped += Date.now() - now;
            stats.ms = helped;
          }
        }
        if (!help && n > 0) {
          stats.rounds++;
          stats.vcons += n;
          lastHelp = stats;
        }
        if (n > 0) {
          if (Date.now() >= end) return !(await queue.pending(filter));
          continue;
        }
      }
      if (!(await queue.pending(filter))) return true;
      if (Date.now() >= end) return false;
      // An indexer holds the rest: its round ends within one batch.
      await sleep(help ? 5 : 10);
    }
  }

  /**
   * Makes the index consistent with every write acknowledged before the call: one cheap query when
   * the queue is empty, else waits for the queued rows up to now (indexing them itself with
   * `help`), bounded. Says how many of those vCons are still not indexed after it (a backlog past
   * the deadline), which a search answers with. vCons whose embedding failed are keyword-indexed
   * and counted by /health (`failing`), not here.
   */
  async function catchUpState(deadlineMs: number, help = true, wake?: () => void): Promise<IndexState> {
    const upto = await stage('sql: queue mark', () => queue.mark());
    if (upto === null) return { pending: 0, complete: true };
    // Another instance's writes: this instance's indexer would find them at its next poll.
    wake?.();
    if (await drain({ upto }, deadlineMs, help)) return { pending: 0, complete: true };
    const pending = await queue.countUpTo(upto);
    return { pending, complete: pending === 0 };
  }

  return {
    embedVcons,
    indexRound,

    /** What the latest wait without `help` indexed itself (a copy). */
    lastHelp: (): HelpStats => ({ ...lastHelp }),

    catchUpState,

    /** catchUpState's verdict alone: whether every write acknowledged before the call is searchable. */
    async catchUp(deadlineMs: number, help = true, wake?: () => void): Promise<boolean> {
      return (await catchUpState(deadlineMs, help, wake)).complete;
    },

    /** Waits until the given vCons are indexed (wait_for=search), at most `deadlineMs`. */
    awaitIndexed(uuids: string[], deadlineMs: number, help = true): Promise<boolean> {
      return drain({ uuids }, deadlineMs, help);
    },

    /** Queues stored vCons by uuid and indexes them now (deleted ones are skipped). */
    async indexVcons(uuids: string[]): Promise<void> {
      await queue.enqueue(uuids);
      await drain({ uuids }, 60_000, true);
    },

    /**
     * Embeds every vCon whose vectors are missing from the provider's space (after a provider
     * change, or a backfill), a page at a time, each page in its own transaction. Returns how
     * many vCons got vectors.
     */
    async reembedMissing(opts: { batch?: number; onProgress?: (done: number) => void } = {}): Promise<number> {
      const batch = opts.batch ?? 200;
      let embedded = 0;
      let after: string | null = null;
      for (;;) {
        const page: string[] = await transact((r) => r.index.missingVectors(provider, batch, after));
        if (page.length === 0) break;
        after = page[page.length - 1];
        embedded += await transact(async (r) => {
          const n = await embedVcons(r, await r.index.stored(page), { force: true });
          // Queued background work for these vCons is done now.
          await r.queue.remove(page);
          return n;
        });
        opts.onProgress?.(embedded);
      }
      return embedded;
    },
  };
}

export type SearchIndexer = ReturnType<typeof createSearchIndexer>;
