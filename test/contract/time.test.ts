// Times as operators type them (`proxyd admin … --since/--from/--to/--expires`): a day the month lacks is refused.
import { describe, expect, it } from 'vitest';
import { parseDurationMs, parseIsoTime } from '../../src/contract/time.js';

describe('parseIsoTime', () => {
  it('takes a date or a date-time with a zone', () => {
    expect(parseIsoTime('2026-11-25')).toBe(Date.UTC(2026, 10, 25));
    expect(parseIsoTime('2026-11-25T10:00:00Z')).toBe(Date.UTC(2026, 10, 25, 10));
    expect(parseIsoTime('2028-02-29')).toBe(Date.UTC(2028, 1, 29));
    expect(parseIsoTime('2026-12-31T23:59:59.999Z')).toBe(Date.UTC(2026, 11, 31, 23, 59, 59, 999));
  });

  it('a date-time without a zone is UTC, whatever the host\'s zone; an offset is honoured', () => {
    expect(parseIsoTime('2026-11-26T13:44:00')).toBe(Date.UTC(2026, 10, 26, 13, 44));
    expect(parseIsoTime('2026-11-26T13:44')).toBe(Date.UTC(2026, 10, 26, 13, 44));
    expect(parseIsoTime('2026-11-26T13:44:00+02:00')).toBe(Date.UTC(2026, 10, 26, 11, 44));
    expect(parseIsoTime('2026-11-26T13:44:00.5z')).toBe(Date.UTC(2026, 10, 26, 13, 44, 0, 500));
  });

  it('refuses a day the month does not have, instead of rolling it into the next month', () => {
    for (const s of ['2099-02-31', '2026-11-31', '2026-02-30T00:00:00Z', '2026-02-29', '2026-13-01', '2026-00-10', '2026-01-00', '2026-04-31']) {
      expect(parseIsoTime(s), s).toBeNull();
    }
  });

  it('refuses what is not an ISO time', () => {
    for (const s of ['', 'yesterday', '25/11/2026', '2026-1-5', '2026-11-25T25:00:00Z']) expect(parseIsoTime(s), s).toBeNull();
  });
});

describe('parseDurationMs', () => {
  it('reads N<unit>', () => {
    expect(parseDurationMs('90s')).toBe(90_000);
    expect(parseDurationMs('2h')).toBe(7_200_000);
    expect(parseDurationMs('5')).toBeNull();
    expect(parseDurationMs('5', { bareSeconds: true })).toBe(5_000);
  });
});
