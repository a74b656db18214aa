// The order the suite's files start in. Two workers take files from one queue, so a long file that starts late
// is the run's tail: the other worker has finished and waits. Vitest orders by the last run's durations when its
// cache has them and by file size otherwise, and a fresh clone (CI) has no cache. So the files that take longest
// (measured: `npx vitest run --reporter=json --outputFile=F`, each file's endTime - startTime) start first, the
// longest first, and the rest follow in Vitest's own order. The container test builds an image (minutes on a new
// machine), so it goes first: it overlaps everything else.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Longest first, as measured on 2 cores (seconds in a full run, 2026-12-07). */
export const SLOWEST_FIRST = [
  'test/ops/container.test.ts', // 124 (4-6 minutes with nothing cached)
  'test/e2e/exits.test.ts', // 51
  'test/e2e/rate-limit.test.ts', // 50
  'test/hostile/daemon-hostile.test.ts', // 26
  'test/console/audit-actions.test.ts', // 25
  'test/e2e/daemon.test.ts', // 23
  'test/e2e/cli-users.test.ts', // 22
  'test/gateway/hop/exit-directory.test.ts', // 21
  'test/ops/global-install.test.ts', // 19
  'test/e2e/api-keys.test.ts', // 17
  'test/hostile/secrets-audit.test.ts', // 16
  'test/ops/redis-startup.test.ts', // 15
];

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = SLOWEST_FIRST.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i === -1 ? SLOWEST_FIRST.length : i;
    };
    // Array.prototype.sort is stable: files off the list keep Vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
