import { defineConfig } from 'vitest/config';

// Timeouts are ceilings for a hang, not speed bounds: a loaded 2-core machine (a second full run
// beside this one) makes a test that takes 10 s alone take over a minute. No test passes or fails
// by how fast it ran; what measures time is in the bench (npm run bench).
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    exclude: ['tests/hardening/**', 'node_modules/**'],
    globalSetup: ['tests/helpers/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
