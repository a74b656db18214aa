// IPv4 syntax, one rule (src/rules/ipv4-syntax.ts): the whitelist, the username's `-ip-` and the gateway's PROXY
// headers take and refuse the same spellings.
import { describe, expect, it } from 'vitest';
import { checkWhitelistIpv4 } from '../../src/contract/ipv4.js';
import { parseProxyHeader } from '../../src/gateway/wire/proxy-protocol.js';
import { isStrictIPv4 } from '../../src/rules/ipv4-syntax.js';
import { parseProxyUsername } from '../../src/rules/proxy-username.js';

describe('IPv4 syntax on every side', () => {
  it.each(['203.0.113.9', '8.8.8.8', '01.2.3.4', '1.2.3.04', '1.2.3', '1.2.3.256', '0x1.2.3.4'])('%s', (ip) => {
    const strict = isStrictIPv4(ip);
    expect(checkWhitelistIpv4(ip).ok || (checkWhitelistIpv4(ip) as { code: number }).code !== 10420).toBe(strict);
    expect(parseProxyUsername(`alice-ip-${ip}`).kind === 'params').toBe(strict);
    expect(parseProxyHeader(Buffer.from(`PROXY TCP4 ${ip} 198.51.100.1 1000 80\r\n`)).kind === 'ok').toBe(strict);
  });
});
