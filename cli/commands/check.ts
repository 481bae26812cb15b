import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { EnvSchema, splitPool } from '../../src/config.js';
import {
  adminPowers,
  currentDatabase,
  describeRoleConflict,
  groupRoleNames,
  openAdmin,
  publicDatabaseGrants,
  roleMarkers,
  userOfUrl,
  type AdminPowers,
} from '../../src/db/roles.js';
import { readEnvFile } from '../env-files.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { findCollisions, GroupConfigError, loadGroup, resolveDir, SHARED_FILE, type GroupSpec } from '../groups.js';
import { groupRoleNamesOf, ROLES_VARIABLE } from '../roles.js';
import { addEnvDirFlag, addInstancesDirFlag } from '../options.js';
import { createRegistry, type RegistryEntry } from '../registry.js';
import { formatSplit, planGroups } from '../budget.js';

/** The verdict on one env file (or on a collision between groups). */
export interface CheckResult {
  subject: string;
  ok: boolean;
  problems: string[];
  warnings: string[];
  /** For a valid group file: what it resolves to. */
  summary?: string;
}

const EXAMPLE_FILE = 'example.env';

/**
 * Validates every env file of a directory as the launcher would at start (each group file over
 * shared.env, with the same defaults), plus the collisions between groups. Starts nothing.
 */
export async function checkEnvDir(envDir: string, launcher: Pick<LauncherEnvironment, 'databaseUrl' | 'roles'>): Promise<CheckResult[]> {
  if (!existsSync(envDir)) throw new UserError(`env directory ${envDir} does not exist`);
  const files = readdirSync(envDir)
    .filter((f) => f.endsWith('.env'))
    .sort();
  const results: CheckResult[] = [];
  const known = new Set(Object.keys(EnvSchema.shape));
  if (files.includes(SHARED_FILE)) {
    const vars = Object.keys(readEnvFile(path.join(envDir, SHARED_FILE)));
    const unknown = vars.filter((v) => !known.has(v));
    results.push({
      subject: path.join(envDir, SHARED_FILE),
      ok: true,
      problems: [],
      warnings: unknown.map((v) => `${v} is not a variable the server reads (typo?)`),
      summary: `shared by every group (${vars.length} variable(s))`,
    });
  }
  const groups: GroupSpec[] = [];
  const probes = new Map<string, Promise<Probe | Error>>();
  for (const f of files.filter((f) => f !== SHARED_FILE)) {
    const name = f.slice(0, -'.env'.length);
    try {
      const spec = loadGroup(name, envDir, launcher);
      if (f !== EXAMPLE_FILE) groups.push(spec);
      const port = spec.config.mcp.port === 0 ? 'any free port' : `port ${spec.config.mcp.port}`;
      const identity = f === EXAMPLE_FILE ? undefined : await identityOf(spec, launcher, probes);
      results.push({
        subject: spec.envFile,
        ok: !identity?.problems?.length,
        problems: identity?.problems ?? [],
        warnings: [...spec.warnings, ...(identity?.warning ? [identity.warning] : [])],
        summary:
          f === EXAMPLE_FILE
            ? 'documentation (not a group); its values are valid'
            : `schema ${spec.config.db.schema}, label ${spec.config.label}, ${port}, database ${spec.databaseLabel}, ${identity!.summary}`,
      });
    } catch (err) {
      if (!(err instanceof GroupConfigError)) throw err;
      // Typos are often the cause of the errors: shown beside them, not only once the file is valid.
      const file = path.join(envDir, f);
      for (const p of err.problems)
        results.push({
          subject: p.subject,
          ok: false,
          problems: p.messages,
          warnings: p.subject === file ? unknownVariablesOf(envDir, file, known) : [],
        });
    }
  }
  for (const c of findCollisions(groups)) results.push({ subject: c.subject, ok: false, problems: c.messages, warnings: [] });
  results.push(...(await publicGrantWarnings(probes)));
  return results;
}

/** The warnings loadGroup gives for variables the server does not read (group file over shared.env). */
function unknownVariablesOf(envDir: string, file: string, known: Set<string>): string[] {
  const shared = path.join(envDir, SHARED_FILE);
  const vars = Object.keys({ ...(existsSync(shared) ? readEnvFile(shared) : {}), ...readEnvFile(file) });
  return vars.filter((v) => !known.has(v)).map((v) => `${v} is not a variable the server reads (typo?)`);
}

/** What `check` reads once per database URL: who the URL's user is, and the server's roles and grants. */
interface Probe {
  powers: AdminPowers;
  database: string;
  /** Every role on the server, with its comment (the launcher's marker on its own roles). */
  markers: Map<string, string | null>;
  /** Databases on which PUBLIC holds CONNECT or TEMPORARY. */
  publicGrants: { database: string; privileges: string[] }[];
  label: string;
}

async function probeDatabase(url: string, label: string): Promise<Probe | Error> {
  const admin = openAdmin(url);
  try {
    const powers = await adminPowers(admin);
    return {
      powers,
      database: await currentDatabase(admin),
      markers: await roleMarkers(admin),
      publicGrants: await publicDatabaseGrants(admin),
      label,
    };
  } catch (err) {
    return err as Error;
  } finally {
    await admin.end({ timeout: 2 });
  }
}

/**
 * PUBLIC's default CONNECT and TEMPORARY on a database reach every role, the groups' included:
 * a group's role (or its leaked password) can connect there and create temporary tables, whatever
 * the launcher grants or revokes on the role itself. The launcher leaves database-wide grants
 * alone; `check` names the databases and the statements that take them away.
 */
async function publicGrantWarnings(probes: Map<string, Promise<Probe | Error>>): Promise<CheckResult[]> {
  const servers = new Map<string, Probe>();
  for (const p of await Promise.all(probes.values())) {
    if (p instanceof Error || !p.powers.createRole || !p.publicGrants.length) continue;
    servers.set(p.label.replace(/\/[^/]*$/, ''), p);
  }
  return [...servers].map(([server, p]) => ({
    subject: `PostgreSQL server ${server}`,
    ok: true,
    problems: [],
    warnings: [
      `PUBLIC holds ${p.publicGrants.map((g) => `${g.privileges.join(' and ')} on database ${g.database}`).join(', ')}: ` +
        'every role, each group role included, may connect to those databases and create temporary tables there. To take that away, run as a superuser: ' +
        p.publicGrants.map((g) => `revoke connect, temporary on database ${quoteIdent(g.database)} from public;`).join(' ') +
        ' then grant connect on database <db> to each other role that needs it (the launcher grants each group role CONNECT on its own database itself)',
    ],
  }));
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Who a group will connect as, the way `start` decides it: its own role when the database URL's
 * user may create roles (the embedded database always), otherwise the URL's user, shared. With a
 * URL it also refuses what `start` would: a schema named like a role on the server, and a role
 * under the group's names that is not the launcher's for this group.
 */
async function identityOf(
  spec: GroupSpec,
  launcher: Pick<LauncherEnvironment, 'roles'>,
  probes: Map<string, Promise<Probe | Error>>,
): Promise<{ summary: string; warning?: string; problems?: string[] }> {
  const schema = spec.config.db.schema;
  const shared = (user: string, why: string) => ({
    summary: `connects as ${user} (shared)`,
    warning: `groups on this database share one identity (${why}): isolation rests on the application only`,
  });
  // The embedded cluster's database is postgres (src/db/embedded.ts).
  if (!spec.databaseUrl)
    return launcher.roles ? { summary: `own role ${groupRoleNames('postgres', schema).role}` } : shared('postgres', `${ROLES_VARIABLE}=off`);
  const { role } = groupRoleNamesOf(spec, spec.databaseUrl);
  const user = userOfUrl(spec.databaseUrl);
  if (user === role) return { summary: `own role ${role} (provisioned)` };
  if (user === `vcon_${schema}`) {
    return {
      summary: `role ${user} of an older vcon-launch`,
      problems: [
        `DATABASE_URL: connects as ${user}, the role name an older vcon-launch gave this group (now ${role}): run vcon-launch provision --group ${spec.name} --admin-url postgres://ADMIN@HOST/DB`,
      ],
    };
  }
  const url = spec.databaseUrl;
  if (!probes.has(url)) probes.set(url, probeDatabase(url, spec.databaseLabel));
  const probe = await probes.get(url)!;
  if (probe instanceof Error) {
    // `start` would fail on it: not checked is not valid.
    const unreachable = `DATABASE_URL: cannot reach the database ${spec.databaseLabel}: ${probe.message}`;
    if (!launcher.roles) return { ...shared(user, `${ROLES_VARIABLE}=off`), problems: [unreachable] };
    return { summary: `role unknown`, problems: [unreachable] };
  }
  const problems: string[] = [];
  if (probe.markers.has(schema)) {
    problems.push(
      `SUPABASE_DB_SCHEMA: schema ${schema} is the name of a role on this server; a schema named like a role is "$user" on that role's default search_path: choose another name`,
    );
  }
  if (!launcher.roles) return { ...shared(user, `${ROLES_VARIABLE}=off`), problems };
  if (!probe.powers.createRole) return { ...shared(user, `${user} may not create roles`), problems };
  const names = groupRoleNames(probe.database, schema);
  const conflict = describeRoleConflict(probe.markers, probe.database, schema, names);
  if (conflict) problems.push(conflict);
  return { summary: `own role ${names.role}`, problems };
}

/**
 * The connection budget of every group of the directory started together, per server: per group
 * its pool split and the connections it holds now, and a failed result naming groups and numbers
 * when they cannot fit. A server that cannot be reached is a warning (nothing is started).
 */
export async function checkBudget(
  envDir: string,
  launcher: Pick<LauncherEnvironment, 'databaseUrl'>,
  running: RegistryEntry[] = [],
): Promise<CheckResult[]> {
  const groups: GroupSpec[] = [];
  for (const name of readdirSync(envDir).filter((f) => f.endsWith('.env') && f !== SHARED_FILE && f !== EXAMPLE_FILE)) {
    try {
      groups.push(loadGroup(name.slice(0, -'.env'.length), envDir, launcher));
    } catch {
      /* already reported by checkEnvDir */
    }
  }
  // The directory's groups are placed as if started together; running groups of another env
  // directory (same registry) hold what they were handed.
  const own = new Set(groups.map((g) => g.name));
  const budgets = await planGroups(groups, { running: running.filter((e) => !own.has(e.group)) });
  const out: CheckResult[] = [];
  for (const b of budgets) {
    const subject = `connection budget of server ${b.serverLabel}`;
    if (b.unchecked) {
      out.push({
        subject,
        ok: false,
        problems: [`cannot reach the server to read max_connections (${b.unchecked}): the budget is not checked, and its groups would not start`],
        warnings: [],
      });
      continue;
    }
    const rows = b.allocations.map((a) => {
      const how = a.pooled ? 'through PgBouncer' : a.explicit ? 'DB_POOL_MAX' : 'budget share';
      const noRoom = a.analyze || a.pooled ? '' : '; no room for analyze: it answers database_busy';
      return `${a.group}: pool ${formatSplit(splitPool(a.pool, a.analyze))}${a.replicas > 1 ? ` × ${a.replicas} replicas` : ''} (${how}${noRoom}), ${b.current[a.group] ?? 0} connection(s) held now`;
    });
    const total = b.allocations.filter((a) => !a.pooled).reduce((n, a) => n + a.pool * a.replicas + a.analyze, 0);
    out.push({
      subject,
      ok: !b.refusal,
      problems: b.refusal ? [b.refusal] : [],
      warnings: [],
      summary: b.allocations.every((a) => a.pooled)
        ? `every group connects through PgBouncer\n        ${rows.join('\n        ')}`
        : `${total} of ${b.limits.maxConnections} connections for ${b.allocations.length} group(s) on ${b.databases.join(', ')} ` +
          `(${b.limits.superuserReserved} superuser-reserved, ${b.reserve} kept for operators, ${b.others} held by other clients)\n        ${rows.join('\n        ')}`,
    });
  }
  return out;
}

/** Formats check results for people: one line per file, its problems and warnings indented. */
export function formatCheck(results: CheckResult[]): string {
  return results
    .map((r) =>
      [
        `${r.ok ? 'ok  ' : 'FAIL'}  ${r.subject}${r.summary ? `: ${r.summary}` : ''}`,
        ...r.problems.map((p) => `        - ${p}`),
        ...r.warnings.map((w) => `        warning: ${w}`),
      ].join('\n'),
    )
    .join('\n');
}

/** The last line of `check`: problems and warnings counted one by one, not by file. */
export function formatVerdict(results: CheckResult[]): string {
  const problems = results.reduce((n, r) => n + r.problems.length, 0);
  const warnings = results.reduce((n, r) => n + r.warnings.length, 0);
  const warned = warnings ? `, ${warnings} warning(s)` : '';
  if (!problems) return `all ${results.length} file(s) valid${warned}`;
  const failed = results.filter((r) => !r.ok).length;
  return `${problems} problem(s) in ${failed} file(s) or group set(s)${warned}`;
}

/** Wires `vcon-launch check`. */
export function registerCheck(program: Command): void {
  const cmd = program.command('check').description('validate every env file without starting anything; exits non-zero when start would refuse');
  addEnvDirFlag(cmd);
  addInstancesDirFlag(cmd);
  cmd.action(async (opts: { envDir: string; instancesDir: string }) => {
    const envDir = resolveDir(opts.envDir);
    const launcher = readLauncherEnvironment();
    const results = await checkEnvDir(envDir, launcher);
    if (!results.length) throw new UserError(`no .env files in ${envDir}`);
    const budget = await checkBudget(envDir, launcher, createRegistry(resolveDir(opts.instancesDir)).list().live);
    const all = [...results, ...budget];
    process.stdout.write(formatCheck(all) + '\n');
    const failed = all.some((r) => !r.ok);
    process.stdout.write((failed ? formatVerdict(all) : `${formatVerdict(results)}; the groups fit the connection budget`) + '\n');
    process.exitCode = failed ? 1 : 0;
  });
}
