// Durations and times as operators type them: `90s`, `30m`, `48h`, `7d`, `2y`, and ISO times.
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../rules/time.js';
const UNIT_MS: Record<string, number> = { s: 1_000, m: MINUTE_MS, h: HOUR_MS, d: DAY_MS, y: 365 * DAY_MS };

/**
 * Milliseconds of `N<unit>` with a unit among `units`; a bare number is seconds when `bareSeconds`. Null when
 * `s` is not such a duration.
 */
export function parseDurationMs(s: string, opts: { units?: string; bareSeconds?: boolean } = {}): number | null {
  const units = opts.units ?? 'smhdy';
  const m = /^(\d{1,9})([a-z]?)$/.exec(s.trim());
  if (!m) return null;
  const unit = m[2] || (opts.bareSeconds ? 's' : '');
  if (!unit || !units.includes(unit)) return null;
  return Number(m[1]) * UNIT_MS[unit]!;
}

/** An ISO time (at least a date, `2026-11-25` or `2026-11-25T10:00:00Z`; without a zone, UTC) in ms, or null. */
export function parseIsoTime(s: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})/.exec(s);
  if (!m) return null;
  // A day the month does not have (2026-02-30, 2026-11-31) is refused, not rolled into the next month.
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1 || d > new Date(Date.UTC(y, mo, 0)).getUTCDate()) return null;
  // A date-time without a zone is UTC, as a date alone is (Date.parse would take the host's zone).
  const zoned = s.length === 10 || /(Z|[+-]\d{2}:?\d{2})$/i.test(s);
  const t = Date.parse(zoned ? s : `${s}Z`);
  return Number.isNaN(t) ? null : t;
}

const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/**
 * What is wrong with a time its parser refused, in words that name the part (`November 2026 has 30 days`,
 * `no time zone: …`), or null when nothing specific is (then the caller's "expected …" says it). `zone`:
 * whether a date-time must carry one (the API), or is read as UTC without (operators' flags).
 */
export function isoTimeProblem(s: string, zone: 'required' | 'optional'): string | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/.exec(
    s.trim(),
  );
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12) return `there is no month ${m[2]} (01 to 12)`;
  const days = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (d < 1 || d > days) return `${MONTHS[mo - 1]} ${y} has ${days} days`;
  if (m[4] === undefined) return null;
  if (Number(m[4]) > 23) return `there is no hour ${m[4]} (00 to 23)`;
  if (Number(m[5]) > 59) return `there is no minute ${m[5]} (00 to 59)`;
  if (m[6] !== undefined && Number(m[6]) > 59) return `there is no second ${m[6]} (00 to 59)`;
  const z = m[7];
  if (z === undefined) return zone === 'required' ? 'no time zone: add Z for UTC, or an offset such as +02:00' : null;
  if (!/^[Zz]$/.test(z)) {
    const [hh, mm] = [Number(z.slice(1, 3)), Number(z.slice(-2))];
    if (hh > 23 || mm > 59) return `${z} is not a time-zone offset (at most ±23:59)`;
  }
  return null;
}

/** A refused time flag, said once for every command: what is wrong with it when that is known, and what was expected. */
export function timeFlagProblem(
  flag: string,
  value: string,
  expected: string,
  zone: 'required' | 'optional' = 'optional',
): string {
  const why = isoTimeProblem(value, zone);
  return why ? `${flag}: "${value}": ${why} (expected ${expected})` : `${flag}: expected ${expected}, got "${value}"`;
}
