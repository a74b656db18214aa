// Bandwidth as operators and customers write it (rate limits): `10mbit`, `1gbit`, `500kbit`, `1.5mbit`, or plain
// bits per second; kbit/mbit/gbit are powers of 1000 (network units, not 1024).
const UNITS: Record<string, number> = { bit: 1, kbit: 1e3, mbit: 1e6, gbit: 1e9 };

/** Bits per second (at least 8: one byte a second), or null when `s` is not a rate. */
export function parseRate(s: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/.exec(s);
  if (!m) return null;
  const mult = UNITS[(m[2] ?? '').toLowerCase() || 'bit'];
  if (mult === undefined) return null;
  const bits = Math.round(Number(m[1]) * mult);
  if (!Number.isFinite(bits) || bits > 1e12 || bits < 8) return null;
  return bits;
}

/** A rate for people: the largest unit that keeps it at least 1, at most two decimals (`10mbit`, `1.5gbit`). */
export function formatRate(bits: number): string {
  for (const [unit, mult] of [
    ['gbit', 1e9],
    ['mbit', 1e6],
    ['kbit', 1e3],
  ] as const) {
    if (bits >= mult) return `${Number((bits / mult).toFixed(2))}${unit}`;
  }
  return `${bits}bit`;
}
