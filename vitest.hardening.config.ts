import { defineConfig } from 'vitest/config';

// The slow suite: faults, restarts and a soak with real processes. It reports its timings (restart,
// exit and request latencies) in [hardening] lines and bounds none of them: a loaded machine
// stretches them all. Its timeouts are ceilings for a hang.
export default defineConfig({
  test: {
    include: ['tests/hardening/**/*.test.ts'],
    globalSetup: ['tests/helpers/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
