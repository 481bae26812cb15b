import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { fetchHealth, spawnChild, type Child } from '../child.js';
import { groupUsersOf } from './start.js';
import { createCredentialStore } from '../credentials.js';
import { openDatabases, type Databases } from '../database.js';
import { prepareIdentities } from '../roles.js';
import { allocationIn, budgetFor } from '../budget.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroup, resolveDir, type GroupSpec } from '../groups.js';
import { addEnvDirFlag, addInstancesDirFlag } from '../options.js';
import { BATCH_MAX, type BatchItem } from '../../src/domain/responses.js';
import { classifyVcon, withWarnings, type ValidationMode, type ValidationWarning } from '../../src/domain/vcon.js';
import { checkJsonBytes, checkUniqueMembers } from '../../src/domain/exact-json.js';
import { countJsonValues } from '../../src/domain/elements.js';
import { jsonSyntaxPosition } from '../json-syntax.js';
import { contentUuid } from '../content-uuid.js';
import { createMeter, hold, readLines, type Meter } from '../lines.js';
import { note } from '../output.js';
import { createRegistry } from '../registry.js';
/** Stay well under the default 20 MB body limit even with large inline recordings (and under a smaller limit). */
const BATCH_BYTES = 8 * 1024 * 1024;

/** One vCon to load: a file, or one element of a file holding a JSON array. */
interface Item {
  source: string;
  json: string;
  /** Its uuid as the server will see it (in the file, or derived from its content); undefined when unreadable. */
  uuid?: string;
  /** The uuid was derived from the content (the file has none). */
  derived?: boolean;
}

/** The fate of one file (or array element). */
export interface ImportOutcome {
  source: string;
  /** skipped: another file of this import has the same uuid and came later, so it is the one stored. */
  outcome: 'stored' | 'replaced' | 'rejected' | 'skipped';
  uuid?: string;
  /** For a rejection: the error code and message, with the first details; for a skip, the file kept. */
  reason?: string;
  /** For a stored or replaced vCon: what the group's validation mode tolerated in it. */
  warnings?: ValidationWarning[];
}

/** Files of one import that share a uuid: only the last in path order is sent. */
export interface UuidCollision {
  uuid: string;
  /** Every file with this uuid, in path order. */
  sources: string[];
  /** The one sent (the last). */
  kept: string;
}

/** A path under a given directory that import did not read, and why. */
export interface IgnoredPath {
  path: string;
  reason: string;
}

/** What `vcon-launch import` did. */
export interface ImportReport {
  group: string;
  files: number;
  stored: number;
  replaced: number;
  rejected: number;
  /** Files not sent because a later file of this import has the same uuid. */
  skipped: number;
  /** vCons without a uuid that got their content-derived one. */
  derived_uuids: number;
  /** Stored or replaced vCons the group's validation mode accepted with warnings. */
  with_warnings: number;
  collisions: UuidCollision[];
  /** Symbolic links and special files under the given directories: not followed, not read. */
  ignored: IgnoredPath[];
  seconds: number;
  /**
   * Every file's (or line's) outcome; with `notableOnly`, only those the summary shows: rejected,
   * skipped and stored with warnings (a large import does not keep one for each vCon stored).
   */
  outcomes: ImportOutcome[];
  /** The running instance used, or "temporary" when the launcher started one. */
  via: string;
  /**
   * vCons of the group still queued for search indexing when the import ended (stored and
   * readable, not yet searchable); null when the instance did not say.
   */
  pending_index: number | null;
  /** Whether the instance used keeps running (and indexing): false for a temporary one. */
  running: boolean;
  /**
   * The OS user the temporary instance ran as (its uid as the server process reported it); null
   * when a running instance was used.
   */
  temporary_instance_user: { user: string; uid: number | null } | null;
  /**
   * The most bytes of vCon text the import held at once: .json and .vcon files read, read buffers,
   * lines and batches on their way. NDJSON files are streamed, so they add about three batches however large.
   */
  peak_buffered_bytes: number;
}

/** The files import reads inside a directory: one vCon or an array (.json, .vcon), or one per line (.ndjson, .jsonl). */
const VCON_FILE = /\.(json|vcon|ndjson|jsonl)$/i;
const LINES_FILE = /\.(ndjson|jsonl)$/i;

/**
 * Every .json / .vcon / .ndjson / .jsonl file under the given paths (directories recursively), sorted, deduplicated.
 * Only the given tree is read: a symbolic link or special file found inside a directory is not
 * followed but listed in `ignored` (a link to another group's credentials file would otherwise put
 * them into this group's data). A path given by name is read wherever it points.
 */
export function collectFiles(paths: string[]): { files: string[]; ignored: IgnoredPath[] } {
  const out = new Set<string>();
  const ignored: IgnoredPath[] = [];
  const walk = (p: string, explicit: boolean) => {
    let st;
    try {
      st = explicit ? statSync(p) : lstatSync(p);
    } catch {
      throw new UserError(`${p}: no such file or directory`);
    }
    if (st.isDirectory()) {
      for (const f of readdirSync(p).sort()) walk(path.join(p, f), false);
    } else if (st.isSymbolicLink()) {
      ignored.push({ path: path.resolve(p), reason: 'a symbolic link (not followed: import reads the given tree only)' });
    } else if (!st.isFile()) {
      if (explicit || VCON_FILE.test(p)) ignored.push({ path: path.resolve(p), reason: 'not a regular file' });
    } else if (explicit || VCON_FILE.test(p)) {
      out.add(path.resolve(p));
    }
  };
  for (const p of paths) walk(p, true);
  return { files: [...out].sort(), ignored };
}

/**
 * A file's bytes, refusing one that became a symbolic link or a special file since it was listed
 * (O_NOFOLLOW: the link is not opened), unless it was given by name.
 */
function readRegularFile(file: string, follow: boolean): Buffer {
  const fd = openSync(file, constants.O_RDONLY | (follow ? 0 : constants.O_NOFOLLOW) | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error('not a regular file');
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The vCons of one .json / .vcon file. A rejection never quotes the file: it may be anything (a
 * password file given by mistake), so a file that is not JSON is said to be so at a line and column.
 */
function readItems(file: string, rejected: ImportOutcome[], follow: boolean, mode: ValidationMode): Item[] {
  const reject = (reason: string) => {
    rejected.push({ source: file, outcome: 'rejected', reason });
    return [];
  };
  let bytes: Buffer;
  try {
    bytes = readRegularFile(file, follow);
  } catch (err) {
    return reject(unreadable(err));
  }
  const text = bytes.toString('utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    const at = jsonSyntaxPosition(text);
    return reject(`invalid_json: the file is not JSON (line ${at.line}, column ${at.column})`);
  }
  try {
    checkExact(doc, bytes, 'file');
  } catch (err) {
    return reject(`validation_failed: ${(err as Error).message}`);
  }
  // A file may hold one vCon or an array of them (an export).
  if (Array.isArray(doc)) return doc.map((v, i) => identify(`${file}[${i}]`, v, mode));
  return [identify(file, doc, mode)];
}

const unreadable = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException).code;
  return `unreadable: ${code === 'ELOOP' ? 'a symbolic link (not followed)' : (code ?? (err as Error).message)}`;
};

/**
 * Refuses JSON whose parse is not what its bytes say: numbers a double can't hold, bytes that are
 * not UTF-8 and a field name repeated in one object (the parse kept only the last) would be sent altered.
 */
function checkExact(doc: unknown, bytes: Buffer, what: string): void {
  checkJsonBytes(bytes, 'utf-8', what);
  const counts = { members: 0 };
  countJsonValues(bytes, Infinity, counts);
  checkUniqueMembers(doc, counts.members, bytes, 'utf-8', what);
}

/** An .ndjson / .jsonl file as the first read left it: what the second read sends of it. */
interface LinesFile {
  file: string;
  follow: boolean;
  mode: ValidationMode;
  /** The file as first read: one changed since is refused, not sent half-checked. */
  stat: { dev: number; ino: number; size: number; mtimeMs: number };
  /** Lines rejected by the first read (their outcome is recorded): not sent. */
  rejected: Set<number>;
  /** Lines without a uuid, by number: the uuid derived from their content. */
  derived: Map<number, string>;
}

/** The whole of one file to send: its vCons in memory (.json, .vcon), or its lines, read again (.ndjson, .jsonl). */
type Unit = { items: Item[]; lines?: undefined } | { items?: undefined; lines: LinesFile };

/** Every uuid met so far (at its latest source), and the sources of those met more than once. */
interface Seen {
  last: Map<string, string>;
  repeated: Map<string, string[]>;
}

function see(seen: Seen, uuid: string, source: string): void {
  const before = seen.last.get(uuid);
  if (before !== undefined) {
    const all = seen.repeated.get(uuid);
    if (all) all.push(source);
    else seen.repeated.set(uuid, [before, source]);
  }
  seen.last.set(uuid, source);
}

const openFile = (file: string, follow: boolean) => open(file, constants.O_RDONLY | (follow ? 0 : constants.O_NOFOLLOW) | constants.O_NONBLOCK);

/** Trims JSON whitespace (a CR of CRLF included) and a byte order mark off a line. */
function trimLine(line: Buffer): Buffer {
  let start = 0;
  let end = line.length;
  if (line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) start = 3;
  const space = (c: number) => c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a;
  while (start < end && space(line[start])) start++;
  while (end > start && space(line[end - 1])) end--;
  return line.subarray(start, end);
}

/**
 * First read of an NDJSON file (`vcon-launch dump`, GET /vcons/export): checks each line as a
 * .json file is checked, one line at a time, keeping only the uuids. Each line is its own source
 * (`file:N`), so one bad line is rejected alone; blank lines are skipped. A line longer than a
 * request body can be is rejected unread: no line is held whole past the group's body limit.
 */
async function scanLines(
  file: string,
  follow: boolean,
  ctx: { rejected: ImportOutcome[]; seen: Seen; mode: ValidationMode; maxLine: number; meter: Meter },
): Promise<{ lines: LinesFile; items: number; derived: number } | undefined> {
  let handle: FileHandle;
  let st;
  try {
    handle = await openFile(file, follow);
  } catch (err) {
    ctx.rejected.push({ source: file, outcome: 'rejected', reason: unreadable(err) });
    return undefined;
  }
  try {
    try {
      st = await handle.stat();
      if (!st.isFile()) throw new Error('not a regular file');
    } catch (err) {
      ctx.rejected.push({ source: file, outcome: 'rejected', reason: unreadable(err) });
      return undefined;
    }
    const lines: LinesFile = {
      file,
      follow,
      mode: ctx.mode,
      stat: { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs },
      rejected: new Set(),
      derived: new Map(),
    };
    let items = 0;
    const reject = (n: number, reason: string) => {
      lines.rejected.add(n);
      ctx.rejected.push({ source: `${file}:${n}`, outcome: 'rejected', reason });
    };
    for await (const { n, bytes, over } of readLines(handle, { maxLine: ctx.maxLine, meter: ctx.meter })) {
      if (over !== undefined) {
        reject(
          n,
          `payload_too_large: line ${n} is ${over} bytes, more than a request to the group can carry (REST_API_BODY_LIMIT ${ctx.maxLine + 2} bytes)`,
        );
        continue;
      }
      const line = trimLine(bytes);
      if (line.length === 0) continue;
      const text = line.toString('utf8');
      let doc: unknown;
      try {
        doc = JSON.parse(text);
      } catch {
        reject(n, `invalid_json: line ${n} is not JSON (column ${jsonSyntaxPosition(text).column})`);
        continue;
      }
      try {
        checkExact(doc, line, 'line');
      } catch (err) {
        reject(n, `validation_failed: ${(err as Error).message}`);
        continue;
      }
      const { uuid, withUuid } = identityOf(doc, ctx.mode);
      if (uuid) see(ctx.seen, uuid, `${file}:${n}`);
      if (withUuid) lines.derived.set(n, uuid!);
      items++;
    }
    return { lines, items, derived: lines.derived.size };
  } finally {
    await handle.close();
  }
}

/** One vCon on its way: where it came from and its JSON text (a view of a read buffer: valid until the next is asked for). */
interface Outgoing {
  source: string;
  body: Buffer;
}

/**
 * Second read of an NDJSON file: its lines to send, as the first read judged them. A line with a
 * uuid goes as it is in the file (it was checked to parse to exactly what it says), a line
 * without one with its derived uuid first. A file that changed in between is refused.
 */
async function* sendLines(lines: LinesFile, skip: ReadonlySet<string>, maxLine: number, meter: Meter): AsyncGenerator<Outgoing> {
  const { file } = lines;
  const changed = () => new UserError(`${file} changed while it was imported (it is read once to check it, then again to send it): import it again`);
  let handle: FileHandle;
  try {
    handle = await openFile(file, lines.follow);
  } catch {
    throw changed();
  }
  try {
    const same = async () => {
      const st = await handle.stat();
      const was = lines.stat;
      return st.dev === was.dev && st.ino === was.ino && st.size === was.size && st.mtimeMs === was.mtimeMs;
    };
    if (!(await same())) throw changed();
    for await (const { n, bytes } of readLines(handle, { maxLine, meter })) {
      if (!bytes || lines.rejected.has(n)) continue;
      const line = trimLine(bytes);
      if (line.length === 0) continue;
      const source = `${file}:${n}`;
      if (skip.has(source)) continue;
      const derived = lines.derived.get(n);
      if (derived === undefined) {
        yield { source, body: line };
        continue;
      }
      const { uuid, withUuid } = identityOf(JSON.parse(line.toString('utf8')), lines.mode);
      if (uuid !== derived || !withUuid) throw changed();
      yield { source, body: Buffer.from(JSON.stringify(withUuid)) };
    }
    if (!(await same())) throw changed();
  } finally {
    await handle.close();
  }
}

/**
 * Finds the uuid the server will file a vCon under, by the server's own rules. A plain vCon
 * without one gets the name-based uuid of its canonical JSON, put first as the server would put
 * its own (`withUuid`, the document to send): importing the same file again then replaces it. A
 * signed or encrypted form without a uuid in its header is opaque and sent as it is (the server
 * gives it a new uuid each time); so is what is no vCon at all (the server says what is wrong with it).
 */
function identityOf(vcon: unknown, mode: ValidationMode): { uuid?: string; withUuid?: Record<string, unknown> } {
  let c;
  try {
    c = classifyVcon(vcon, undefined, mode);
  } catch {
    return {};
  }
  if (c.uuid) return { uuid: c.uuid };
  if (c.kind !== 'plain') return {};
  const uuid = contentUuid(vcon);
  return { uuid, withUuid: { uuid, ...c.doc } };
}

function identify(source: string, vcon: unknown, mode: ValidationMode): Item {
  const { uuid, withUuid } = identityOf(vcon, mode);
  return { source, json: JSON.stringify(withUuid ?? vcon), uuid, derived: withUuid !== undefined };
}

/** The sources met before the last of their uuid (path order): not sent, reported as skipped. */
function collisionsOf(seen: Seen): { skip: Set<string>; skipped: ImportOutcome[]; collisions: UuidCollision[] } {
  const skip = new Set<string>();
  const skipped: ImportOutcome[] = [];
  const collisions: UuidCollision[] = [];
  for (const [uuid, sources] of seen.repeated) {
    const kept = sources[sources.length - 1];
    collisions.push({ uuid, sources, kept });
    for (const source of sources.slice(0, -1)) {
      skip.add(source);
      skipped.push({ source, outcome: 'skipped', uuid, reason: `same uuid as ${kept}, which is stored instead` });
    }
  }
  return { skip, skipped, collisions };
}

/** Every vCon to send, file by file in path order; what a unit held is let go once it is sent. */
async function* outgoing(units: (Unit | undefined)[], skip: ReadonlySet<string>, maxLine: number, meter: Meter): AsyncGenerator<Outgoing> {
  for (let u = 0; u < units.length; u++) {
    const unit = units[u]!;
    units[u] = undefined;
    if (unit.lines) {
      yield* sendLines(unit.lines, skip, maxLine, meter);
      continue;
    }
    for (const item of unit.items) {
      hold(meter, -item.json.length);
      if (!skip.has(item.source)) yield { source: item.source, body: Buffer.from(item.json) };
    }
  }
}

/** A batch to post: its sources in order and its body (a JSON array of their texts). */
interface Batch {
  sources: string[];
  body: Buffer;
  /** The bytes its buffer holds (the body and room to spare). */
  held: number;
}

/**
 * Groups the vCons into batches of at most BATCH_MAX and `maxBytes` of body (a larger vCon goes
 * alone), each copied straight into its batch's body: one buffer a batch, not one a line, sized
 * from the batch before.
 */
async function* batches(items: AsyncIterable<Outgoing>, maxBytes: number, meter: Meter): AsyncGenerator<Batch> {
  let sources: string[] = [];
  let body = Buffer.alloc(0);
  let length = 0;
  let expect = 64 * 1024;
  const reserve = (bytes: number) => {
    if (length + bytes <= body.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(length + bytes, length ? 2 * body.length : expect));
    body.copy(grown, 0, 0, length);
    hold(meter, grown.length - body.length);
    body = grown;
  };
  const cut = (): Batch => {
    reserve(1);
    body[length++] = 0x5d; // ]
    const batch = { sources, body: body.subarray(0, length), held: body.length };
    expect = Math.max(64 * 1024, Math.min(maxBytes, Math.ceil(length * 1.125)));
    sources = [];
    body = Buffer.alloc(0);
    length = 0;
    return batch;
  };
  for await (const item of items) {
    if (sources.length && (sources.length >= BATCH_MAX || length + 2 + item.body.length > maxBytes)) yield cut();
    reserve(item.body.length + 2);
    body[length++] = sources.length ? 0x2c /* , */ : 0x5b; /* [ */
    item.body.copy(body, length);
    length += item.body.length;
    sources.push(item.source);
  }
  if (sources.length) yield cut();
}

/** The headers that authenticate as the group's first read-write key, when auth is on. */
export function authHeaders(spec: GroupSpec): Record<string, string> {
  const { required, keys, header } = spec.config.auth;
  if (!required) return {};
  if (!keys.length) throw new UserError(`group ${spec.name} requires authentication but has no API_KEYS; import needs a read-write key`);
  return header === 'authorization' ? { authorization: `Bearer ${keys[0]}` } : { [header]: keys[0] };
}

const reasonOf = (r: { error?: string; message?: string; details?: { path: string; message: string }[] }) => {
  const message = r.message ?? '';
  // The message usually spells out the details already; add them only when it does not.
  const extra = (r.details ?? []).filter((d) => !message.includes(d.path));
  const details = extra.length
    ? ` [${extra
        .slice(0, 3)
        .map((d) => `${d.path}: ${d.message}`)
        .join('; ')}${extra.length > 3 ? '; …' : ''}]`
    : '';
  return `${r.error ?? 'rejected'}: ${message}${details}`;
};

async function postBatch(api: string, headers: Record<string, string>, batch: Batch): Promise<ImportOutcome[]> {
  const res = await fetch(`${api}/vcons/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: batch.body,
  });
  const text = await res.text();
  let body: { results?: BatchItem[]; error?: string; message?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {
    /* handled below */
  }
  if (res.status === 401 || res.status === 403 || res.status === 503) {
    throw new UserError(`the server refused the import (${res.status} ${body.error ?? ''}: ${body.message ?? text.slice(0, 200)})`);
  }
  if (!Array.isArray(body.results)) {
    const reason = reasonOf({ error: body.error ?? `http_${res.status}`, message: body.message ?? text.slice(0, 200) });
    return batch.sources.map((source) => ({ source, outcome: 'rejected', reason }));
  }
  const byIndex = new Map(body.results.map((r) => [r.index, r]));
  const outcomes: ImportOutcome[] = [];
  batch.sources.forEach((source, i) => {
    const r = byIndex.get(i);
    if (!r) outcomes.push({ source, outcome: 'rejected', reason: 'no result for this item' });
    else if (r.status === 201) outcomes.push({ source, outcome: 'stored', uuid: r.uuid ?? undefined, ...withWarnings(r.warnings ?? []) });
    else if (r.status === 200) outcomes.push({ source, outcome: 'replaced', uuid: r.uuid ?? undefined, ...withWarnings(r.warnings ?? []) });
    else outcomes.push({ source, outcome: 'rejected', uuid: r.uuid ?? undefined, reason: reasonOf(r) });
  });
  return outcomes;
}

function createProgress(total: number, enabled: boolean) {
  const t0 = Date.now();
  let last = 0;
  return {
    update(done: number, final = false) {
      if (!enabled || (!final && Date.now() - last < 100)) return;
      last = Date.now();
      const s = (Date.now() - t0) / 1000;
      const rate = s > 0 ? done / s : 0;
      const eta = rate > 0 ? Math.ceil((total - done) / rate) : 0;
      const width = 24;
      const filled = total ? Math.round((done / total) * width) : width;
      process.stderr.write(
        `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} vCons · ${rate.toFixed(0)}/s · ETA ${eta}s   ${final ? '\n' : ''}`,
      );
    },
  };
}

/** The instance's index queue length (GET /health), or null when it does not answer with one. */
async function pendingIndex(api: string): Promise<number | null> {
  const { body } = await fetchHealth(api);
  const pending = (body as { index?: { pending?: unknown } | null }).index?.pending;
  return typeof pending === 'number' ? pending : null;
}

/**
 * The first read of every file, yielding to the event loop now and then so a temporary instance
 * can start meanwhile: .json and .vcon files are kept in memory, NDJSON files only checked.
 */
async function readAll(
  files: string[],
  given: ReadonlySet<string>,
  ctx: { rejected: ImportOutcome[]; seen: Seen; mode: ValidationMode; maxLine: number; meter: Meter },
): Promise<{ units: Unit[]; items: number; derived: number }> {
  const units: Unit[] = [];
  let items = 0;
  let derived = 0;
  for (let i = 0; i < files.length; i++) {
    const file = files[i];
    if (LINES_FILE.test(file)) {
      const read = await scanLines(file, given.has(file), ctx);
      if (!read) continue;
      units.push({ lines: read.lines });
      items += read.items;
      derived += read.derived;
      continue;
    }
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
    const read = readItems(file, ctx.rejected, given.has(file), ctx.mode);
    for (const item of read) {
      if (item.uuid) see(ctx.seen, item.uuid, item.source);
      if (item.derived) derived++;
      hold(ctx.meter, item.json.length);
    }
    items += read.length;
    if (read.length) units.push({ items: read });
  }
  return { units, items, derived };
}

/** Starts the group's instance for this command alone (as the group's own role, like a started group): import, dump. */
export async function startTemporary(
  spec: GroupSpec,
  instancesDir: string,
  launcher: LauncherEnvironment,
): Promise<{ api: string; user: { user: string; uid: number | null }; stop: () => Promise<void> }> {
  const databases: Databases = await openDatabases([spec], { verbose: false });
  let child: Child;
  let user: string;
  try {
    const registry = createRegistry(resolveDir(instancesDir));
    // Its connections come out of the server's budget like a started group's.
    const budgets = await budgetFor([spec], { urlOf: (s) => databases.urlOf(s), running: registry.list().live, replicasOf: () => 1 });
    const { pool, analyze } = allocationIn(budgets, spec.name)!;
    const identity = (
      await prepareIdentities([spec], databases, {
        store: createCredentialStore(registry.dir),
        launcher,
        quiet: true,
        analyzeConnectionsOf: () => analyze,
      })
    ).get(spec.name)!;
    const env = {
      ...launcher.inherited,
      ...spec.env,
      ...identity.env,
      DB_POOL_MAX: String(pool),
      DB_ANALYZE_CONNECTIONS: String(analyze),
      MCP_HTTP_PORT: '0',
      LOG_LEVEL: 'warn',
    };
    // As `start` runs the group: as its own OS user when groups run as their own users.
    const runAs = (await groupUsersOf([spec], launcher))?.get(spec.name);
    user = runAs?.user ?? userInfo().username;
    child = await spawnChild(spec, { env, onLine: () => {}, runAs });
  } catch (err) {
    await databases.release();
    throw err;
  }
  return {
    api: child.api,
    user: { user, uid: child.uid },
    async stop() {
      try {
        await child.stop();
      } finally {
        await databases.release();
      }
    },
  };
}

/**
 * Loads vCon files into a group through POST /vcons/batch: into its running instance when the
 * registry has one, otherwise into a temporary instance started (and stopped) for the import.
 */
export async function importFiles(
  opts: { group: string; paths: string[]; envDir: string; instancesDir: string; progress?: boolean; notableOnly?: boolean },
  launcher: LauncherEnvironment,
): Promise<ImportReport> {
  const spec = loadGroup(opts.group, resolveDir(opts.envDir), launcher);
  const headers = authHeaders(spec);
  const { files, ignored } = collectFiles(opts.paths);
  if (!files.length) throw new UserError(`no .json, .vcon, .ndjson or .jsonl files under ${opts.paths.join(', ')}`);
  const running = createRegistry(resolveDir(opts.instancesDir)).get(spec.name);
  if (!running && !spec.config.rest.enabled) throw new UserError(`group ${spec.name} has REST_API_ENABLED=false; import needs the REST API`);
  // A temporary instance boots (in a process of its own) while the files are read and checked.
  const temporary = running ? undefined : startTemporary(spec, opts.instancesDir, launcher);
  // Its failure is reported where it is awaited, after the reading (not as an unhandled rejection meanwhile).
  temporary?.catch(() => undefined);
  const outcomes: ImportOutcome[] = [];
  const seen: Seen = { last: new Map(), repeated: new Map() };
  const meter = createMeter();
  // A line must fit a batch of one in a request body: the brackets around it take two bytes.
  const maxLine = spec.config.rest.bodyLimit - 2;
  let read: Awaited<ReturnType<typeof readAll>>;
  try {
    read = await readAll(files, new Set(opts.paths.map((p) => path.resolve(p))), {
      rejected: outcomes,
      seen,
      mode: spec.config.validation,
      maxLine,
      meter,
    });
  } catch (err) {
    await temporary?.then(
      (t) => t.stop(),
      () => undefined,
    );
    throw err;
  }
  const { skip, skipped, collisions } = collisionsOf(seen);
  seen.last.clear();
  outcomes.push(...skipped);

  let stopTemporary: (() => Promise<void>) | undefined;
  let temporaryUser: ImportReport['temporary_instance_user'] = null;
  let api: string;
  if (running) {
    api = `${running.url}${running.api_base_path ?? spec.config.rest.basePath}`;
  } else {
    const t = await temporary!;
    stopTemporary = t.stop;
    temporaryUser = t.user;
    api = t.api;
  }
  const t0 = Date.now();
  const progress = createProgress(read.items - skip.size, Boolean(opts.progress));
  const written = { stored: 0, replaced: 0 };
  let pending: number | null;
  try {
    let done = 0;
    // Two batches in flight: the server parses and validates one while PostgreSQL stores the
    // other, and the next is read meanwhile (NDJSON files a line at a time, so what is held stays
    // about three batches whatever the file's size). Items of an import have distinct uuids (the
    // last file of each is kept), so their order doesn't matter; the report keeps file order.
    const queue = batches(outgoing(read.units, skip, maxLine, meter), Math.min(BATCH_BYTES, spec.config.rest.bodyLimit), meter);
    const results: ImportOutcome[][] = [];
    let taken = 0;
    const sender = async () => {
      for (;;) {
        // An async generator answers its callers in call order: batch k goes to the k-th call.
        const k = taken++;
        const next = await queue.next();
        if (next.done) return;
        const got = await postBatch(api, headers, next.value);
        hold(meter, -next.value.held);
        for (const o of got) if (o.outcome === 'stored' || o.outcome === 'replaced') written[o.outcome]++;
        results[k] = opts.notableOnly ? got.filter((o) => (o.outcome !== 'stored' && o.outcome !== 'replaced') || o.warnings?.length) : got;
        done += got.length;
        progress.update(done);
      }
    };
    await Promise.all([sender(), sender()]);
    for (const r of results) if (r) outcomes.push(...r);
    progress.update(done, true);
    // Indexing runs behind the writes: say what is not searchable yet (a temporary instance
    // leaves it queued for the group's server).
    pending = await pendingIndex(api);
  } finally {
    await stopTemporary?.();
  }
  const count = (o: ImportOutcome['outcome']) => outcomes.filter((x) => x.outcome === o).length;
  return {
    group: spec.name,
    files: files.length,
    stored: written.stored,
    replaced: written.replaced,
    rejected: count('rejected'),
    skipped: count('skipped'),
    derived_uuids: read.derived,
    with_warnings: outcomes.filter((x) => x.warnings?.length).length,
    collisions,
    ignored,
    seconds: (Date.now() - t0) / 1000,
    outcomes,
    via: running ? `running instance ${running.url} (pid ${running.pid})` : 'a temporary instance',
    pending_index: pending,
    running: Boolean(running),
    temporary_instance_user: temporaryUser,
    peak_buffered_bytes: meter.peak,
  };
}

/** The summary for people: counts, then every rejection with its reason. */
export function formatImport(r: ImportReport, cwd = process.cwd()): string {
  const total = r.stored + r.replaced + r.rejected + r.skipped;
  const rel = (source: string) => path.relative(cwd, source) || source;
  const lines = [
    `imported into group ${r.group} via ${r.via}: ${r.files} file(s), ${total} vCon(s) in ${r.seconds.toFixed(1)} s`,
    `  stored   ${r.stored}`,
    `  replaced ${r.replaced}`,
    `  rejected ${r.rejected}`,
  ];
  for (const o of r.outcomes.filter((x) => x.outcome === 'rejected')) lines.push(`    ${rel(o.source)}: ${o.reason}`);
  if (r.with_warnings) {
    lines.push(`  ${r.with_warnings} stored vCon(s) with validation warnings (what VCON_VALIDATION tolerated; stored as sent):`);
    for (const o of r.outcomes.filter((x) => x.warnings?.length)) {
      lines.push(`    ${rel(o.source)}: ${o.warnings!.map((w) => `${w.path}: ${w.message}`).join('; ')}`);
    }
  }
  if (r.skipped) {
    lines.push(`  skipped  ${r.skipped} (another file of this import has the same uuid; the last in path order is stored)`);
    for (const c of r.collisions) {
      lines.push(`    uuid ${c.uuid}: ${c.sources.map(rel).join(', ')} -> stored ${rel(c.kept)}`);
    }
  }
  if (r.ignored.length) {
    lines.push(`  ignored  ${r.ignored.length} (symbolic links and special files under the given directories are not read)`);
    for (const i of r.ignored) lines.push(`    ${rel(i.path)}: ${i.reason}`);
  }
  if (r.derived_uuids)
    lines.push(`  ${r.derived_uuids} vCon(s) without a uuid got one derived from their content (importing them again replaces them)`);
  if (r.pending_index)
    lines.push(
      r.running
        ? `  ${r.pending_index} vCon(s) queued for search indexing: readable now, searchable as the running instance indexes them (\`vcon-launch status\` shows the lag)`
        : `  ${r.pending_index} vCon(s) queued for search indexing: readable now, searchable once the group's server has indexed them (\`vcon-launch start --group ${r.group}\` does it in the background; \`vcon-launch status\` shows the lag)`,
    );
  return lines.join('\n');
}

/** Wires `vcon-launch import`. */
export function registerImport(program: Command): void {
  const cmd = program
    .command('import')
    .description(
      'bulk-load vCon files (.json/.vcon, .ndjson/.jsonl one per line as `dump` writes; directories recursively) into a group through the batch API',
    )
    .argument('<paths...>', 'files or directories')
    .requiredOption('--group <name>', 'the group to load into')
    .option('--json', 'print the report (with every file outcome) as JSON');
  addEnvDirFlag(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (paths: string[], opts: { group: string; envDir: string; instancesDir: string; json?: boolean }) => {
    const launcher = readLauncherEnvironment();
    const report = await importFiles({ ...opts, paths, progress: launcher.interactive && !opts.json, notableOnly: !opts.json }, launcher);
    process.stdout.write((opts.json ? JSON.stringify(report, null, 2) : formatImport(report)) + '\n');
    if (report.rejected) note(`${report.rejected} vCon(s) rejected`);
    process.exitCode = report.rejected ? 1 : 0;
  });
}
