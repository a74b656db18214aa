import { describe, expect, it } from 'vitest';
import ipaddr from 'ipaddr.js';
import { checkTarget, isPublicAddress } from '../../../src/gateway/dial/target-policy.js';

const strict = {
  allowPrivateTargets: false,
  ownListeners: () => [
    { host: '127.0.0.1', port: 3128 },
    { host: '0.0.0.0', port: 1080 },
  ],
};
const open = { ...strict, allowPrivateTargets: true };

describe('target policy', () => {
  it.each([
    '0.0.0.0',
    '10.1.2.3',
    '100.64.0.1',
    '127.0.0.1',
    '127.255.255.254',
    '169.254.169.254',
    '172.16.5.4',
    '192.0.0.8',
    '192.0.2.1',
    '192.168.0.1',
    '198.18.0.1',
    '198.51.100.1',
    '203.0.113.1',
    '224.0.0.251',
    '240.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    'fe80::1',
    'fc00::1',
    'fd12::1',
    'ff02::1',
    '2001:db8::1',
    '64:ff9b::7f00:1',
    '2002:7f00:1::1',
    '2001::1',
    '100::1',
    '::127.0.0.1',
    'not-an-ip',
    '2130706433',
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

describe('the dotted-quad fast path agrees with the general check', () => {
  // The general check, as it was before the fast path: ipaddr's parse and ranges for every address.
  const slowPublic = (ip: string): boolean => {
    const a = ipaddr.parse(ip) as ipaddr.IPv4;
    const special = [
      '0.0.0.0/8',
      '10.0.0.0/8',
      '100.64.0.0/10',
      '127.0.0.0/8',
      '169.254.0.0/16',
      '172.16.0.0/12',
      '192.0.0.0/24',
      '192.0.2.0/24',
      '192.31.196.0/24',
      '192.52.193.0/24',
      '192.88.99.0/24',
      '192.168.0.0/16',
      '192.175.48.0/24',
      '198.18.0.0/15',
      '198.51.100.0/24',
      '203.0.113.0/24',
      '224.0.0.0/4',
      '240.0.0.0/4',
      '255.255.255.255/32',
    ].some((c) => a.match(ipaddr.parseCIDR(c) as [ipaddr.IPv4, number]));
    return a.range() === 'unicast' && !special;
  };
  const edges = [
    '0.0.0.0',
    '0.255.255.255',
    '1.0.0.0',
    '9.255.255.255',
    '10.0.0.0',
    '11.0.0.0',
    '100.63.255.255',
    '100.64.0.0',
    '100.127.255.255',
    '100.128.0.0',
    '126.255.255.255',
    '127.0.0.1',
    '128.0.0.0',
    '169.253.255.255',
    '169.254.1.1',
    '172.15.255.255',
    '172.16.0.0',
    '172.31.255.255',
    '172.32.0.0',
    '192.0.0.255',
    '192.0.1.0',
    '192.0.2.1',
    '192.88.99.1',
    '192.167.255.255',
    '192.168.0.1',
    '198.17.255.255',
    '198.18.0.0',
    '198.19.255.255',
    '198.20.0.0',
    '203.0.113.9',
    '223.255.255.255',
    '224.0.0.0',
    '239.255.255.255',
    '240.0.0.0',
    '255.255.255.254',
    '255.255.255.255',
    '8.8.8.8',
    '93.184.216.34',
  ];
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % 256);
  const random = Array.from({ length: 5000 }, () => `${rnd()}.${rnd()}.${rnd()}.${rnd()}`);

  it('public or not, for edges of every block and 5,000 random addresses', () => {
    for (const ip of [...edges, ...random]) expect(isPublicAddress(ip), ip).toBe(slowPublic(ip));
  });

  it('refuses our own listeners and private targets as before', () => {
    const own = {
      allowPrivateTargets: false,
      ownListeners: () => [
        { host: '127.0.0.1', port: 3128 },
        { host: '0.0.0.0', port: 1080 },
        { host: 'localhost', port: 8080 },
      ],
    };
    expect(checkTarget('127.0.0.1', 3128, own)).toBe('own_listener');
    expect(checkTarget('127.0.0.1', 1080, own)).toBe('own_listener'); // a wildcard listener: the general check
    expect(checkTarget('127.0.0.1', 8080, own)).toBe('own_listener'); // a name: the general check
    expect(checkTarget('127.0.0.2', 3128, own)).toBe('private_target');
    expect(checkTarget('8.8.8.8', 3128, own)).toBeNull();
    expect(checkTarget('10.1.2.3', 443, own)).toBe('private_target');
    const open = { ...own, allowPrivateTargets: true };
    expect(checkTarget('127.0.0.2', 3128, open)).toBeNull();
    expect(checkTarget('127.0.0.1', 3128, open)).toBe('own_listener');
    expect(checkTarget('0.0.0.0', 3128, open)).toBe('own_listener');
    for (const ip of random.slice(0, 500))
      expect(checkTarget(ip, 443, own), ip).toBe(slowPublic(ip) ? null : 'private_target');
  });
});
