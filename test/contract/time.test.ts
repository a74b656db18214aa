// Times as operators type them (`proxyd admin … --since/--from/--to/--expires`): a day the month lacks is refused.
import { describe, expect, it } from 'vitest';
import { isoTimeProblem, parseDurationMs, parseIsoTime, timeFlagProblem } from '../../src/contract/time.js';
import {
  UsageDomainsQuerySchema,
  UsageSeriesQuerySchema,
  firstIssueDetail,
  firstIssueField,
} from '../../src/contract/schemas.js';

describe('parseIsoTime', () => {
  it('takes a date or a date-time with a zone', () => {
    expect(parseIsoTime('2026-11-25')).toBe(Date.UTC(2026, 10, 25));
    expect(parseIsoTime('2026-11-25T10:00:00Z')).toBe(Date.UTC(2026, 10, 25, 10));
    expect(parseIsoTime('2028-02-29')).toBe(Date.UTC(2028, 1, 29));
    expect(parseIsoTime('2026-12-31T23:59:59.999Z')).toBe(Date.UTC(2026, 11, 31, 23, 59, 59, 999));
  });

  it("a date-time without a zone is UTC, whatever the host's zone; an offset is honoured", () => {
    expect(parseIsoTime('2026-11-26T13:44:00')).toBe(Date.UTC(2026, 10, 26, 13, 44));
    expect(parseIsoTime('2026-11-26T13:44')).toBe(Date.UTC(2026, 10, 26, 13, 44));
    expect(parseIsoTime('2026-11-26T13:44:00+02:00')).toBe(Date.UTC(2026, 10, 26, 11, 44));
    expect(parseIsoTime('2026-11-26T13:44:00.5z')).toBe(Date.UTC(2026, 10, 26, 13, 44, 0, 500));
  });

  it('refuses a day the month does not have, instead of rolling it into the next month', () => {
    for (const s of [
      '2099-02-31',
      '2026-11-31',
      '2026-02-30T00:00:00Z',
      '2026-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-01-00',
      '2026-04-31',
    ]) {
      expect(parseIsoTime(s), s).toBeNull();
    }
  });

  it('refuses what is not an ISO time', () => {
    for (const s of ['', 'yesterday', '25/11/2026', '2026-1-5', '2026-11-25T25:00:00Z'])
      expect(parseIsoTime(s), s).toBeNull();
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

describe('what is wrong with a time, named', () => {
  it.each([
    ['2026-11-31', 'optional', 'November 2026 has 30 days'],
    ['2026-02-30', 'optional', 'February 2026 has 28 days'],
    ['2028-02-30T10:00:00Z', 'required', 'February 2028 has 29 days'],
    ['2026-13-01', 'optional', 'there is no month 13 (01 to 12)'],
    ['2026-11-00', 'optional', 'November 2026 has 30 days'],
    ['2026-11-25T24:00:00Z', 'optional', 'there is no hour 24 (00 to 23)'],
    ['2026-11-25T10:60:00Z', 'optional', 'there is no minute 60 (00 to 59)'],
    ['2026-11-25T10:00:61Z', 'optional', 'there is no second 61 (00 to 59)'],
    ['2026-11-25T10:00:00+25:00', 'required', '+25:00 is not a time-zone offset (at most ±23:59)'],
    ['2026-12-01T10:00:00', 'required', 'no time zone: add Z for UTC, or an offset such as +02:00'],
  ] as const)('%s (zone %s): %s', (s, zone, why) => expect(isoTimeProblem(s, zone)).toBe(why));

  it('nothing specific for a time that is fine or not a time at all', () => {
    for (const s of ['2026-12-01T10:00:00', '2026-11-30', 'yesterday', '25/11/2026'])
      expect(isoTimeProblem(s, 'optional'), s).toBeNull();
    expect(isoTimeProblem('2026-12-01T10:00:00Z', 'required')).toBeNull();
  });

  it('a flag says the part that is wrong, else what it expected', () => {
    expect(timeFlagProblem('--expires', '2026-02-30', 'an ISO time, or never')).toBe(
      '--expires: "2026-02-30": February 2026 has 28 days (expected an ISO time, or never)',
    );
    expect(timeFlagProblem('--expires', 'soon', 'an ISO time, or never')).toBe(
      '--expires: expected an ISO time, or never, got "soon"',
    );
  });

  it('the API names the field and the part: a time without a zone, a day the month lacks', () => {
    const detail = (
      schema: typeof UsageSeriesQuerySchema | typeof UsageDomainsQuerySchema,
      q: Record<string, string>,
    ) => {
      const r = schema.safeParse(q);
      return r.success ? null : `${firstIssueField(r.error)} (${firstIssueDetail(r.error)})`;
    };
    expect(detail(UsageSeriesQuerySchema, { granularity: 'day', from: '2026-12-01T10:00:00' })).toBe(
      'from (no time zone: add Z for UTC, or an offset such as +02:00)',
    );
    expect(detail(UsageSeriesQuerySchema, { granularity: 'day', from: '2026-11-31' })).toBe(
      'from (November 2026 has 30 days)',
    );
    expect(detail(UsageDomainsQuerySchema, { to: '2026-11-31' })).toBe('to (November 2026 has 30 days)');
    expect(detail(UsageDomainsQuerySchema, { from: '2026-11-01T00:00:00Z' })).toBe('from (expected a day, YYYY-MM-DD)');
  });
});
