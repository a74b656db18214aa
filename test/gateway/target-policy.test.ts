import { describe, expect, it } from 'vitest';
import { checkTarget, isPublicAddress } from '../../src/gateway/dial/target-policy.js';

const strict = { allowPrivateTargets: false, ownListeners: () => [{ host: '127.0.0.1', port: 3128 }, { host: '0.0.0.0', port: 1080 }] };
const open = { ...strict, allowPrivateTargets: true };

describe('target policy', () => {
  it.each([
    '0.0.0.0', '10.1.2.3', '100.64.0.1', '127.0.0.1', '127.255.255.254', '169.254.169.254', '172.16.5.4', '192.0.0.8',
    '192.0.2.1', '192.168.0.1', '198.18.0.1', '198.51.100.1', '203.0.113.1', '224.0.0.251', '240.0.0.1', '255.255.255.255',
    '::', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'fe80::1', 'fc00::1', 'fd12::1', 'ff02::1', '2001:db8::1',
    '64:ff9b::7f00:1', '2002:7f00:1::1', '2001::1', '100::1', '::127.0.0.1', 'not-an-ip', '2130706433',
  ])('%s is refused by default', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
    expect(checkTarget(ip, 80, strict)).not.toBeNull();
  });
  it.each(['8.8.8.8', '1.1.1.1', '100.63.255.255', '2606:4700:4700::1111', '::ffff:8.8.8.8'])('%s is public', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
    expect(checkTarget(ip, 80, strict)).toBeNull();
  });
  it('private targets allowed by the flag, but never the own listeners', () => {
    expect(checkTarget('10.0.0.1', 80, open)).toBeNull();
    expect(checkTarget('127.0.0.1', 3128, open)).toBe('own_listener');
    expect(checkTarget('::ffff:127.0.0.1', 3128, open)).toBe('own_listener');
    expect(checkTarget('0.0.0.0', 3128, open)).toBe('own_listener');
    expect(checkTarget('127.0.0.1', 1080, open)).toBe('own_listener'); // wildcard listener
    expect(checkTarget('127.0.0.5', 1080, open)).toBe('own_listener');
    expect(checkTarget('127.0.0.1', 3129, open)).toBeNull();
    expect(checkTarget('127.0.0.2', 3128, open)).toBeNull(); // listener bound to 127.0.0.1 only
  });
});
