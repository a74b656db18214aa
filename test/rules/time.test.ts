// A day in milliseconds, once (src/rules/time.ts): the duration parser's `d` and the store's day bucket agree with it.
import { describe, expect, it } from 'vitest';
import { parseDurationMs } from '../../src/contract/time.js';
import { PERIOD_MS, bucketStart } from '../../src/daemon/store/usage-sql.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../src/rules/time.js';

describe('lengths of time', () => {
  it('a day is 24 hours of 60 minutes', () => {
    expect(DAY_MS).toBe(24 * HOUR_MS);
    expect(HOUR_MS).toBe(60 * MINUTE_MS);
    expect(DAY_MS).toBe(Date.UTC(2026, 0, 2) - Date.UTC(2026, 0, 1));
  });
  it('the duration `1d`, the day bucket and a UTC day are the same length', () => {
    expect(parseDurationMs('1d')).toBe(DAY_MS);
    expect(PERIOD_MS.day).toBe(DAY_MS);
    const t = Date.UTC(2026, 11, 7, 9, 30);
    expect(bucketStart('day', t)).toBe(Date.UTC(2026, 11, 7));
    expect(bucketStart('day', t + DAY_MS)).toBe(Date.UTC(2026, 11, 8));
  });
});
