// Whether the launcher may run each group as its own OS user: only where other users can reach
// the install (a clone under a 0700 home cannot be run by them), and never by default when not root.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { groupUsersEnabled, installUnreachableByOthers } from '../../cli/os-users.js';

const base = mkdtempSync(path.join(tmpdir(), 'vcon-osusers-'));
chmodSync(base, 0o755);
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A package root holding dist/src/main.js, its directory at `mode`. */
function install(name: string, mode: number): string {
  const root = path.join(base, name, 'pkg');
  mkdirSync(path.join(root, 'dist', 'src'), { recursive: true });
  writeFileSync(path.join(root, 'dist', 'src', 'main.js'), '');
  chmodSync(path.join(root, 'dist', 'src', 'main.js'), 0o644);
  chmodSync(path.join(base, name), mode);
  return root;
}

describe('groups as their own OS users', () => {
  test('an install other users can reach is usable; one under a 0700 directory is not, and says where', () => {
    expect(installUnreachableByOthers(install('open', 0o755))).toBeUndefined();
    expect(installUnreachableByOthers(install('closed', 0o700))).toBe(`${path.join(base, 'closed')} does not let other users through`);
    const unreadable = install('unreadable', 0o755);
    chmodSync(path.join(unreadable, 'dist', 'src', 'main.js'), 0o600);
    expect(installUnreachableByOthers(unreadable)).toMatch(/main\.js is not readable by other users$/);
  });

  test('auto: on as root where the install is reachable, off otherwise; off and on as set', () => {
    const reachable = () => undefined;
    const closed = () => '/root does not let other users through';
    expect(groupUsersEnabled({ groupUsers: 'auto' }, true, reachable)).toBe(true);
    expect(groupUsersEnabled({ groupUsers: 'auto' }, true, closed)).toBe(false);
    expect(groupUsersEnabled({ groupUsers: 'auto' }, false, reachable)).toBe(false);
    expect(groupUsersEnabled({ groupUsers: 'off' }, true, reachable)).toBe(false);
    expect(groupUsersEnabled({ groupUsers: 'on' }, true, closed)).toBe(true);
    expect(() => groupUsersEnabled({ groupUsers: 'on' }, false)).toThrow(/needs the launcher to run as root/);
  });
});
