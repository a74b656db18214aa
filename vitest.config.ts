import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The e2e suites spawn daemons and browsers; two cores run two files at a time.
    maxWorkers: 2,
    fileParallelism: true,
    reporters: ['default'],
  },
});
