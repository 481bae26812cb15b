// Hardening helpers: a real vcon-server process (dist/src/main.js, as deployed), its RSS from
// /proc, an embedded PostgreSQL cluster of our own that a test may restart, and a request runner
// that classifies every answer (status, or the reason there was none).
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';
import postgres from 'postgres';
import { runPgCtl } from '../../src/db/embedded.js';
import { packageRoot } from '../../src/paths.js';
import { adminSql } from '../helpers/db.js';

export const SERVER = path.join(packageRoot, 'dist', 'src', 'main.js');
export const KEY = 'hardening-key-rw';

export { sleep };

export interface ServerProcess {
  proc: ResultPromise<{ ipc: true; reject: false }>;
  pid: number;
  url: string;
  base: string;
  /** Everything the process wrote to stderr (its pino lines). */
  stderr(): string;
}

/** Spawns vcon-server with this environment (nothing inherited but PATH/HOME) and waits for its ready message. */
export async function spawnServer(env: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  let err = '';
  const proc = execa(process.execPath, [SERVER], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? os.tmpdir(),
      MCP_TRANSPORT: 'http',
      MCP_HTTP_PORT: '0',
      MCP_HTTP_HOST: '127.0.0.1',
      API_KEYS: KEY,
      API_KEYS_READONLY: 'hardening-key-ro',
      LOG_LEVEL: 'warn',
      NODE_ENV: 'production',
      ...env,
    },
    extendEnv: false,
    ipc: true,
    reject: false,
    buffer: false,
    stdout: 'ignore',
    // The tests time shutdowns themselves: no SIGKILL behind a SIGTERM.
    forceKillAfterDelay: false,
  }) as ServerProcess['proc'];
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const ready = (await Promise.race([
    proc.getOneMessage({ filter: (m: any) => m?.type === 'ready' }).catch(async () => {
      const r = await proc;
      throw new Error(`vcon-server exited (${r.exitCode ?? r.signal}) before ready:\n${err}`);
    }),
    proc.then((r) => Promise.reject(new Error(`vcon-server exited (${r.exitCode ?? r.signal}) before ready:\n${err}`))),
    sleep(timeoutMs).then(() => Promise.reject(new Error(`vcon-server not ready after ${timeoutMs} ms:\n${err}`))),
  ])) as { url: string; pid: number };
  return { proc, pid: ready.pid, url: ready.url, base: `${ready.url}/api/v1`, stderr: () => err };
}

/** Stops a spawned server (SIGTERM, waits) and drops its throwaway schema. */
export async function stopAndDrop(server: ServerProcess | undefined, schema: string): Promise<void> {
  server?.proc.kill('SIGTERM');
  await server?.proc;
  const admin = adminSql();
  await admin.unsafe(`drop schema if exists "${schema}" cascade`);
  await admin.end();
}

/** Resident set size of a process in KiB (VmRSS of /proc/<pid>/status). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

/** One answered (or unanswered) request. `status` 0 means none: `error` says why (timeout, reset...). */
export interface Outcome {
  status: number;
  ms: number;
  error?: string;
  body?: any;
}

/** fetch with a hard timeout that never throws: the outcome says what happened. */
export async function request(url: string, init: RequestInit & { json?: unknown; key?: string; timeoutMs?: number } = {}): Promise<Outcome> {
  const t0 = performance.now();
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${init.key ?? KEY}`);
  let body = init.body;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers.set('content-type', 'application/json');
  }
  try {
    const res = await fetch(url, { ...init, headers, body, signal: AbortSignal.timeout(init.timeoutMs ?? 10_000) });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: res.status, ms: performance.now() - t0, body: parsed };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { status: 0, ms: performance.now() - t0, error: e.name === 'TimeoutError' ? 'timeout' : (e.cause?.code ?? e.message) };
  }
}

/** A small realistic vCon whose derived rows are known: 2 parties, 2 text dialogs, 1 analysis, 1 attachment. */
export function sampleVcon(uuid = randomUUID(), n = 0) {
  const at = new Date().toISOString();
  return {
    uuid,
    vcon: '0.3.0',
    created_at: at,
    subject: `Hardening call ${n} about a refund for order ${uuid.slice(0, 8)}`,
    parties: [
      { name: `Caller ${n}`, tel: `+1555${String(n).padStart(7, '0')}`, mailto: `mailto:caller${n}@example.com` },
      { name: 'Agent Smith', mailto: 'mailto:agent@example.com' },
    ],
    dialog: [
      {
        type: 'text',
        start: at,
        parties: [0, 1],
        originator: 0,
        body: `Hello, my order ${n} arrived broken and I want a refund.`,
        encoding: 'none',
        mediatype: 'text/plain',
      },
      {
        type: 'text',
        start: at,
        parties: [0, 1],
        originator: 1,
        body: 'Sorry to hear that, I have issued a reimbursement.',
        encoding: 'none',
        mediatype: 'text/plain',
      },
    ],
    analysis: [{ type: 'summary', vendor: 'hardening', body: `Customer ${n} asked for a refund; agent refunded.`, encoding: 'none', dialog: [0, 1] }],
    attachments: [{ purpose: 'ticket', encoding: 'json', body: { ticket: n } }],
  };
}

/**
 * Checks the derived rows of every stored vCon in a schema against its document: parties,
 * dialogs, analyses and attachments one row per item, search units present, and no derived row
 * without its vCon. Returns the problems found (empty when consistent).
 */
export async function derivedProblems(url: string, schema: string): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const s = (t: string) => `"${schema}"."${t}"`;
    const problems: string[] = [];
    // Dialogs are one row per vCon holding one array element per dialog (migration 0005).
    const itemsOf = (table: string) =>
      table === 'vcon_dialogs'
        ? `coalesce((select cardinality(d.types) from ${s(table)} d where d.vcon_uuid = v.uuid), 0)`
        : `(select count(*) from ${s(table)} d where d.vcon_uuid = v.uuid)`;
    for (const [table, field] of [
      ['vcon_parties', 'parties'],
      ['vcon_dialogs', 'dialog'],
      ['vcon_analyses', 'analysis'],
      ['vcon_attachments', 'attachments'],
    ]) {
      const bad = await sql.unsafe(
        `select v.uuid::text, coalesce(json_array_length(v.doc->'${field}'), 0) as doc_n, ${itemsOf(table)}::int as rows_n
         from ${s('vcons')} v
         where v.kind = 'plain' and (coalesce(json_array_length(v.doc->'${field}'), 0) <> ${itemsOf(table)}
            or coalesce(json_array_length(v.doc->'${field}'), 0) <> v.${field}_count)`,
      );
      for (const b of bad) problems.push(`${b.uuid}: ${field} ${b.doc_n} in the document, ${b.rows_n} rows in ${table} (or a wrong ${field}_count)`);
      const orphans = await sql.unsafe(
        `select count(*)::int as n from ${s(table)} d where not exists (select 1 from ${s('vcons')} v where v.uuid = d.vcon_uuid)`,
      );
      if (orphans[0].n > 0) problems.push(`${orphans[0].n} orphan rows in ${table}`);
    }
    const tagOrphans = await sql.unsafe(
      `select count(*)::int as n from ${s('vcon_tags')} d where not exists (select 1 from ${s('vcons')} v where v.uuid = d.vcon_uuid)`,
    );
    if (tagOrphans[0].n > 0) problems.push(`${tagOrphans[0].n} orphan rows in vcon_tags`);
    // Search indexing follows the write (index_queue): a vCon is indexed, or still queued.
    const unitless = await sql.unsafe(
      `select v.uuid::text from ${s('vcons')} v
       where not exists (select 1 from ${s('search_units')} u where u.vcon_uuid = v.uuid)
         and not exists (select 1 from ${s('index_queue')} q where q.vcon_uuid = v.uuid)`,
    );
    for (const u of unitless) problems.push(`${u.uuid}: no search units and not queued for indexing`);
    const orphanUnits = await sql.unsafe(
      `select count(*)::int as n from ${s('search_units')} u where not exists (select 1 from ${s('vcons')} v where v.uuid = u.vcon_uuid)`,
    );
    if (orphanUnits[0].n > 0) problems.push(`${orphanUnits[0].n} orphan search units`);
    return problems;
  } finally {
    await sql.end();
  }
}

/** Rows waiting in a schema's index queue (written, not yet searchable). */
export async function queuedForIndexing(url: string, schema: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [r] = await sql.unsafe(`select count(*)::int as n from "${schema}".index_queue`);
    return r.n as number;
  } finally {
    await sql.end();
  }
}

/**
 * Waits until a schema's index queue is empty (a running instance indexes it), then returns the
 * stored vCons that have no keyword index row: none, when every write was indexed.
 */
export async function unindexedAfterDrain(url: string, schema: string, timeoutMs = 120_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  while ((await queuedForIndexing(url, schema)) > 0) {
    if (Date.now() > deadline) throw new Error(`the index queue of ${schema} did not drain within ${timeoutMs} ms`);
    await sleep(100);
  }
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql.unsafe(
      `select v.uuid::text as u from "${schema}".vcons v where not exists (select 1 from "${schema}".vcon_search s where s.vcon_uuid = v.uuid)`,
    );
    return rows.map((r) => r.u as string);
  } finally {
    await sql.end();
  }
}

/** The uuids stored in a schema. */
export async function storedUuids(url: string, schema: string): Promise<Set<string>> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql.unsafe(`select uuid::text as u from "${schema}".vcons`);
    return new Set(rows.map((r) => r.u as string));
  } finally {
    await sql.end();
  }
}

/** The embedded PostgreSQL's pg_ctl, run as `postgres` when we are root (src/db/embedded.ts). */
export const pgCtl = (args: string[]): Promise<void> => runPgCtl(args);

/** Percentile of a list of numbers (p in 0..100). */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
