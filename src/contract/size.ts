// Sizes as operators and customers write them (traffic limits): `50GiB`, `500MB`, `1.5TiB`, or plain bytes.
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (kB, MB, GB, TB) powers of 1000.
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** Bytes, or null when `s` is not a size (negative, fractional bytes, unknown unit, past 2^53). */
export function parseSize(s: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$/.exec(s);
  if (!m) return null;
  const unit = (m[2] ?? '').toLowerCase() || 'b';
  const mult = UNITS[unit];
  if (mult === undefined) return null;
  const n = Number(m[1]) * mult;
  if (!Number.isFinite(n) || n > Number.MAX_SAFE_INTEGER) return null;
  const bytes = Math.round(n);
  return Math.abs(n - bytes) < 1e-6 || mult > 1 ? bytes : null;
}

/**
 * A size for people, the one byte formatter of every page and command: the largest binary unit that keeps it
 * at least 1, at most two decimals, no trailing zeros (`50 GiB`, `1.5 MiB`, `302.73 KiB`, `512 B`).
 */
export function formatSize(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${Number(v.toFixed(2))} ${units[i]}`;
}

/**
 * A size to put back in a form field: the largest unit that holds it exactly (`50GiB`, `500MB`), else plain
 * bytes, so saving a form unchanged keeps the limit to the byte (`parseSize` reads it back as `n`).
 */
export function formatSizeExact(n: number): string {
  for (const unit of ['TiB', 'TB', 'GiB', 'GB', 'MiB', 'MB', 'KiB', 'kB']) {
    const mult = UNITS[unit.toLowerCase()]!;
    if (n >= mult && n % mult === 0) return `${n / mult}${unit}`;
  }
  return String(n);
}
