// Whitelist IPv4 policy: strict dotted-decimal syntax, then the IANA special-purpose registry (src/rules/ipv4-blocks.ts).
import { specialPurposeBlock } from '../rules/ipv4-blocks.js';
import { isStrictIPv4 } from '../rules/ipv4-syntax.js';

export { isStrictIPv4 };

/** The name of the special-purpose block an address lies in, or null: one list with the gateway's (src/rules/ipv4-blocks.ts). */
export { specialPurposeBlock };

type Ipv4Verdict = { ok: true } | { ok: false; code: 10420 | 10421 };

/** Syntax and public-address checks; the mainland-China rule needs the country database and lives in the daemon. */
export function checkWhitelistIpv4(s: unknown): Ipv4Verdict {
  if (!isStrictIPv4(s)) return { ok: false, code: 10420 };
  if (specialPurposeBlock(s) !== null) return { ok: false, code: 10421 };
  return { ok: true };
}

/** Unicode code points, not UTF-16 units. */
export function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export const MAX_REMARK_CODE_POINTS = 255;
