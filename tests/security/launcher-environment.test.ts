// What of the launcher's own shell reaches a group's process. PGPASSWORD there is the admin's
// password (postgres.js reads it when the admin URL names none); a group's process, running as the
// group's OS user or compromised, must not hold it: a group with its own role has its own password,
// and one sharing the URL's identity gets it inside its DATABASE_URL, a secret.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, test } from 'vitest';
import { readLauncherEnvironment } from '../../cli/environment.js';
import { withPassword } from '../../cli/roles.js';
import { api, cliEnv, createWorkspace, type Workspace } from '../launcher/helpers.js';

const ADMIN_PASSWORD = 'the-admins-password-from-the-shell';

const workspaces: Workspace[] = [];
afterAll(async () => {
  for (const ws of workspaces) {
    await ws.run(['stop', '--all']);
    await ws.cleanup();
  }
}, 120_000);

/** The variables a process was started with (/proc/<pid>/environ). */
const environOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');

describe("the launcher's PGPASSWORD never reaches a group's process", () => {
  for (const [mode, launcherEnv] of [
    ['a group with its own role', {}],
    ['a group sharing the URL identity (VCON_LAUNCH_ROLES=off)', { VCON_LAUNCH_ROLES: 'off', VCON_LAUNCH_ALLOW_SHARED_SUPERUSER: 'yes' }],
  ] as const) {
    test(`${mode}: not in its environment, and the group serves`, async () => {
      const ws = createWorkspace(['pw']);
      workspaces.push(ws);
      const env = { ...cliEnv(), ...launcherEnv, PGPASSWORD: ADMIN_PASSWORD, AN_OPERATOR_VARIABLE: 'kept' };
      const r = await ws.run(['start', '--group', 'pw', '--detach'], { env });
      expect(r.exitCode, r.stderr).toBe(0);
      const entry = ws.registry().pw;
      const vars = environOf(entry.pid);
      expect(vars.filter((v) => v.startsWith('PGPASSWORD='))).toEqual([]);
      // Sharing the admin's identity, the group has its password, in its DATABASE_URL (over IPC when
      // it runs as its own OS user); with a role of its own it has none of the admin's.
      const holding = vars.filter((v) => v.includes(ADMIN_PASSWORD)).map((v) => v.slice(0, v.indexOf('=')));
      expect(holding.filter((name) => !('VCON_LAUNCH_ROLES' in launcherEnv && name === 'DATABASE_URL'))).toEqual([]);
      // Other variables of the shell are inherited as before.
      expect(vars).toContain('AN_OPERATOR_VARIABLE=kept');
      const created = await api(`${entry.url}${entry.api_base_path}`, '/vcons', {
        method: 'POST',
        json: { vcon: '0.3.0', parties: [{ name: 'p' }] },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }, 120_000);
  }

  test('readLauncherEnvironment keeps PGPASSWORD for the launcher, out of what children inherit', () => {
    const launcher = readLauncherEnvironment({ PGPASSWORD: 'p', PATH: '/bin' });
    expect(launcher.pgPassword).toBe('p');
    expect(launcher.inherited).toEqual({ PATH: '/bin' });
  });

  test('VCON_LAUNCH_LOCK_WAIT_MS bounds the wait for the provisioning lock: 10 s unless set, and a clear error for a bad value', () => {
    expect(readLauncherEnvironment({}).lockWaitMs).toBe(10_000);
    expect(readLauncherEnvironment({ VCON_LAUNCH_LOCK_WAIT_MS: '2500' }).lockWaitMs).toBe(2_500);
    for (const bad of ['10s', '-1', '50', '1.5'])
      expect(() => readLauncherEnvironment({ VCON_LAUNCH_LOCK_WAIT_MS: bad })).toThrow(
        `VCON_LAUNCH_LOCK_WAIT_MS must be a whole number of milliseconds from 100 to 3600000, got "${bad}"`,
      );
  });

  test('withPassword puts the password into a URL that names none, and leaves one that does as it is', () => {
    expect(withPassword('postgres://admin@db:5432/x', 'p@ss/w')).toBe('postgres://admin:p%40ss%2Fw@db:5432/x');
    expect(withPassword('postgres://admin:own@db/x', 'other')).toBe('postgres://admin:own@db/x');
    expect(withPassword('postgres://admin@db/x', undefined)).toBe('postgres://admin@db/x');
  });
});
