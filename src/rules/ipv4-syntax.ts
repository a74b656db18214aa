// The strict IPv4 syntax every part of proxyd and proxyctl applies: canonical dotted decimal as inet_pton reads
// it (Node's net.isIPv4: four decimal octets 0-255, no leading zeros, signs, whitespace, hex, octal or short
// forms). The gateway's PROXY-header parser and the username's `-ip-` parameter apply it too: the rule has one home,
// the platform's parser, behind this one name (docs/architecture.md).
import { isIPv4 } from 'node:net';

/** True only for canonical dotted-decimal IPv4 ("1.2.3.4"); no IPv6, mapped, hex, octal or short forms. */
export function isStrictIPv4(s: unknown): s is string {
  return typeof s === 'string' && isIPv4(s);
}
