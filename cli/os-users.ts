// Each group's server as its own unprivileged OS user, when the launcher runs as root: a group's
// process then cannot read another group's /proc/<pid>/environ or memory, its credentials file or
// the embedded database's superuser password (all of them the launcher's, mode 0600).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { LauncherEnvironment } from './environment.js';
import { UserError } from './errors.js';

const run = promisify(execFile);

/** The launcher variable: on (the default as root), off (the default otherwise). */
export const GROUP_USERS_VARIABLE = 'VCON_LAUNCH_GROUP_USERS';

/** The OS identity a group's server runs as. */
export interface RunAs {
  user: string;
  uid: number;
  gid: number;
}

/**
 * Why another user could not run this install, or undefined when it can: every directory from the
 * root down to the package and to Node's binary must let others through, and the compiled server
 * be readable by them (a clone under /root, mode 0700, is not).
 */
export function installUnreachableByOthers(packageRoot: string, nodeBinary = process.execPath): string | undefined {
  const through = (file: string): string | undefined => {
    for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
      if (!(statSync(dir).mode & constants.S_IXOTH)) return `${dir} does not let other users through`;
      if (dir === path.dirname(dir)) return undefined;
    }
  };
  const server = path.join(packageRoot, 'dist', 'src', 'main.js');
  try {
    const why = through(server) ?? through(nodeBinary);
    if (why) return why;
    if (!(statSync(server).mode & constants.S_IROTH)) return `${server} is not readable by other users`;
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * Whether groups run as their own users; refuses `on` where the launcher cannot switch users.
 * `auto` (the default): as root, when the install is reachable by other users (`unreachable`
 * gives why not; the caller says that groups then share the launcher's user).
 */
export function groupUsersEnabled(
  launcher: Pick<LauncherEnvironment, 'groupUsers'>,
  isRoot = process.getuid?.() === 0,
  unreachable: () => string | undefined = () => undefined,
): boolean {
  if (launcher.groupUsers === 'auto') return isRoot && unreachable() === undefined;
  if (launcher.groupUsers === 'on' && !isRoot) {
    throw new UserError(
      `${GROUP_USERS_VARIABLE}=on needs the launcher to run as root (it creates a user per group and runs each group's server as it)`,
    );
  }
  return launcher.groupUsers === 'on';
}

/**
 * The system user of a group: vcon-<group> (lower case, other characters as '-'), shortened with a
 * hash when that would not fit useradd's 32 characters or would lose what told two names apart.
 */
export function osUserName(group: string): string {
  const base = group.toLowerCase().replace(/[^a-z0-9_-]/g, '-');
  const name = `vcon-${base}`;
  if (name.length <= 32 && base === group) return name;
  return `vcon-${base.slice(0, 17)}-${createHash('sha256').update(group).digest('hex').slice(0, 8)}`;
}

async function lookup(user: string): Promise<RunAs | undefined> {
  try {
    const { stdout: uid } = await run('id', ['-u', user]);
    const { stdout: gid } = await run('id', ['-g', user]);
    return { user, uid: Number(uid.trim()), gid: Number(gid.trim()) };
  } catch {
    return undefined;
  }
}

/** The group's system user, created (no home, no login shell, its own group) when missing. */
export async function ensureGroupUser(group: string): Promise<RunAs> {
  const user = osUserName(group);
  const found = await lookup(user);
  if (found) return found;
  let why = '';
  // Launchers starting at once race: the loser's useradd fails (user exists, or /etc/passwd is
  // locked for a moment) and the next lookup or attempt succeeds.
  for (let attempt = 0; attempt < 20; attempt++) {
    why = await run('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      '/nonexistent',
      '--shell',
      '/usr/sbin/nologin',
      user,
    ]).then(
      () => '',
      (err: Error & { stderr?: string }) => err.stderr?.trim() || err.message,
    );
    const created = await lookup(user);
    if (created) return created;
    await sleep(100);
  }
  throw new UserError(
    `group ${group}: cannot create its system user ${user} (${why}); set ${GROUP_USERS_VARIABLE}=off to run groups as the launcher's user`,
  );
}
