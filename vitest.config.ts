import { defineConfig } from 'vitest/config';
import { PATIENCE_ENV, loadFactor } from './test/helpers/patience.js';
import SlowestFirst from './test/helpers/sequencer.js';

// The machine's load per core when the run starts (at least 1): every worker inherits it, so deadlines in
// test/helpers grow with the load (test/helpers/patience.ts), and so do the default test and hook timeouts.
const factor = loadFactor();
process.env[PATIENCE_ENV] ??= String(Math.round(factor * 10) / 10);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // 60 s: the load is measured once, at the start, and a file that runs beside the image build or a browser can
    // take twice its idle time later in the run. A test that passes takes what it takes; only a hang waits this long.
    testTimeout: Math.round(60_000 * factor),
    // A hook starts daemons, clusters and browsers: generous, as it returns as soon as they are up.
    hookTimeout: Math.round(60_000 * factor),
    // The e2e suites spawn daemons and browsers; two cores run two files at a time.
    maxWorkers: 2,
    fileParallelism: true,
    // The longest files start first, so none is the run's tail (test/helpers/sequencer.ts).
    sequence: { sequencer: SlowestFirst },
    reporters: ['default'],
  },
});
