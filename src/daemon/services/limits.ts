// Limit values as people type them (plans and proxy-user limits), one rule for `proxyd admin` and the console: a size (`50GiB`,
// `500MB`, bytes) or a connection count, where `none` (or an empty field) removes the limit.
import { parseRate } from '../../contract/rate.js';
import { parseSize } from '../../contract/size.js';

export type LimitValue = { ok: true; value: number | null } | { ok: false; problem: string };

export function sizeLimit(v: string): LimitValue {
  const t = v.trim();
  if (t === '' || t === 'none') return { ok: true, value: null };
  const n = parseSize(t);
  return n === null
    ? { ok: false, problem: `expected a size such as 50GiB, 500MB or a number of bytes, or none; got "${t}"` }
    : { ok: true, value: n };
}

export function countLimit(v: string): LimitValue {
  const t = v.trim();
  if (t === '' || t === 'none') return { ok: true, value: null };
  if (!/^\d{1,9}$/.test(t) || Number(t) < 1)
    return { ok: false, problem: `expected a positive integer or none; got "${t}"` };
  return { ok: true, value: Number(t) };
}

/** A rate limit in bits per second (`10mbit`, `1gbit`, `500kbit`), or none. */
export function rateLimit(v: string): LimitValue {
  const t = v.trim();
  if (t === '' || t === 'none') return { ok: true, value: null };
  const n = parseRate(t);
  return n === null
    ? {
        ok: false,
        problem: `expected a rate such as 10mbit, 1gbit or 500kbit (powers of 1000, bits per second), or none; got "${t}"`,
      }
    : { ok: true, value: n };
}
