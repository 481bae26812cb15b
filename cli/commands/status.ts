import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { readEnvFile } from '../env-files.js';
import { UserError } from '../errors.js';
import { fetchHealth } from '../child.js';
import { resolveDir, SHARED_FILE } from '../groups.js';
import { addInstancesDirFlag } from '../options.js';
import { formatTable, note } from '../output.js';
import { createRegistry, instanceKey, type InstanceState, type LastExit, type RegistryEntry } from '../registry.js';
import { EnvSchema, splitPool, type PoolSplit } from '../../src/config.js';
import { endpointId, redactUrl, type EndpointHealth } from '../../src/domain/webhook-endpoints.js';
import { formatSplit } from '../budget.js';

/** The pool split an instance reports in /health, when it does. */
function poolOf(health: unknown): PoolSplit | undefined {
  const p = (health as { pool?: Partial<PoolSplit> } | undefined)?.pool;
  if (!p || ![p.size, p.requests, p.index, p.analyze].every((n) => typeof n === 'number')) return undefined;
  return { size: p.size!, requests: p.requests!, index: p.index!, analyze: p.analyze! };
}

/** A webhook endpoint of a group: its state as the instance reports it in /health, and its URL from the group's env file. */
export interface WebhookStatus extends EndpointHealth {
  /** The URL without credentials or query; null when the launcher cannot read the group's env file. */
  url: string | null;
}

/** One row of `vcon-launch status --json`: the registry entry plus the live /health. */
export interface GroupStatus extends Omit<RegistryEntry, 'api_base_path' | 'state' | 'restarts' | 'last_exit'> {
  /** running, restarting (crashed; its supervisor brings it back) or crashed (its supervisor gave up). */
  state: InstanceState;
  /** Seconds since the current process started; null when none runs. */
  uptime_s: number | null;
  /** Restarts by its supervisor since `start`. */
  restarts: number;
  /** How the previous process ended ({code, signal, at}), or null when none crashed. */
  last_exit: LastExit | null;
  /** The instance's connections: DB_POOL_MAX split into requests and the index thread, and its analyze connections beside it. */
  db_split: PoolSplit | undefined;
  /** healthy (200), busy (503 with status busy: up, every connection in use), unhealthy (another answer) or unreachable (no answer). */
  status: 'healthy' | 'busy' | 'unhealthy' | 'unreachable';
  /** The live /health body, as the instance reports it. */
  health: unknown;
  /** The group's webhook endpoints (shared by its replicas); null without WEBHOOK_URLS or when the instance did not report them. */
  webhooks: WebhookStatus[] | null;
}

/** The group's environment as its instances see it (env/shared.env, then its own file), or undefined when unreadable. */
function groupEnvOf(envFile: string): Record<string, string | undefined> | undefined {
  try {
    return { ...readEnvFile(path.join(path.dirname(envFile), SHARED_FILE)), ...readEnvFile(envFile) };
  } catch {
    return undefined;
  }
}

type Shape = typeof EnvSchema.shape;
/** One variable of a group's env file, read by the server's own rule; undefined when the file or the value is unusable. */
function groupSetting<K extends 'WEBHOOK_URLS' | 'API_KEYS' | 'API_KEYS_READONLY' | 'METRICS_KEY' | 'API_KEY_HEADER'>(
  env: Record<string, string | undefined> | undefined,
  name: K,
): ReturnType<Shape[K]['parse']> | undefined {
  const parsed = EnvSchema.shape[name].safeParse(env?.[name]);
  return parsed.success ? (parsed.data as ReturnType<Shape[K]['parse']>) : undefined;
}

/** /health's webhook states, each with its URL (without credentials or query) when the env file names it. */
function webhooksOf(health: unknown, envFile: string): WebhookStatus[] | null {
  const list = (health as { webhooks?: unknown } | undefined)?.webhooks;
  if (!Array.isArray(list)) return null;
  const urls = new Map<string, string>();
  for (const u of groupSetting(groupEnvOf(envFile), 'WEBHOOK_URLS') ?? []) urls.set(endpointId(u), redactUrl(u));
  return (list as Partial<WebhookStatus>[]).map((w) => ({
    id: String(w.id),
    url: urls.get(String(w.id)) ?? null,
    state: w.state ?? 'active',
    failing_since: w.failing_since ?? null,
    disabled_at: w.disabled_at ?? null,
    disabled_reason: w.disabled_reason ?? null,
    last_error: w.last_error ?? null,
    last_error_at: w.last_error_at ?? null,
  }));
}

/**
 * Reads the registry (removing stale entries, reported through `onStale`) and asks each running
 * group for its /health, all in parallel.
 */
export async function collectStatus(instancesDir: string, onStale: (group: string, pid: number) => void = () => {}): Promise<GroupStatus[]> {
  const { live, down, stale } = createRegistry(instancesDir).list();
  for (const s of stale) onStale(instanceKey(s), s.pid);
  const now = Date.now();
  const rows = await Promise.all(
    [...live, ...down].map(async (e) => {
      const state: InstanceState = e.state ?? 'running';
      const h = state === 'crashed' ? { status: 0, body: null } : await fetchHealth(`${e.url}${e.api_base_path ?? '/api/v1'}`);
      const busy = (h.body as { status?: string } | undefined)?.status === 'busy';
      const status: GroupStatus['status'] = h.status === 200 ? 'healthy' : h.status === 0 ? 'unreachable' : busy ? 'busy' : 'unhealthy';
      const since = Date.parse(e.started_at);
      return {
        group: e.group,
        replica: e.replica,
        replicas: e.replicas,
        state,
        uptime_s: state === 'running' && Number.isFinite(since) ? Math.max(0, Math.round((now - since) / 1000)) : null,
        restarts: e.restarts ?? 0,
        last_exit: e.last_exit ?? null,
        pid: e.pid,
        url: e.url,
        port: e.port,
        schema: e.schema,
        label: e.label,
        status,
        health: h.body,
        webhooks: webhooksOf(h.body, e.env_file),
        database: e.database,
        role: e.role,
        env_file: e.env_file,
        started_at: e.started_at,
        supervisor_pid: e.supervisor_pid,
        mode: e.mode ?? (e.supervisor_pid ? 'foreground' : 'detached'),
        log_file: e.log_file,
        database_key: e.database_key,
        server_key: e.server_key,
        db_pool: e.db_pool,
        db_pooled: e.db_pooled,
        db_analyze: e.db_analyze,
        // How the pool divides: the instance's own report, or the same split of what the registry recorded.
        db_split: poolOf(h.body) ?? (e.db_pool === undefined ? undefined : splitPool(e.db_pool, e.db_analyze ?? 0)),
      };
    }),
  );
  return rows.sort((a, b) => a.group.localeCompare(b.group) || a.replica - b.replica);
}

/** "SIGKILL", "code 1", or "-". */
export const formatExit = (e: LastExit | null) => (!e ? '-' : e.signal ? e.signal : e.code !== null ? `code ${e.code}` : 'failed to start');

/** 3725 → "1h02m". */
export function formatUptime(s: number | null): string {
  if (s === null) return '-';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86_400)}d${String(Math.floor((s % 86_400) / 3600)).padStart(2, '0')}h`;
}

/** The WEBHOOKS cell: "-" without endpoints, else how many are in each state ("1 disabled, 1 active"). */
export function formatWebhookCounts(list: WebhookStatus[] | null): string {
  if (!list || list.length === 0) return '-';
  const order: WebhookStatus['state'][] = ['disabled', 'failing', 'throttled', 'active'];
  return order
    .map((state) => [state, list.filter((w) => w.state === state).length] as const)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
}

const ago = (iso: string | null, now: number) => (iso === null ? '?' : formatUptime(Math.max(0, Math.round((now - Date.parse(iso)) / 1000))));

/**
 * One line per webhook endpoint that is not delivering (failing, throttled or disabled), per group
 * (its replicas share the state): what it is, since when and why. Empty when every endpoint is active.
 */
export function formatWebhookLines(rows: GroupStatus[], now = Date.now()): string[] {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const r of rows) {
    if (!r.webhooks || seen.has(r.group)) continue;
    seen.add(r.group);
    for (const w of r.webhooks) {
      if (w.state === 'active') continue;
      const last = w.last_error ? `last error ${ago(w.last_error_at, now)} ago: ${w.last_error}` : 'no error recorded';
      const what =
        w.state === 'disabled'
          ? `disabled ${ago(w.disabled_at, now)} ago (${w.disabled_reason ?? 'no reason recorded'}); nothing is sent until POST /webhooks/${w.id}/enable`
          : w.state === 'throttled'
            ? `throttled (it asked to wait), failing for ${ago(w.failing_since, now)}; ${last}`
            : `failing for ${ago(w.failing_since, now)}; ${last}`;
      lines.push(`${r.group}: webhook ${w.id}${w.url ? ` ${w.url}` : ''} ${what}`);
    }
  }
  return lines;
}

/** The status table: what the registry says next to what each instance reports about itself. */
export function formatStatusTable(rows: GroupStatus[]): string {
  return formatTable(
    [
      'GROUP',
      'STATE',
      'STATUS',
      'UPTIME',
      'RESTARTS',
      'LAST EXIT',
      'PID',
      'URL',
      'SCHEMA',
      'ROLE',
      'LABEL',
      'DATABASE',
      'POOL',
      'CONNS',
      'INDEX LAG',
      'WEBHOOKS',
      'REPORTED (schema / label / db)',
      'MODE',
    ],
    rows.map((r) => {
      const h = (r.health ?? {}) as {
        schema?: string;
        instance?: string | null;
        database?: string;
        pool?: { connections?: number | null };
        index?: { pending?: number; lag_s?: number } | null;
      };
      const reported = r.status === 'unreachable' ? 'no answer' : `${h.schema ?? '?'} / ${h.instance ?? '-'} / ${h.database ?? '?'}`;
      const pool = `${r.db_split ? formatSplit(r.db_split) : '?'}${r.db_pooled ? ' (pgbouncer)' : ''}`;
      const conns = h.pool?.connections ?? '-';
      // Written vCons not yet searchable, and how long the oldest has waited.
      const lag = h.index ? `${h.index.lag_s ?? 0}s (${h.index.pending ?? 0} queued)` : '-';
      return [
        instanceKey(r),
        r.state,
        r.status,
        formatUptime(r.uptime_s),
        r.restarts,
        formatExit(r.last_exit),
        r.pid,
        r.url,
        r.schema,
        r.role,
        r.label,
        r.database,
        pool,
        conns,
        lag,
        formatWebhookCounts(r.webhooks),
        reported,
        `${r.mode}${r.supervisor_pid ? ` (${r.mode === 'detached' ? 'supervisor ' : ''}${r.supervisor_pid})` : ''}`,
      ];
    }),
  );
}

/** Samples of one Prometheus text exposition, by metric name (labels kept as written). */
export function parseMetrics(text: string): Map<string, { labels: string; value: number }[]> {
  const out = new Map<string, { labels: string; value: number }[]>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const list = out.get(m[1]) ?? [];
    list.push({ labels: m[2] ?? '', value: Number(m[3]) });
    out.set(m[1], list);
  }
  return out;
}

const sumOf = (m: Map<string, { value: number }[]>, name: string) => m.get(name)?.reduce((n, s) => n + s.value, 0);

/** The p95 of a histogram's observations between two scrapes (buckets summed over every label but `le`). */
function p95Between(
  before: Map<string, { labels: string; value: number }[]>,
  after: Map<string, { labels: string; value: number }[]>,
  name: string,
): number | undefined {
  const byLe = (m: Map<string, { labels: string; value: number }[]>) => {
    const out = new Map<number, number>();
    for (const s of m.get(`${name}_bucket`) ?? []) {
      const le = /le="([^"]+)"/.exec(s.labels)?.[1];
      if (le === undefined) continue;
      const bound = le === '+Inf' ? Infinity : Number(le);
      out.set(bound, (out.get(bound) ?? 0) + s.value);
    }
    return out;
  };
  const a = byLe(before);
  const b = byLe(after);
  const bounds = [...b.keys()].sort((x, y) => x - y);
  const total = (b.get(Infinity) ?? 0) - (a.get(Infinity) ?? 0);
  if (!total) return undefined;
  for (const le of bounds) if ((b.get(le) ?? 0) - (a.get(le) ?? 0) >= total * 0.95) return le;
  return undefined;
}

/** The key /metrics accepts: METRICS_KEY, else one of the group's keys (read-only ones included). */
function metricsKeyOf(envFile: string): { header: string; key: string } | undefined {
  const env = groupEnvOf(envFile);
  if (!env) return undefined;
  const key = [groupSetting(env, 'METRICS_KEY'), ...(groupSetting(env, 'API_KEYS_READONLY') ?? []), ...(groupSetting(env, 'API_KEYS') ?? [])].find(
    (k) => k,
  );
  return key ? { header: groupSetting(env, 'API_KEY_HEADER') ?? 'authorization', key } : undefined;
}

async function scrape(row: GroupStatus): Promise<Map<string, { labels: string; value: number }[]> | undefined> {
  if (row.state !== 'running') return undefined;
  const auth = metricsKeyOf(row.env_file);
  try {
    const headers: Record<string, string> = {};
    if (auth) headers[auth.header] = auth.header.toLowerCase() === 'authorization' ? `Bearer ${auth.key}` : auth.key;
    const res = await fetch(`${row.url}/metrics`, { headers, signal: AbortSignal.timeout(2_000) });
    return res.ok ? parseMetrics(await res.text()) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `status --watch`: every interval, one live line per instance: requests per second and their
 * p95 since the previous draw (from the group's /metrics, when it serves them), its pool in use
 * and waiting, index lag and MCP sessions. On a terminal the table is redrawn in place.
 */
async function watch(instancesDir: string, seconds: number): Promise<void> {
  let stop = false;
  process.once('SIGINT', () => (stop = true));
  process.once('SIGTERM', () => (stop = true));
  let previous = new Map<string, { at: number; metrics: Map<string, { labels: string; value: number }[]> }>();
  for (;;) {
    const rows = await collectStatus(instancesDir);
    const now = Date.now();
    const next = new Map<string, { at: number; metrics: Map<string, { labels: string; value: number }[]> }>();
    const lines = await Promise.all(
      rows.map(async (r) => {
        const key = instanceKey(r);
        const metrics = await scrape(r);
        const before = previous.get(key);
        if (metrics) next.set(key, { at: now, metrics });
        const h = (r.health ?? {}) as {
          pool?: { size?: number; in_use?: number; waiting?: number };
          index?: { lag_s?: number; pending?: number } | null;
        };
        let rate = '-';
        let p95 = '-';
        if (metrics && before) {
          const dt = (now - before.at) / 1000;
          const d = (sumOf(metrics, 'vcon_http_requests_total') ?? 0) - (sumOf(before.metrics, 'vcon_http_requests_total') ?? 0);
          rate = dt > 0 ? (d / dt).toFixed(1) : '-';
          const q = p95Between(before.metrics, metrics, 'vcon_http_request_duration_seconds');
          p95 = q === undefined ? '-' : q === Infinity ? '>max' : `${Math.round(q * 1000)} ms`;
        }
        const mcp = metrics ? (sumOf(metrics, 'vcon_mcp_sessions') ?? '-') : '-';
        const pool = h.pool ? `${h.pool.in_use ?? 0}/${h.pool.size ?? '?'}${h.pool.waiting ? ` (+${h.pool.waiting} waiting)` : ''}` : '-';
        const lag = h.index ? `${h.index.lag_s ?? 0}s (${h.index.pending ?? 0} queued)` : '-';
        return [key, r.state, r.status, formatUptime(r.uptime_s), r.restarts, rate, p95, pool, lag, mcp];
      }),
    );
    previous = next;
    const table = rows.length
      ? formatTable(['GROUP', 'STATE', 'STATUS', 'UPTIME', 'RESTARTS', 'REQ/S', 'P95', 'POOL', 'INDEX LAG', 'MCP'], lines)
      : 'no groups are running';
    const stamp = `vcon-launch status --watch: ${new Date(now).toISOString()} (every ${seconds} s; Ctrl-C stops)`;
    process.stdout.write(process.stdout.isTTY ? `\x1b[H\x1b[2J${stamp}\n${table}\n` : `${stamp}\n${table}\n\n`);
    const until = Date.now() + seconds * 1000;
    while (!stop && Date.now() < until) await sleep(Math.min(100, until - Date.now()));
    if (stop) return;
  }
}

/** Wires `vcon-launch status`. */
export function registerStatus(program: Command): void {
  const cmd = program
    .command('status')
    .description("list running groups with each instance's live /health")
    .option(
      '--json',
      'print a JSON array (group, state, uptime_s, restarts, last_exit, pid, url, port, schema, role, label, status, health, webhooks, ...)',
    )
    .option('--watch [seconds]', 'redraw a live table (requests/s, p95, pool, index lag, MCP sessions) every few seconds until Ctrl-C');
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: { json?: boolean; watch?: string | boolean; instancesDir: string }) => {
    if (opts.watch !== undefined && opts.watch !== false) {
      const seconds = opts.watch === true ? 2 : Number(opts.watch);
      if (!Number.isFinite(seconds) || seconds <= 0) throw new UserError(`--watch takes a number of seconds, got "${String(opts.watch)}"`);
      if (opts.json) throw new UserError('use either --watch or --json, not both');
      await watch(resolveDir(opts.instancesDir), seconds);
      return;
    }
    const rows = await collectStatus(resolveDir(opts.instancesDir), (group, pid) =>
      note(`removed the stale entry of group ${group} (pid ${pid} is no longer running)`),
    );
    if (opts.json) process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
    else if (rows.length === 0) process.stdout.write('no groups are running\n');
    else {
      const hooks = formatWebhookLines(rows);
      process.stdout.write(formatStatusTable(rows) + '\n' + (hooks.length ? `\n${hooks.join('\n')}\n` : ''));
    }
    process.exitCode = rows.every((r) => r.status === 'healthy' || r.status === 'busy') ? 0 : 1;
  });
}
