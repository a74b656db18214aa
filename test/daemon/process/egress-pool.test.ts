import { describe, expect, it } from 'vitest';
import { ConfigError, toServeConfig } from '../../../src/daemon/process/config.js';
import { checkBindable, parseEgressPool } from '../../../src/daemon/process/egress-pool.js';

const base = {
  apiListen: '127.0.0.1:8080',
  httpProxyListen: '127.0.0.1:3128',
  socksListen: '127.0.0.1:1080',
  workers: '1',
  releaseGrace: '600',
  logLevel: 'info',
};

describe('--egress-pool', () => {
  it('expands lists, ranges and CIDR blocks, dropping duplicates', () => {
    expect(parseEgressPool('127.0.0.2,127.0.0.3')).toEqual(['127.0.0.2', '127.0.0.3']);
    expect(parseEgressPool('127.0.0.2-127.0.0.9')).toHaveLength(8);
    expect(parseEgressPool('10.0.0.254-10.0.1.1')).toEqual(['10.0.0.254', '10.0.0.255', '10.0.1.0', '10.0.1.1']);
    expect(parseEgressPool('127.0.4.0/22')).toHaveLength(1024);
    expect(parseEgressPool('192.0.2.7/30')).toEqual(['192.0.2.4', '192.0.2.5', '192.0.2.6', '192.0.2.7']);
    expect(parseEgressPool(' 127.0.0.2 , 127.0.0.2-127.0.0.3,')).toEqual(['127.0.0.2', '127.0.0.3']);
  });

  it.each([
    ['10.0.0.0/21', 'larger than /22'],
    ['10.0.0.0-10.0.4.0', 'larger than 1024'],
    ['10.0.0.9-10.0.0.1', 'ends before it starts'],
    ['::1', 'not an IPv4'],
    ['2001:db8::/120', 'not an IPv4'],
    ['10.0.0.1/33', 'not an IPv4 CIDR'],
    ['10.0.0.01', 'not an IPv4'],
    ['host.example', 'not an IPv4'],
    [',', 'empty'],
  ])('refuses %s clearly', (list, why) => {
    const r = parseEgressPool(list);
    expect(r).toHaveProperty('error');
    expect((r as { error: string }).error).toContain(why);
  });

  it('is a usage error next to --egress-address, and names a bad item', () => {
    expect(toServeConfig({ ...base, egressPool: '127.0.0.2-127.0.0.3' }, {}).egressPool).toEqual([
      '127.0.0.2',
      '127.0.0.3',
    ]);
    expect(() => toServeConfig({ ...base, egressPool: '127.0.0.2', egressAddress: '127.0.0.2' }, {})).toThrow(
      /replaces --egress-address/,
    );
    expect(() => toServeConfig({ ...base, egressPool: '10.0.0.0/16' }, {})).toThrow(ConfigError);
  });

  it('checks every address is bindable and names the first that is not', async () => {
    await expect(checkBindable(['127.0.0.2', '127.0.0.3'])).resolves.toBeUndefined();
    await expect(checkBindable(['127.0.0.2', '192.0.2.1'])).rejects.toThrow(/192\.0\.2\.1/);
  });
});
