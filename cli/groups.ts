// Group definitions: env/<group>.env over env/shared.env, validated with the server's own schema.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, EnvSchema, parseConfig, type Config, type EnvInput } from '../src/config.js';
import { schemaNameConflict, userOfUrl } from '../src/db/roles.js';
import { readEnvFile } from './env-files.js';
import { UserError } from './errors.js';
import type { LauncherEnvironment } from './environment.js';

/** Files in the env directory that are not groups. */
export const SHARED_FILE = 'shared.env';
const NOT_GROUPS = new Set([SHARED_FILE, 'example.env']);
const GROUP_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const KNOWN_VARIABLES = new Set(Object.keys(EnvSchema.shape));

export interface GroupSpec {
  name: string;
  /** Absolute path of env/<name>.env. */
  envFile: string;
  /** The child's server variables: shared < group file, plus the launcher's defaults. */
  env: Record<string, string>;
  config: Config;
  /** Where the group's data lives: a database URL, or undefined for the shared embedded cluster. */
  databaseUrl: string | undefined;
  /** host:port/db (or embedded:<dir>): two groups on the same key share one database. */
  databaseKey: string;
  /**
   * host:port (or embedded:<dir> until the cluster runs): groups on the same key share one
   * server's max_connections, whatever their database.
   */
  serverKey: string;
  /** For people and the registry: user@host:port/db, never the password. */
  databaseLabel: string;
  /** Valid but probably not what the operator meant (unknown variables, no API key, …). */
  warnings: string[];
}

export interface GroupProblem {
  /** The file (or the groups) the problem is about. */
  subject: string;
  messages: string[];
}

/** Thrown when one or more env files are invalid; names every problem, file by file. */
export class GroupConfigError extends UserError {
  constructor(readonly problems: GroupProblem[]) {
    super(problems.map((p) => `${p.subject}:\n${p.messages.map((m) => `  - ${m}`).join('\n')}`).join('\n'), 2);
  }
}

/** Resolves a directory flag against the current directory (absolute paths pass through). */
export const resolveDir = (dir: string, cwd = process.cwd()) => path.resolve(cwd, dir);

/** The group names defined in an env directory (every *.env except shared.env and example.env). */
export function listGroupNames(envDir: string): string[] {
  if (!existsSync(envDir)) throw new UserError(`env directory ${envDir} does not exist`);
  return readdirSync(envDir)
    .filter((f) => f.endsWith('.env') && !NOT_GROUPS.has(f))
    .map((f) => f.slice(0, -'.env'.length))
    .sort();
}

/** Names of this machine's loopback interface: one server answers on all of them. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Parses a postgres URL into the keys that identify its database and its server (host:port, the
 * loopback's names taken as one), its database name and a password-free label.
 */
export function describeDatabase(url: string): { key: string; server: string; name: string; label: string } {
  try {
    const u = new URL(url);
    const host = (u.hostname || 'localhost').toLowerCase();
    const port = u.port || '5432';
    const user = decodeURIComponent(u.username) || 'postgres';
    const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || user;
    const server = `${LOOPBACK.has(host) ? '127.0.0.1' : host}:${port}`;
    return { key: `${host}:${port}/${db}`, server, name: db, label: `${user}@${host}:${port}/${db}` };
  } catch {
    return { key: url, server: url, name: '', label: '(unparseable URL)' };
  }
}

/**
 * Builds one group's child environment and validates it. Throws GroupConfigError naming the file
 * and every bad variable.
 */
export function loadGroup(
  name: string,
  envDir: string,
  launcher: Pick<LauncherEnvironment, 'databaseUrl'> & Partial<Pick<LauncherEnvironment, 'roles'>>,
): GroupSpec {
  if (!GROUP_NAME.test(name)) {
    throw new GroupConfigError([{ subject: `group "${name}"`, messages: ['a group name uses letters, digits, _, . and -'] }]);
  }
  const envFile = path.join(envDir, `${name}.env`);
  if (!existsSync(envFile)) {
    const known = existsSync(envDir) ? listGroupNames(envDir) : [];
    throw new GroupConfigError([{ subject: envFile, messages: [`no such file; known groups: ${known.length ? known.join(', ') : '(none)'}`] }]);
  }
  const sharedFile = path.join(envDir, SHARED_FILE);
  const fileEnv: EnvInput = { ...readEnvFile(sharedFile), ...readEnvFile(envFile) };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(fileEnv)) if (v !== undefined) env[k] = v;
  // The child gets its whole environment from us; an ENV_FILE would layer another file under it unseen.
  delete env.ENV_FILE;
  if (!env.SUPABASE_DB_SCHEMA?.trim()) env.SUPABASE_DB_SCHEMA = name;
  if (!env.VCON_INSTANCE_LABEL?.trim()) env.VCON_INSTANCE_LABEL = name;
  const fileTransport = env.MCP_TRANSPORT?.trim().toLowerCase();
  // The launcher serves every group over HTTP, but a transport the server itself would refuse is
  // still a mistake in the file: judge the file's value with the server's own rule first.
  const transport = EnvSchema.shape.MCP_TRANSPORT.safeParse(env.MCP_TRANSPORT);
  const problems = transport.success ? [] : transport.error.issues.map((i) => `MCP_TRANSPORT: ${i.message}`);
  env.MCP_TRANSPORT = 'http';
  if (!env.MCP_HTTP_PORT?.trim()) env.MCP_HTTP_PORT = '0';
  if (!env.DATABASE_URL?.trim() && !env.SUPABASE_DB_URL?.trim() && launcher.databaseUrl) env.DATABASE_URL = launcher.databaseUrl;
  let config: Config | undefined;
  try {
    config = parseConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems.map((p) => `${p.variable}: ${p.message}`));
  }
  // A schema named like the URL's user (or postgres, or a launcher role) is "$user" on that role's
  // default search_path: refused before anything connects (start and check also refuse any role's name).
  const conflict = config && schemaNameConflict(config.db.schema, config.db.url ? userOfUrl(config.db.url) : 'postgres');
  if (conflict) problems.push(`SUPABASE_DB_SCHEMA: schema ${config!.db.schema} cannot hold a group: ${conflict}; choose another name`);
  // public is every application's schema: a group there would run as the launcher's own user (no
  // role can own public for one group) beside other applications' tables. Only with roles off,
  // where every group shares the URL's identity anyway, is it the operator's choice.
  if (config?.db.schema === 'public' && launcher.roles !== false) {
    problems.push(
      `SUPABASE_DB_SCHEMA: schema public cannot hold a group: it is shared by every application of the database, and no role can own it for one group; choose another name (or set VCON_LAUNCH_ROLES=off and accept a shared identity)`,
    );
  }
  if (!config || problems.length) throw new GroupConfigError([{ subject: envFile, messages: problems }]);
  const databaseUrl = config.db.url;
  const unknownVariables = Object.keys(fileEnv).filter((k) => !KNOWN_VARIABLES.has(k));
  const db = databaseUrl
    ? describeDatabase(databaseUrl)
    : { key: `embedded:${config.dataDir}`, server: `embedded:${config.dataDir}`, label: 'embedded' };
  return {
    name,
    envFile,
    env,
    config,
    databaseUrl,
    databaseKey: db.key,
    serverKey: db.server,
    databaseLabel: db.label,
    warnings: [
      ...unknownVariables.map((v) => `${v} is not a variable the server reads (typo?)`),
      ...(fileTransport === 'stdio' ? ['MCP_TRANSPORT=stdio is ignored: the launcher serves every group over HTTP (MCP at <URL>/mcp)'] : []),
      ...(config.auth.required && !config.auth.keys.length && !config.auth.readOnlyKeys.length
        ? ['API_KEYS is empty and API_AUTH_REQUIRED is on: every route that needs a key will answer 503 auth_not_configured']
        : []),
    ],
  };
}

/** Problems between groups that would make them collide: one schema twice on a database, one fixed port twice. */
export function findCollisions(specs: GroupSpec[]): GroupProblem[] {
  const problems: GroupProblem[] = [];
  const bySchema = new Map<string, GroupSpec[]>();
  const byPort = new Map<number, GroupSpec[]>();
  for (const s of specs) {
    const k = `${s.databaseKey}\u0000${s.config.db.schema}`;
    bySchema.set(k, [...(bySchema.get(k) ?? []), s]);
    if (s.config.mcp.port !== 0) byPort.set(s.config.mcp.port, [...(byPort.get(s.config.mcp.port) ?? []), s]);
  }
  for (const group of bySchema.values()) {
    if (group.length < 2) continue;
    problems.push({
      subject: `groups ${group.map((g) => g.name).join(', ')}`,
      messages: [
        `SUPABASE_DB_SCHEMA: all use schema "${group[0].config.db.schema}" on database ${group[0].databaseLabel}; each group needs its own schema`,
      ],
    });
  }
  for (const [port, group] of byPort) {
    if (group.length < 2) continue;
    problems.push({
      subject: `groups ${group.map((g) => g.name).join(', ')}`,
      messages: [`MCP_HTTP_PORT: all listen on port ${port}; give each group its own port, or 0 for any free port`],
    });
  }
  return problems;
}

/** Selects groups from --group/--all flags. */
export function selectGroupNames(opts: { group?: string[]; all?: boolean }, envDir: string): string[] {
  const named = opts.group ?? [];
  if (opts.all && named.length) throw new UserError('use either --group NAME or --all, not both');
  if (opts.all) {
    const names = listGroupNames(envDir);
    if (!names.length) throw new UserError(`no group env files in ${envDir} (expected NAME.env files)`);
    return names;
  }
  if (!named.length) throw new UserError('name the groups with --group NAME (repeatable) or use --all');
  return [...new Set(named)];
}

/**
 * Loads and validates several groups together: every bad file and every collision is reported at
 * once, before anything starts.
 */
export function loadGroups(
  names: string[],
  envDir: string,
  launcher: Pick<LauncherEnvironment, 'databaseUrl'> & Partial<Pick<LauncherEnvironment, 'roles'>>,
): GroupSpec[] {
  const specs: GroupSpec[] = [];
  const problems: GroupProblem[] = [];
  for (const name of names) {
    try {
      specs.push(loadGroup(name, envDir, launcher));
    } catch (err) {
      if (err instanceof GroupConfigError) problems.push(...err.problems);
      else throw err;
    }
  }
  problems.push(...findCollisions(specs));
  if (problems.length) throw new GroupConfigError(problems);
  return specs;
}
