import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { EnvSchema } from '../../src/config.js';
import { adminPowers, groupRoleNames, openAdmin, userOfUrl, type AdminPowers } from '../../src/db/roles.js';
import { readEnvFile } from '../env-files.js';
import { readLauncherEnvironment, type LauncherEnvironment } from '../environment.js';
import { UserError } from '../errors.js';
import { findCollisions, GroupConfigError, loadGroup, resolveDir, SHARED_FILE, type GroupSpec } from '../groups.js';
import { ROLES_VARIABLE } from '../roles.js';
import { addEnvDirFlag } from '../options.js';

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
  const files = readdirSync(envDir).filter((f) => f.endsWith('.env')).sort();
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
  const probes = new Map<string, Promise<AdminPowers | Error>>();
  for (const f of files.filter((f) => f !== SHARED_FILE)) {
    const name = f.slice(0, -'.env'.length);
    try {
      const spec = loadGroup(name, envDir, launcher);
      if (f !== EXAMPLE_FILE) groups.push(spec);
      const port = spec.config.mcp.port === 0 ? 'any free port' : `port ${spec.config.mcp.port}`;
      const identity = f === EXAMPLE_FILE ? undefined : await identityOf(spec, launcher, probes);
      results.push({
        subject: spec.envFile,
        ok: true,
        problems: [],
        warnings: [...spec.unknownVariables.map((v) => `${v} is not a variable the server reads (typo?)`), ...(identity?.warning ? [identity.warning] : [])],
        summary:
          f === EXAMPLE_FILE
            ? 'documentation (not a group); its values are valid'
            : `schema ${spec.config.db.schema}, label ${spec.config.label}, ${port}, database ${spec.databaseLabel}, ${identity!.summary}`,
      });
    } catch (err) {
      if (!(err instanceof GroupConfigError)) throw err;
      for (const p of err.problems) results.push({ subject: p.subject, ok: false, problems: p.messages, warnings: [] });
    }
  }
  for (const c of findCollisions(groups)) results.push({ subject: c.subject, ok: false, problems: c.messages, warnings: [] });
  return results;
}

/**
 * Who a group will connect as, the way `start` decides it: its own role when the database URL's
 * user may create roles (the embedded database always), otherwise the URL's user, shared.
 */
async function identityOf(
  spec: GroupSpec,
  launcher: Pick<LauncherEnvironment, 'roles'>,
  probes: Map<string, Promise<AdminPowers | Error>>,
): Promise<{ summary: string; warning?: string }> {
  const { role } = groupRoleNames(spec.config.db.schema);
  const shared = (user: string, why: string) => ({
    summary: `connects as ${user} (shared)`,
    warning: `groups on this database share one identity (${why}): isolation rests on the application only`,
  });
  if (!spec.databaseUrl) return launcher.roles ? { summary: `own role ${role}` } : shared('postgres', `${ROLES_VARIABLE}=off`);
  const user = userOfUrl(spec.databaseUrl);
  if (user === role) return { summary: `own role ${role} (provisioned)` };
  if (!launcher.roles) return shared(user, `${ROLES_VARIABLE}=off`);
  const url = spec.databaseUrl;
  if (!probes.has(url)) {
    probes.set(url, (async () => {
      const admin = openAdmin(url);
      try {
        return await adminPowers(admin);
      } catch (err) {
        return err as Error;
      } finally {
        await admin.end({ timeout: 2 });
      }
    })());
  }
  const powers = await probes.get(url)!;
  if (powers instanceof Error) return { summary: `role unknown`, warning: `could not reach the database to tell whether ${user} may create roles: ${powers.message}` };
  if (!powers.createRole) return shared(user, `${user} may not create roles`);
  return { summary: `own role ${role}` };
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

/** Wires `vcon-launch check`. */
export function registerCheck(program: Command): void {
  const cmd = program.command('check').description('validate every env file without starting anything');
  addEnvDirFlag(cmd);
  cmd.action(async (opts: { envDir: string }) => {
    const results = await checkEnvDir(resolveDir(opts.envDir), readLauncherEnvironment());
    if (!results.length) throw new UserError(`no .env files in ${resolveDir(opts.envDir)}`);
    process.stdout.write(formatCheck(results) + '\n');
    const failed = results.filter((r) => !r.ok).length;
    process.stdout.write(failed ? `${failed} problem(s) found\n` : `all ${results.length} file(s) valid\n`);
    process.exitCode = failed ? 1 : 0;
  });
}
