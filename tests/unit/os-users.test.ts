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

/** A Node binary (an empty file will do: only its directories are checked) under a directory at `mode`. */
function nodeBinary(name: string, mode: number): string {
  const bin = path.join(base, name, 'bin', 'node');
  mkdirSync(path.dirname(bin), { recursive: true });
  writeFileSync(bin, '');
  chmodSync(path.join(base, name), mode);
  return bin;
}

describe('groups as their own OS users', () => {
  test('an install other users can reach is usable; one under a 0700 directory is not, and says where', () => {
    // This test's own Node may sit in a checkout others cannot enter (CI installs it there): an explicit one.
    const node = nodeBinary('node-open', 0o755);
    expect(installUnreachableByOthers(install('open', 0o755), node)).toBeUndefined();
    expect(installUnreachableByOthers(install('closed', 0o700), node)).toBe(`${path.join(base, 'closed')} does not let other users through`);
    const unreadable = install('unreadable', 0o755);
    chmodSync(path.join(unreadable, 'dist', 'src', 'main.js'), 0o600);
    expect(installUnreachableByOthers(unreadable, node)).toMatch(/main\.js is not readable by other users$/);
    // The Node binary counts too: groups run it as their own users.
    expect(installUnreachableByOthers(install('open2', 0o755), nodeBinary('node-closed', 0o700))).toBe(
      `${path.join(base, 'node-closed')} does not let other users through`,
    );
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
