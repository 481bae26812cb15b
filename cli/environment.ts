// The launcher's only reader of process.env (one reader of the environment per program): what children inherit, and the
// launcher's own DATABASE_URL. Group settings come from env files, never from the shell.
import { EnvSchema, type EnvInput } from '../src/config.js';
import { ADVISORY_LOCK_WAIT_MS } from '../src/db/advisory-lock.js';
import { UserError } from './errors.js';

export interface LauncherEnvironment {
  /** The launcher's environment minus every server variable, as the base of each child's env. */
  inherited: Record<string, string>;
  /** DATABASE_URL (or SUPABASE_DB_URL) of the launcher's shell: the default for groups that set none. */
  databaseUrl: string | undefined;
  /**
   * PGPASSWORD of the launcher's shell: the admin's password when its URL names none (postgres.js
   * reads it). Never inherited by a group's process: a group with its own role has its own
   * password, and one sharing the URL's identity gets it inside its DATABASE_URL (a secret).
   */
  pgPassword: string | undefined;
  /** Whether stderr is an interactive terminal (progress lines). */
  interactive: boolean;
  /** Per-group roles (default); VCON_LAUNCH_ROLES=off makes groups share the URL's user. */
  roles: boolean;
  /** VCON_LAUNCH_ALLOW_SHARED_SUPERUSER: groups may share a superuser connection on one database. */
  allowSharedSuperuser: boolean;
  /** VCON_LAUNCH_GROUP_USERS: each group's server as its own OS user (auto: when the launcher is root). */
  groupUsers: 'on' | 'off' | 'auto';
  /** VCON_LAUNCH_MAX_RESTARTS: consecutive failed restarts before a supervisor leaves an instance `crashed`. */
  maxRestarts?: number;
  /**
   * VCON_LAUNCH_LOCK_WAIT_MS: how long provisioning and removal wait for the launcher's provisioning
   * lock (one per database) before failing with the holder's pid, user and application name.
   */
  lockWaitMs: number;
}

const SERVER_VARIABLES = new Set(Object.keys(EnvSchema.shape));
/**
 * Variables of the launcher's shell no group inherits: PGPASSWORD is the admin's password, and a
 * group's process (as its own OS user, or compromised) would hold it in its environment.
 */
const NOT_INHERITED = new Set(['PGPASSWORD']);
const isOn = (v: string | undefined) => ['1', 'true', 'yes', 'on'].includes((v ?? '').trim().toLowerCase());
const isOff = (v: string | undefined) => ['0', 'false', 'no', 'off'].includes((v ?? '').trim().toLowerCase());

/**
 * A whole-number launcher variable within [min, max]; unset or empty gives `fallback`. `unit` names
 * what the number counts in the error ("milliseconds"), when it is not a plain count.
 */
function wholeNumberOf<T extends number | undefined>(
  name: string,
  raw: string | undefined,
  range: { min: number; max: number; unit?: string },
  fallback: T,
): number | T {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n < range.min || n > range.max)
    throw new UserError(`${name} must be a whole number${range.unit ? ` of ${range.unit}` : ''} from ${range.min} to ${range.max}, got "${raw}"`);
  return n;
}

/** Reads the launcher's own environment once; everything else receives the result. */
export function readLauncherEnvironment(env: EnvInput = process.env): LauncherEnvironment {
  const inherited: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    // A server variable in the operator's shell would silently apply to every group; the env files decide.
    if (v !== undefined && !SERVER_VARIABLES.has(k) && !NOT_INHERITED.has(k)) inherited[k] = v;
  }
  const databaseUrl = env.DATABASE_URL?.trim() || env.SUPABASE_DB_URL?.trim() || undefined;
  return {
    inherited,
    databaseUrl,
    pgPassword: env.PGPASSWORD || undefined,
    interactive: Boolean(process.stderr.isTTY),
    roles: !isOff(env.VCON_LAUNCH_ROLES),
    allowSharedSuperuser: isOn(env.VCON_LAUNCH_ALLOW_SHARED_SUPERUSER),
    groupUsers: isOn(env.VCON_LAUNCH_GROUP_USERS) ? 'on' : isOff(env.VCON_LAUNCH_GROUP_USERS) ? 'off' : 'auto',
    // Unset: the supervisor's default (one restart per backoff step).
    maxRestarts: wholeNumberOf('VCON_LAUNCH_MAX_RESTARTS', env.VCON_LAUNCH_MAX_RESTARTS, { min: 0, max: 1000 }, undefined),
    lockWaitMs: wholeNumberOf(
      'VCON_LAUNCH_LOCK_WAIT_MS',
      env.VCON_LAUNCH_LOCK_WAIT_MS,
      { min: 100, max: 3_600_000, unit: 'milliseconds' },
      ADVISORY_LOCK_WAIT_MS,
    ),
  };
}
