import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { spawnChild, type Child } from '../child.js';
import { openDatabases } from '../database.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { loadGroup, loadGroups, resolveDir, selectGroupNames, SHARED_FILE, type GroupSpec } from '../groups.js';
import { addGroupFlags, addInstancesDirFlag, type GroupFlags } from '../options.js';
import { commandHint, formatTable, note } from '../output.js';
import { createCredentialStore } from '../credentials.js';
import { packageRoot } from '../../src/paths.js';
import { ensureGroupUser, GROUP_USERS_VARIABLE, groupUsersEnabled, installUnreachableByOthers, type RunAs } from '../os-users.js';
import { spawnKeepingPort } from '../ports.js';
import { askSupervisor, ensureSupervisor, serveLauncherControl, type StartedInstance } from '../daemon.js';
import { createRegistry, instanceKey, type Registry } from '../registry.js';
import { prepareIdentities, type GroupIdentity } from '../roles.js';
import { createLinePrefixer, createSupervisor, entryOf, slotKey, type Slot } from '../supervisor.js';
import { MAX_REPLICAS, splitPool } from '../../src/config.js';
import { allocationIn, budgetFor, formatSplit, type ServerBudget } from '../budget.js';

/** Options of `vcon-launch start`. */
export interface StartOptions extends GroupFlags {
  instancesDir: string;
  detach?: boolean;
  /** Per-child readiness timeout. */
  timeoutMs?: number;
  /** Processes per group (default: each group's VCON_REPLICAS). */
  replicas?: string;
}

/** --replicas as a number, or undefined when absent. */
function parseReplicas(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < 1 || n > MAX_REPLICAS)
    throw new UserError(`--replicas must be a whole number from 1 to ${MAX_REPLICAS}, got "${raw}"`);
  return n;
}

/**
 * The child environment of one replica: a fixed MCP_HTTP_PORT P gives replicas P, P+1, ...; port 0
 * gives each a free port. Of several, each knows its number (its connections' application_name, so
 * its /health counts its own). Everything else (schema, keys, role) is the group's.
 */
function replicaEnv(env: Record<string, string>, spec: GroupSpec, replica: number, replicas: number): Record<string, string> {
  const port = spec.config.mcp.port;
  return {
    ...env,
    ...(port && replica > 1 ? { MCP_HTTP_PORT: String(port + replica - 1) } : {}),
    ...(replicas > 1 ? { VCON_REPLICA: String(replica) } : {}),
  };
}

const userOf = (label: string) => label.replace(/^[^@]*@/, '');

/**
 * Refuses groups that are already running, or whose schema a running group already uses. With
 * --all, running groups are left as they are and the others start ("make sure all are up").
 * Returns the groups to start.
 */
function checkAgainstRunning(specs: GroupSpec[], registry: Registry, opts: StartOptions): GroupSpec[] {
  const { live, down } = registry.list();
  const problems: string[] = [];
  const toStart: GroupSpec[] = [];
  for (const s of specs) {
    const same = live.find((e) => e.group === s.name);
    if (same) {
      if (opts.all) {
        note(`group ${s.name} is already running (pid ${same.pid} at ${same.url}); left as it is`);
        continue;
      }
      problems.push(
        `group ${s.name} is already running (pid ${same.pid} at ${same.url}); stop it first: ${commandHint(`stop --group ${s.name}`, opts.instancesDir)}`,
      );
      continue;
    }
    const clash = live.find((e) => e.schema === s.config.db.schema && userOf(e.database) === userOf(s.databaseLabel));
    if (clash) problems.push(`group ${s.name} would use schema "${clash.schema}", which running group ${clash.group} already serves`);
    toStart.push(s);
  }
  if (problems.length) throw new UserError(problems.join('\n'));
  // A crashed instance's entry (kept so status shows it) is replaced by this start.
  for (const e of down) if (toStart.some((s) => s.name === e.group)) registry.remove(instanceKey(e));
  return toStart;
}

/**
 * Each group's own OS user when groups run as their own users (made when missing), else
 * undefined. Warns about env files other users can read: they hold the group's keys.
 */
export async function groupUsersOf(specs: GroupSpec[], launcher: LauncherEnvironment): Promise<Map<string, RunAs> | undefined> {
  let why: string | undefined;
  const unreachable = () => (why = installUnreachableByOthers(packageRoot));
  if (!groupUsersEnabled(launcher, undefined, unreachable)) {
    if (why) {
      note(
        `groups run as the launcher's user, not each as its own (${why}): groups under one OS user trust each other's processes; ` +
          `install where other users can read it, or set ${GROUP_USERS_VARIABLE}=off to say so`,
      );
    }
    return undefined;
  }
  const out = new Map<string, RunAs>();
  for (const spec of specs) {
    out.set(spec.name, await ensureGroupUser(spec.name));
    const mode = statSync(spec.envFile).mode & 0o777;
    if (mode & 0o044)
      note(`group ${spec.name}: ${spec.envFile} is readable by other users (mode ${mode.toString(8)}), other groups' users included; chmod 600 it`);
  }
  // shared.env is every group's, and often holds the admin's DATABASE_URL: a group's user that reads it may connect as the admin.
  for (const file of new Set(specs.map((s) => path.join(path.dirname(s.envFile), SHARED_FILE)))) {
    const mode = existsSync(file) ? statSync(file).mode & 0o777 : 0;
    if (mode & 0o044)
      note(
        `${file} is readable by other users (mode ${mode.toString(8)}), every group's user included, and holds what every group shares (the admin's DATABASE_URL among it); chmod 600 it`,
      );
  }
  return out;
}

/** The table printed once every group is healthy. */
export function formatStartTable(
  rows: { group: string; label: string | null; schema: string; role: string; url: string; pid: number; pool: string }[],
): string {
  // `group` is the instance name: the group, or group@N for each replica.
  return formatTable(
    ['GROUP', 'LABEL', 'SCHEMA', 'ROLE', 'URL', 'PID', 'POOL'],
    rows.map((r) => [r.group, r.label, r.schema, r.role, r.url, r.pid, r.pool]),
  );
}

/**
 * Starts one vcon-server per group. Resolves with the exit code: detached, once every group is
 * healthy (children keep running); in the foreground, once the children have been stopped.
 */
export async function startGroups(opts: StartOptions, launcher: LauncherEnvironment): Promise<number> {
  const envDir = resolveDir(opts.envDir);
  const registry = createRegistry(resolveDir(opts.instancesDir));
  const replicasFlag = parseReplicas(opts.replicas);
  const specs = checkAgainstRunning(loadGroups(selectGroupNames(opts, envDir), envDir, launcher), registry, opts);
  if (!specs.length) {
    note('every group is already running');
    return 0;
  }
  for (const s of specs) for (const w of s.warnings) note(`group ${s.name}: warning: ${w}`);

  const t0 = Date.now();
  const runAs = await groupUsersOf(specs, launcher);
  const databases = await openDatabases(specs);
  let identities: Map<string, GroupIdentity>;
  let budgets: ServerBudget[] = [];
  const allocationOf = (name: string) => allocationIn(budgets, name)!;
  try {
    // The budget first: a start that cannot fit is refused before any role is provisioned.
    budgets = await budgetFor(specs, {
      urlOf: (s) => databases.urlOf(s),
      running: registry.list().live,
      replicasOf: (spec) => replicasFlag ?? spec.config.replicas,
    });
    // Foreground: the launcher holds the embedded cluster for its whole life and hands children a
    // URL on it. Detached: the launcher leaves, so each child joins the cluster itself (with its
    // role's name and password) and the last child to stop shuts it down.
    identities = await prepareIdentities(specs, databases, {
      store: createCredentialStore(registry.dir),
      launcher,
      // A group's own user cannot join the embedded cluster (its files are the launcher's): it gets a URL.
      detach: opts.detach && !runAs,
      analyzeConnectionsOf: (spec) => allocationOf(spec.name).analyze,
    });
  } catch (err) {
    await databases.release();
    throw err;
  }
  // Replicas of a group share its schema, role and keys; PostgreSQL is what they share (migrations
  // run once under the schema's advisory lock, whichever replica gets there first).
  const slots: Slot[] = specs.flatMap((spec) => {
    const identity = identities.get(spec.name)!;
    const env: Record<string, string> = { ...launcher.inherited, ...spec.env, ...identity.env };
    const { pool, analyze, serverKey } = allocationOf(spec.name);
    // The child splits these itself (config.db.pool): requests, index thread, analyze.
    env.DB_POOL_MAX = String(pool);
    env.DB_ANALYZE_CONNECTIONS = String(analyze);
    const replicas = replicasFlag ?? spec.config.replicas;
    return Array.from({ length: replicas }, (_, i) => ({
      spec,
      replica: i + 1,
      replicas,
      env: replicaEnv(env, spec, i + 1, replicas),
      role: identity.role,
      analyze,
      serverKey,
      runAs: runAs?.get(spec.name),
    }));
  });
  const prefix = createLinePrefixer(slots.map(slotKey));

  // What the table shows of each started instance.
  const shown = new Map<string, { label: string | null; schema: string; url: string; pid: number }>();
  if (opts.detach) {
    // The directory's supervisor spawns the children, so that it sees them exit and restarts them.
    let answer;
    try {
      await ensureSupervisor(registry.dir, launcher);
      answer = await askSupervisor<{ ok: true; started: StartedInstance[] } | { ok: false; errors: string[] }>(registry.dir, {
        type: 'start',
        envDir,
        launcher: { databaseUrl: launcher.databaseUrl, roles: launcher.roles },
        timeoutMs: opts.timeoutMs,
        slots: slots.map((s) => ({
          group: s.spec.name,
          replica: s.replica,
          replicas: s.replicas,
          env: s.env,
          role: s.role,
          analyze: s.analyze,
          serverKey: s.serverKey,
          runAs: s.runAs,
        })),
      });
    } catch (err) {
      answer = { ok: false as const, errors: [(err as Error).message] };
    }
    if (!answer?.ok) {
      await databases.release();
      const errors = answer?.errors ?? ['the supervisor went away before answering'];
      for (const e of errors) note(e);
      note(`${errors.length} of ${specs.length} group(s) failed to start; nothing is left running`);
      return 1;
    }
    for (const i of answer.started) shown.set(i.key, i);
  } else {
    let interrupted = false;
    const started: Child[] = [];
    const abortStart = () => {
      interrupted = true;
    };
    process.once('SIGINT', abortStart);
    process.once('SIGTERM', abortStart);
    const results = await Promise.allSettled(
      slots.map(async (slot) => {
        const spawnOpts = { env: slot.env, onLine: prefix(slotKey(slot)), timeoutMs: opts.timeoutMs, runAs: slot.runAs };
        // The port this instance had last time, when it is free: the URL an operator copied stays true.
        const child = await spawnKeepingPort(slot.spec, spawnOpts, registry.lastPort(slotKey(slot)), (o) => spawnChild(slot.spec, o));
        started.push(child);
        slot.child = child;
        registry.write(entryOf(slot, child, { supervisorPid: process.pid, logFile: null, mode: 'foreground' }));
        shown.set(slotKey(slot), child);
        return child;
      }),
    );
    process.off('SIGINT', abortStart);
    process.off('SIGTERM', abortStart);

    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    if (failures.length || interrupted) {
      // All or nothing: a half-started set of groups would be worse than none.
      await Promise.all(started.map((c) => c.stop()));
      for (const s of slots) registry.remove(slotKey(s));
      await databases.release();
      for (const f of failures) note(f instanceof UserError ? f.message : `unexpected error: ${f.stack ?? f.message}`);
      note(
        interrupted
          ? 'interrupted; every started group was stopped'
          : `${failures.length} of ${specs.length} group(s) failed to start; nothing is left running`,
      );
      return 1;
    }
  }

  const ms = Date.now() - t0;
  process.stdout.write(
    formatStartTable(
      slots.map((s) => {
        const a = allocationOf(s.spec.name);
        const pool = `${formatSplit(splitPool(a.pool, a.analyze))}${a.explicit ? '' : a.pooled ? ' (pgbouncer)' : ' (budget)'}`;
        const i = shown.get(slotKey(s))!;
        return { group: slotKey(s), label: i.label, schema: i.schema, role: s.role, url: i.url, pid: i.pid, pool };
      }),
    ) + '\n',
  );
  for (const b of budgets) {
    if (b.allocations.every((a) => a.pooled)) continue;
    if (b.unchecked) {
      note(`connection budget of server ${b.serverLabel} not checked: ${b.unchecked}`);
      continue;
    }
    const total = b.allocations.filter((a) => !a.pooled).reduce((n, a) => n + a.pool * a.replicas + a.analyze, 0);
    const analyze = b.allocations.find((a) => !a.pooled)?.analyze ?? 0;
    note(
      `connection budget of server ${b.serverLabel} (${b.databases.join(', ')}): ${total} for these groups (${analyze ? `pools + ${analyze} analyze connection each` : 'pools; no room for analyze connections: analyze answers 503 database_busy'}), ${b.held.reduce((n, h) => n + h.connections, 0)} for running groups, ` +
        `${b.others} held by other clients, of ${b.limits.maxConnections} (${b.limits.superuserReserved} superuser-reserved, ${b.reserve} kept for operators)`,
    );
  }
  const basePaths = new Set(specs.map((s) => s.config.rest.basePath));
  note(
    `${specs.length} group(s) healthy in ${(ms / 1000).toFixed(1)} s; REST under <URL>${basePaths.size === 1 ? [...basePaths][0] : '<REST_API_BASE_PATH>'}, MCP at <URL>/mcp`,
  );

  if (opts.detach) {
    // Children under their own users did not join the embedded cluster: it stays up while they run.
    if (runAs) for (const s of slots) if (databases.isEmbedded(s.spec)) databases.holdFor(s.spec, shown.get(slotKey(s))!.pid);
    // The children joined the embedded cluster themselves; leaving it does not stop it.
    await databases.release();
    note(`detached; supervised in the background; registry in ${registry.dir}; stop with: ${commandHint('stop --all', opts.instancesDir)}`);
    return 0;
  }

  const supervisor = createSupervisor(slots, {
    registry,
    prefix,
    baseEnv: launcher.inherited,
    mode: 'foreground',
    maxRestarts: launcher.maxRestarts,
  });
  let stopping: Promise<void> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      note(`${signal} again: killing the children now`);
      for (const s of slots) if (s.child) process.kill(s.child.pid, 'SIGKILL');
      return;
    }
    note(`${signal}: stopping ${specs.length} group(s)`);
    stopping = supervisor.stopAll();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // `vcon-launch reload` from another terminal reaches these groups here.
  const closeControl = await serveLauncherControl(registry.dir, supervisor, (current) =>
    loadGroup(current.name, path.dirname(current.envFile), launcher),
  ).catch((err: Error) => {
    note(`reload will not reach these groups: ${err.message}`);
    return () => undefined;
  });
  note('supervising; Ctrl-C stops every group');
  await supervisor.done;
  await stopping;
  closeControl();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  await databases.release();
  note('all groups stopped');
  return 0;
}

/** Wires `vcon-launch start`. */
export function registerStart(program: Command): void {
  const cmd = program
    .command('start')
    .description('start one vcon-server per group and wait until each /health answers')
    .option('--detach', 'leave the groups running in the background and exit once all are healthy')
    .option('--replicas <n>', "processes per group, each on its own port (default: the group's VCON_REPLICAS, 1)");
  addGroupFlags(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: StartOptions) => {
    process.exitCode = await startGroups(opts, readLauncherEnvironment());
  });
}
