// `--egress-pool` as one IPv6 prefix (SPEC 13): parsing, refusals that name the item, mixing with IPv4,
// the config it makes, and the start-up check's refusal of a prefix this host does not route locally.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, toServeConfig } from '../../../src/daemon/process/config.js';
import { checkPrefixBindable, parseEgress } from '../../../src/daemon/process/egress-pool.js';
import { EgressPrefix } from '../../../src/gateway/dial/egress-prefix.js';
import { tempDir } from '../../helpers/daemon.js';

const base = {
  apiListen: '127.0.0.1:8080',
  httpProxyListen: '127.0.0.1:3128',
  socksListen: '127.0.0.1:1080',
  workers: '1',
  releaseGrace: '600',
  logLevel: 'info',
};

const prefixOf = (list: string): string => {
  const r = parseEgress(list);
  if (!('prefix' in r)) throw new Error(`not a prefix: ${JSON.stringify(r)}`);
  return r.prefix.text;
};

describe('--egress-pool with an IPv6 prefix', () => {
  it.each([
    ['2001:db8:1::/64', '2001:db8:1::/64'],
    ['2001:DB8:0001:0000::/64', '2001:db8:1::/64'],
    [' 2001:db8:1::/64 ', '2001:db8:1::/64'],
    ['2001:db8:1::/64,', '2001:db8:1::/64'],
    ['2001:db8::/48', '2001:db8::/48'],
    ['2001:db8:1:2:3:4:5::/112', '2001:db8:1:2:3:4:5:0/112'],
    ['fd7a:5c1e:ab00:1::/64', 'fd7a:5c1e:ab00:1::/64'],
    // Host bits given are cleared, as an IPv4 CIDR block's are.
    ['2001:db8:1::5/64', '2001:db8:1::/64'],
  ])('accepts %s as %s', (list, text) => {
    expect(prefixOf(list)).toBe(text);
  });

  it.each([
    ['2001:db8::/47', '/48 to /112'],
    ['2001:db8::/113', '/48 to /112'],
    ['2001:db8::/128', '/48 to /112'],
    ['2001:db8::/0', '/48 to /112'],
    ['2001:db8::1', 'not an IPv6 prefix'],
    ['2001:db8::/', 'not an IPv6 prefix'],
    ['2001:db8::/64x', 'not an IPv6 prefix'],
    ['2001:db8:::/64', 'not an IPv6 prefix'],
    ['2001:db8::g/64', 'not an IPv6 prefix'],
    ['fe80::%eth0/64', 'not an IPv6 prefix'],
    ['2001:db8::1-2001:db8::9', 'not an IPv6 prefix'],
    ['fe80::/64', 'linkLocal'],
    ['ff02::/64', 'multicast'],
    ['::/64', 'unspecified'],
    ['::ffff:0:0/96', 'ipv4Mapped'],
  ])('refuses %s clearly, naming it', (list, why) => {
    const r = parseEgress(list);
    expect(r).toHaveProperty('error');
    const error = (r as { error: string }).error;
    expect(error).toContain(why);
    expect(error).toContain(`"${list}"`);
  });

  it('refuses mixing IPv4 and IPv6, and more than one prefix', () => {
    for (const list of [
      '127.0.0.2,2001:db8:1::/64',
      '2001:db8:1::/64,127.0.0.2',
      '127.0.0.2-127.0.0.3, 2001:db8:1::/64',
    ]) {
      const r = parseEgress(list) as { error: string };
      expect(r.error, list).toContain('IPv4 addresses or one IPv6 prefix, not both');
      expect(r.error).toContain('2001:db8:1::/64');
    }
    const two = parseEgress('2001:db8:1::/64,2001:db8:2::/64') as { error: string };
    expect(two.error).toContain('exactly one prefix');
    expect(two.error).toContain('2001:db8:2::/64');
  });

  it('leaves IPv4 lists as they were', () => {
    expect(parseEgress('127.0.0.2-127.0.0.3')).toEqual({ addresses: ['127.0.0.2', '127.0.0.3'] });
    expect((parseEgress('10.0.0.0/21') as { error: string }).error).toContain('larger than /22');
    expect((parseEgress(',') as { error: string }).error).toContain('empty');
  });

  it('makes the config (a usage error, exit 2, when bad or next to --egress-address)', () => {
    const cfg = toServeConfig({ ...base, egressPool: '2001:db8:1::/64' }, {});
    expect(cfg.egressPool).toBeUndefined();
    expect(cfg.egressPrefix?.text).toBe('2001:db8:1::/64');
    expect(toServeConfig({ ...base, egressPool: '127.0.0.2' }, {}).egressPrefix).toBeUndefined();
    expect(() => toServeConfig({ ...base, egressPool: '2001:db8:1::/120' }, {})).toThrow(ConfigError);
    expect(() => toServeConfig({ ...base, egressPool: '2001:db8:1::/120' }, {})).toThrow(
      /--egress-pool: "2001:db8:1::\/120"/,
    );
    expect(() => toServeConfig({ ...base, egressPool: '127.0.0.2,2001:db8:1::/64' }, {})).toThrow(ConfigError);
    expect(() => toServeConfig({ ...base, egressPool: '2001:db8:1::/64', egressAddress: '::1' }, {})).toThrow(
      /replaces --egress-address/,
    );
  });
});

describe('the start-up check of an IPv6 prefix', () => {
  // /proc/net/ipv6_route lines: destination, length, source, length, next hop, metric, refcnt, use, flags, device.
  const routeLine = (dest: string, len: string, flags: string) =>
    `${dest} ${len} 00000000000000000000000000000000 00 00000000000000000000000000000000 00000400 00000001 00000000 ${flags}       lo\n`;

  it('refuses a prefix without a local route, naming it and what to run (nothing is sent)', async () => {
    const dir = tempDir();
    const routes = path.join(dir, 'ipv6_route');
    // A local route for another prefix, and this one routed but not local (flags without RTF_LOCAL).
    writeFileSync(
      routes,
      routeLine('fd7a5c1eab0000090000000000000000', '40', '80000001') +
        routeLine('fd7a5c1eab0000020000000000000000', '40', '00000001'),
    );
    const prefix = EgressPrefix.parse('fd7a:5c1e:ab00:2::/64') as EgressPrefix;
    const err = await checkPrefixBindable(prefix, routes).then(
      () => null,
      (e: NodeJS.ErrnoException) => e,
    );
    expect(err?.code).toBe('EGRESS_UNBINDABLE');
    expect(err?.message).toContain('fd7a:5c1e:ab00:2::/64');
    expect(err?.message).toContain('no local route');
    expect(err?.message).toContain('ip -6 route add local fd7a:5c1e:ab00:2::/64 dev lo');
    expect(err?.message).toContain('sysctl -w net.ipv6.ip_nonlocal_bind=1');
  });
});
