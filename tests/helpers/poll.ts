// Waiting for a condition in tests: poll it until a deadline, never sleep a fixed time and hope.
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls until fn returns a truthy value, which it resolves with; throws once `timeoutMs` has passed.
 * The timeout is a ceiling for a hang, not a speed bound: a loaded machine may take far longer
 * than a quiet one.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 60_000, everyMs = 50, what = 'the condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
