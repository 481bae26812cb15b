import { defineConfig } from 'vitest/config';

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
