import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createSpinner, describeProgress } from '../../src/cli/progress.js';

describe('progress', () => {
  it('describes counts and waits', () => {
    expect(describeProgress({ total: 1050, settled: 300, succeeded: 290, alreadyDone: 2, failed: 8 }, 'adding')).toBe(
      'adding 300/1050, 290 ok, 2 already done, 8 failed',
    );
    expect(
      describeProgress(
        {
          total: 1050,
          settled: 1000,
          succeeded: 1000,
          alreadyDone: 0,
          failed: 0,
          waiting: { reason: 'rate-limit', ms: 41_200 },
        },
        'adding',
      ),
    ).toMatch(/waiting 42s for the rate limit/);
  });

  it('draws no spinner on a terminal that reports no width (ora would redraw forever)', async () => {
    const s = Object.assign(new PassThrough(), { columns: 0, isTTY: true });
    expect(await createSpinner(s, false)).toBeNull();
  });
});
