// The density bench (many groups on one server): N groups on one PostgreSQL with max_connections = 100 that this
// module starts itself, started with `vcon-launch start --all --detach`; time to all healthy and
// idle RSS; then mixed load over every group at once (creates, reads, keyword and semantic
// searches, C clients per group), while an operator opens a fresh connection every second.
// Also driven by the hardening suite with a small N (tests/hardening/density.test.ts).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import postgres from 'postgres';
import { acquireEmbeddedPostgres, restartWithMaxConnections } from '../../src/db/embedded.js';
import { readEnvFile, setEnvVariable } from '../../cli/env-files.js';
import { POOLED_ANALYZE_CONNECTIONS, POOLED_POOL } from '../../cli/budget.js';
import { startPgBouncer, type PgBouncer } from './pgbouncer.js';
import { CLI_JS, readRssMb } from './processes.js';
import { makeFigure, percentile, type Figure } from './stats.js';

export const DENSITY_ROUTES = ['create', 'read', 'keyword', 'semantic'] as const;
export type DensityRoute = (typeof DENSITY_ROUTES)[number];

export interface DensityOptions {
  groups: number;
  /** Seconds of mixed load. */
  seconds: number;
  clientsPerGroup: number;
  maxConnections: number;
  /** Where env/ and instances/ go. */
  dir: string;
  /** Extra lines for env/shared.env (e.g. the embedding provider). */
  sharedEnv?: Record<string, string>;
  /**
   * Groups connect through a real PgBouncer (transaction pooling) started by the bench: each group
   * provisioned its own role first (`vcon-launch provision`), then DATABASE_URL points at PgBouncer
   * with DB_POOLER=pgbouncer.
   */
  pgbouncer?: boolean;
  log: (msg: string) => void;
}

export interface DensityResult {
  groups: number;
  clients_per_group: number;
  seconds: number;
  max_connections: number;
  /** Through PgBouncer: its server connections per group role and over the database. */
  pgbouncer: { pool_per_role: number; max_db_connections: number } | null;
  /** `vcon-launch start --all --detach` to exit 0 (every group healthy). */
  healthy_s: number;
  pool_per_group: number[];
  idle_rss_mb: { total: number; per_group_median: number; per_group_max: number };
  /** After each group's first write (wait_for=search: its index thread started) and semantic search. */
  first_use_rss_mb: { total: number; per_group_median: number; per_group_max: number };
  requests: number;
  statuses: Record<string, number>;
  /** 5xx answers other than 503 database_busy. */
  other_5xx: number;
  database_busy: number;
  /** Requests that got no HTTP answer (reset, socket closed, timeout): by error code. */
  errors: Record<string, number>;
  routes: Record<DensityRoute, { requests: number; ok: number; p50_ms: number; p95_ms: number }>;
  rss_after_mb: { total: number; per_group_median: number; per_group_max: number };
  /** The most client connections PostgreSQL had at once (sampled every second). */
  max_connections_in_use: number;
  operator: { attempts: number; refused: number; reasons: string[] };
  lost_processes: number;
}

const KEY = 'density-bench-key';

const WORDS = ['refund', 'order', 'delivery', 'invoice', 'password', 'account', 'shipping', 'warranty', 'upgrade', 'cancel', 'billing', 'router'];
const pick = <T>(xs: readonly T[]) => xs[Math.floor(Math.random() * xs.length)];

function vconDoc() {
  const topic = `${pick(WORDS)} ${pick(WORDS)}`;
  return {
    vcon: '0.3.0',
    subject: `Call about ${topic}`,
    parties: [
      { tel: '+15550100', name: 'Customer' },
      { mailto: 'agent@example.com', name: 'Agent' },
    ],
    dialog: [
      {
        type: 'text',
        start: new Date().toISOString(),
        parties: [0, 1],
        encoding: 'none',
        body: `Hello, I need help with my ${topic}. It has been a week.`,
      },
      {
        type: 'text',
        start: new Date().toISOString(),
        parties: [1, 0],
        encoding: 'none',
        body: `Sorry about the ${topic}; let me look at the account and fix it today.`,
      },
    ],
    analysis: [{ type: 'summary', vendor: 'bench', encoding: 'none', body: `Customer asks about ${topic}` }],
  };
}

const summarize = (xs: number[]) => ({
  total: xs.reduce((a, b) => a + b, 0),
  per_group_median: percentile(xs, 50),
  per_group_max: Math.max(...xs),
});

/** One density run. Starts its own PostgreSQL; stops everything it started. */
export async function runDensity(opts: DensityOptions): Promise<DensityResult> {
  const pgDir = mkdtempSync(path.join(os.tmpdir(), 'vcon-density-pg-'));
  const pg = await acquireEmbeddedPostgres(pgDir);
  await restartWithMaxConnections(pg, opts.maxConnections);
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  // The operator: an ordinary login role, so it has no superuser-reserved slot to fall back on.
  const operatorRole = `density_operator_${process.pid}`;
  await admin.unsafe(`create role "${operatorRole}" login password 'operator'`);
  // Monitoring rights, so it can count every session (not only its own) in pg_stat_activity.
  await admin.unsafe(`grant pg_read_all_stats to "${operatorRole}"`);
  const operatorUrl = pg.url.replace('postgres://postgres@', `postgres://${operatorRole}:operator@`);

  const envDir = path.join(opts.dir, 'env');
  const instancesDir = path.join(opts.dir, 'instances');
  mkdirSync(envDir, { recursive: true });
  const shared = { DATABASE_URL: pg.url, API_KEYS: KEY, LOG_LEVEL: 'warn', NODE_ENV: 'production', ...opts.sharedEnv };
  writeFileSync(
    path.join(envDir, 'shared.env'),
    Object.entries(shared)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(''),
  );
  for (let g = 0; g < opts.groups; g++) writeFileSync(path.join(envDir, `g${g}.env`), `SUPABASE_DB_SCHEMA=density_g${g}\n`);
  const cli = (...args: string[]) =>
    execa(process.execPath, [CLI_JS, ...args, ...(args[0] === 'provision' ? [] : ['--instances-dir', instancesDir])], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
      extendEnv: false,
      reject: false,
      all: true,
      timeout: 300_000,
    });

  let bouncer: PgBouncer | undefined;
  let pooled: DensityResult['pgbouncer'] = null;
  try {
    if (opts.pgbouncer) {
      const provisioned = await cli('provision', '--all', '--env-dir', envDir);
      if (provisioned.exitCode !== 0)
        throw new Error(`vcon-launch provision failed (${provisioned.exitCode}):\n${String(provisioned.all).slice(-3000)}`);
      const groups = Array.from({ length: opts.groups }, (_, g) => path.join(envDir, `g${g}.env`));
      const users = groups.flatMap((file) => {
        const env = readEnvFile(file);
        const u = new URL(env.DATABASE_URL);
        return [
          { name: decodeURIComponent(u.username), password: decodeURIComponent(u.password) },
          { name: env.ANALYZE_DATABASE_USER, password: env.ANALYZE_DATABASE_PASSWORD },
        ];
      });
      // PostgreSQL keeps its superuser slots and the operators' reserve; PgBouncer gets the rest,
      // two server connections per group role at most.
      pooled = { pool_per_role: 2, max_db_connections: opts.maxConnections - 3 - 10 };
      const server = new URL(pg.url);
      bouncer = await startPgBouncer({
        server: { host: server.hostname, port: Number(server.port) },
        users,
        poolSize: pooled.pool_per_role,
        maxDbConnections: pooled.max_db_connections,
        // Every group's whole pool and its analyze role's connections, as docs/deployment.md asks of operators.
        maxClientConn: opts.groups * (POOLED_POOL + POOLED_ANALYZE_CONNECTIONS) + 100,
      });
      for (const file of groups) {
        const u = new URL(readEnvFile(file).DATABASE_URL);
        setEnvVariable(file, 'DATABASE_URL', bouncer.url(decodeURIComponent(u.username), decodeURIComponent(u.password), u.pathname.slice(1)), {
          secret: true,
        });
        setEnvVariable(file, 'DB_POOLER', 'pgbouncer');
      }
    }
    const t0 = performance.now();
    const started = await cli('start', '--all', '--env-dir', envDir, '--detach');
    const healthy_s = (performance.now() - t0) / 1000;
    if (started.exitCode !== 0) throw new Error(`vcon-launch start failed (${started.exitCode}):\n${String(started.all).slice(-3000)}`);
    const status = JSON.parse(String((await cli('status', '--json')).stdout)) as { group: string; pid: number; url: string; db_pool?: number }[];
    opts.log(`  ${opts.groups} groups healthy in ${healthy_s.toFixed(1)} s`);
    await sleep(5_000);
    const idle = status.map((s) => readRssMb(s.pid));
    // Each group's first write and search, all at once: the index thread starts, word vectors are read.
    await Promise.all(
      status.map(async (s) => {
        const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
        const base = `${s.url}/api/v1`;
        const body = JSON.stringify({ ...vconDoc(), uuid: randomUUID() });
        await fetch(`${base}/vcons?wait_for=search`, { method: 'POST', headers, body }).then((r) => r.text());
        await fetch(`${base}/vcons/search/semantic?q=${encodeURIComponent(`problem with my ${pick(WORDS)}`)}&limit=10`, { headers }).then((r) =>
          r.text(),
        );
      }),
    );
    const firstUse = status.map((s) => readRssMb(s.pid));

    // The operator and the connection sampler: a fresh connection every second.
    const operator = { attempts: 0, refused: 0, reasons: [] as string[] };
    let maxInUse = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const tick = sleep(1_000);
        operator.attempts++;
        const sql = postgres(operatorUrl, { max: 1, connect_timeout: 5, onnotice: () => undefined });
        try {
          const [r] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where backend_type = 'client backend'`;
          maxInUse = Math.max(maxInUse, r.n);
        } catch (err) {
          operator.refused++;
          const reason = (err as Error).message;
          if (!operator.reasons.includes(reason)) operator.reasons.push(reason);
        } finally {
          await sql.end({ timeout: 1 }).catch(() => undefined);
        }
        await tick;
      }
    })();

    // Mixed load over every group at once.
    const samples: Record<DensityRoute, { ms: number; status: number }[]> = { create: [], read: [], keyword: [], semantic: [] };
    const errors: Record<string, number> = {};
    const statuses: Record<string, number> = {};
    let otherFiveXX = 0;
    let busy = 0;
    const deadline = Date.now() + opts.seconds * 1000;
    const client = async (base: string, uuids: string[]) => {
      while (Date.now() < deadline) {
        const r = Math.random();
        const route: DensityRoute = uuids.length === 0 || r < 0.3 ? 'create' : r < 0.6 ? 'read' : r < 0.85 ? 'keyword' : 'semantic';
        const doc = route === 'create' ? vconDoc() : undefined;
        const url =
          route === 'create'
            ? `${base}/vcons`
            : route === 'read'
              ? `${base}/vcons/${pick(uuids)}`
              : route === 'keyword'
                ? `${base}/vcons/search/content?q=${pick(WORDS)}&limit=10`
                : `${base}/vcons/search/semantic?q=${encodeURIComponent(`problem with my ${pick(WORDS)}`)}&limit=10`;
        const t = performance.now();
        try {
          const res = await fetch(url, {
            method: doc ? 'POST' : 'GET',
            headers: { authorization: `Bearer ${KEY}`, ...(doc ? { 'content-type': 'application/json' } : {}) },
            body: doc ? JSON.stringify({ ...doc, uuid: randomUUID() }) : undefined,
            signal: AbortSignal.timeout(60_000),
          });
          const text = await res.text();
          samples[route].push({ ms: performance.now() - t, status: res.status });
          statuses[res.status] = (statuses[res.status] ?? 0) + 1;
          if (res.status === 201) uuids.push((JSON.parse(text) as { uuid: string }).uuid);
          if (res.status >= 500) {
            const code = (() => {
              try {
                return (JSON.parse(text) as { error?: string }).error;
              } catch {
                return undefined;
              }
            })();
            if (res.status === 503 && code === 'database_busy') busy++;
            else otherFiveXX++;
            if (res.status === 503) await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
          }
        } catch (err) {
          const e = err as Error & { cause?: { code?: string } };
          const code = e.cause?.code ?? e.name;
          errors[code] = (errors[code] ?? 0) + 1;
        }
      }
    };
    opts.log(`  load: ${opts.seconds} s, ${opts.clientsPerGroup} clients in each of ${opts.groups} groups`);
    await Promise.all(
      status.flatMap((s) => {
        const uuids: string[] = [];
        return Array.from({ length: opts.clientsPerGroup }, () => client(`${s.url}/api/v1`, uuids));
      }),
    );
    sampling = false;
    await sampler;
    const after = status.map((s) => readRssMb(s.pid));
    const alive = status.filter((s) => Number.isFinite(readRssMb(s.pid))).length;

    const routes = Object.fromEntries(
      DENSITY_ROUTES.map((r) => {
        const ok = samples[r].filter((x) => x.status < 400);
        return [
          r,
          {
            requests: samples[r].length,
            ok: ok.length,
            p50_ms: percentile(
              ok.map((x) => x.ms),
              50,
            ),
            p95_ms: percentile(
              ok.map((x) => x.ms),
              95,
            ),
          },
        ];
      }),
    ) as DensityResult['routes'];
    return {
      groups: opts.groups,
      clients_per_group: opts.clientsPerGroup,
      seconds: opts.seconds,
      max_connections: opts.maxConnections,
      pgbouncer: pooled,
      healthy_s,
      pool_per_group: [...new Set(status.map((s) => s.db_pool ?? NaN))],
      idle_rss_mb: summarize(idle),
      first_use_rss_mb: summarize(firstUse),
      requests: DENSITY_ROUTES.reduce((n, r) => n + samples[r].length, 0) + Object.values(errors).reduce((a, b) => a + b, 0),
      statuses,
      other_5xx: otherFiveXX,
      database_busy: busy,
      errors,
      routes,
      rss_after_mb: summarize(after.filter(Number.isFinite)),
      max_connections_in_use: maxInUse,
      operator,
      lost_processes: opts.groups - alive,
    };
  } finally {
    await cli('stop', '--all');
    await bouncer?.stop().catch(() => undefined);
    await admin.unsafe(`drop role if exists "${operatorRole}"`).catch(() => undefined);
    await admin.end({ timeout: 2 }).catch(() => undefined);
    await pg.release();
    rmSync(pgDir, { recursive: true, force: true });
  }
}

/** The bench figures of one density run (its goals are set for 50 groups). */
export function densityFigures(r: DensityResult): Figure[] {
  const via = r.pgbouncer ? ' through PgBouncer' : '';
  const id = (s: string) => `density.n${r.groups}${r.pgbouncer ? '.pgbouncer' : ''}.${s}`;
  const one = (s: string, label: string, unit: string, value: number, goal?: number, note?: string) =>
    makeFigure({
      id: id(s),
      label: `${r.groups} groups${via}: ${label}`,
      unit,
      better: 'lower',
      rounds: [value],
      goal: goal === undefined ? undefined : { kind: 'max', value: goal },
      note,
    });
  const resets = Object.values(r.errors).reduce((a, b) => a + b, 0);
  return [
    one('healthy_s', 'start --all --detach to all healthy', 's', r.healthy_s, 15),
    one('idle_rss', 'idle RSS per instance (max)', 'MB', r.idle_rss_mb.per_group_max, 80, `total ${r.idle_rss_mb.total.toFixed(0)} MB`),
    one(
      'first_use_rss',
      'RSS per instance after its first write and search (max)',
      'MB',
      r.first_use_rss_mb.per_group_max,
      110,
      `total ${r.first_use_rss_mb.total.toFixed(0)} MB`,
    ),
    one('rss_after', 'RSS per instance after the load (max)', 'MB', r.rss_after_mb.per_group_max, 160, `total ${r.rss_after_mb.total.toFixed(0)} MB`),
    one('other_5xx', '5xx other than database_busy', 'requests', r.other_5xx, 0, `${r.requests} requests, ${r.database_busy} database_busy`),
    ...(r.pgbouncer ? [one('database_busy', 'database_busy answers', 'requests', r.database_busy, 0, `${r.requests} requests`)] : []),
    one('resets', 'requests without an answer (resets, timeouts)', 'requests', resets, 0, JSON.stringify(r.errors)),
    one('operator_refused', 'operator connections refused', 'tries', r.operator.refused, 0, `${r.operator.attempts} tries`),
    one('lost', 'processes lost', 'processes', r.lost_processes, 0),
  ];
}

/** The per-N table of the report (markdown). */
export function densityMarkdown(results: DensityResult[]): string {
  const f = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : '-');
  const lines = [
    '## Density',
    '',
    `One PostgreSQL with max_connections = ${results[0]?.max_connections}, started by the bench; \`vcon-launch start --all --detach\`; mixed load (30% creates, 30% reads by uuid, 25% keyword, 15% semantic searches) over every group at once; an ordinary (non-superuser) operator role opens a fresh connection every second.`,
    '',
    '| N | clients/group | pool/group | healthy (s) | idle RSS total / max per group (MB) | after first write + search total / max (MB) | requests | statuses | database_busy | other 5xx | no answer | RSS after total / max (MB) | max connections in use | operator refused | lost |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.groups}${r.pgbouncer ? ' (PgBouncer)' : ''} | ${r.clients_per_group} | ${r.pool_per_group.join(',')} | ${f(r.healthy_s)} | ${f(r.idle_rss_mb.total)} / ${f(r.idle_rss_mb.per_group_max)} | ${f(r.first_use_rss_mb.total)} / ${f(r.first_use_rss_mb.per_group_max)} | ${r.requests} | ${Object.entries(
          r.statuses,
        )
          .map(([k, v]) => `${k}: ${v}`)
          .join(', ')} | ${r.database_busy} | ${r.other_5xx} | ${
          Object.entries(r.errors)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ') || 0
        } | ${f(r.rss_after_mb.total)} / ${f(r.rss_after_mb.per_group_max)} | ${r.max_connections_in_use} | ${r.operator.refused} of ${r.operator.attempts} | ${r.lost_processes} |`,
    ),
    '',
    '| N | ' + DENSITY_ROUTES.map((r) => `${r} ok / p50 / p95 (ms)`).join(' | ') + ' |',
    '|---|' + DENSITY_ROUTES.map(() => '---').join('|') + '|',
    ...results.map(
      (r) =>
        `| ${r.groups}${r.pgbouncer ? ' (PgBouncer)' : ''} | ` +
        DENSITY_ROUTES.map((x) => `${r.routes[x].ok}/${r.routes[x].requests} / ${f(r.routes[x].p50_ms)} / ${f(r.routes[x].p95_ms)}`).join(' | ') +
        ' |',
    ),
    '',
    ...results
      .filter((r) => r.pgbouncer)
      .slice(0, 1)
      .map(
        (r) =>
          `- (PgBouncer): each group provisioned its own role, then connected through a real PgBouncer (transaction pooling, ${r.pgbouncer!.pool_per_role} server connections per role, max_db_connections ${r.pgbouncer!.max_db_connections}); the pool/group column is then the pool towards PgBouncer, and "max connections in use" counts PgBouncer's server connections.`,
      ),
    ...results.filter((r) => r.operator.reasons.length).map((r) => `- N=${r.groups} operator refusals: ${r.operator.reasons.join('; ')}`),
  ];
  return lines.join('\n') + '\n';
}
