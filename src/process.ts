// Process liveness, shared by the launcher (registry, children) and the embedded database.
import { readFileSync } from 'node:fs';

/**
 * True for a running process. A zombie (exited, not yet reaped: common under a minimal init, or
 * for a detached child whose parent is gone) is dead: it serves nothing and holds no port.
 * EPERM means the pid exists but belongs to someone else: alive.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state letter follows the parenthesised command name, which may itself contain ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no procfs: trust kill(0)
  }
}
