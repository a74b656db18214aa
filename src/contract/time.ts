// Durations and times as operators type them: `90s`, `30m`, `48h`, `7d`, `2y`, and ISO times.
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, y: 365 * 86_400_000 };

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
