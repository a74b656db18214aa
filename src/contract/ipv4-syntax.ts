// The strict IPv4 syntax every part of proxyd and proxyctl applies (one home; the CLI loads it without the
// special-purpose registry). The gateway, which imports nothing of ours, parses PROXY headers with its own
// equivalent pattern (src/gateway/wire/proxy-protocol.ts; docs/architecture.md says why).
import { isIPv4 } from 'node:net';

// Four decimal octets 0-255, no leading zeros, no signs, no whitespace.
const DOTTED_DECIMAL = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)){3}$/;

/** True only for canonical dotted-decimal IPv4 ("1.2.3.4"); no IPv6, mapped, hex, octal or short forms. */
export function isStrictIPv4(s: unknown): s is string {
  return typeof s === 'string' && s.length <= 15 && DOTTED_DECIMAL.test(s) && isIPv4(s);
}
