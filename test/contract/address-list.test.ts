// `--addresses LIST` of `proxyd admin ip assign|release`: IPv4 addresses and ranges a-b; an error names the item.
import { describe, expect, it } from 'vitest';
import { isNodeName, MAX_ADDRESS_LIST, parseAddressList } from '../../src/contract/address-list.js';

describe('address lists', () => {
  it('expands addresses and ranges, drops duplicates, keeps the order', () => {
    expect(parseAddressList('203.0.113.10')).toEqual(['203.0.113.10']);
    expect(parseAddressList(' 203.0.113.10 , 203.0.113.12-203.0.113.14,203.0.113.10')).toEqual([
      '203.0.113.10',
      '203.0.113.12',
      '203.0.113.13',
      '203.0.113.14',
    ]);
    expect(parseAddressList('10.0.0.255-10.0.1.1')).toEqual(['10.0.0.255', '10.0.1.0', '10.0.1.1']);
    expect(parseAddressList('10.0.0.0-10.0.255.255')).toHaveLength(MAX_ADDRESS_LIST);
  });
  it.each([
    ['', 'the list is empty'],
    [' , ', 'the list is empty'],
    ['1.2.3.4,,1.2.3.5', 'an empty item'],
    ['1.2.3.4,', 'an empty item'],
    ['1.2.3.04', '"1.2.3.04" is not an IPv4 address or range a-b'],
    ['1.2.3', '"1.2.3" is not an IPv4 address'],
    ['::1', '"::1" is not an IPv4 address'],
    ['1.2.3.4/30', '"1.2.3.4/30" is not an IPv4 address'],
    ['1.2.3.9-1.2.3.1', 'the range ends before it starts'],
    ['1.2.3.1-1.2.3', 'is not an IPv4 range a-b'],
    ['1.2.3.1-1.2.3.2-1.2.3.3', 'is not an IPv4 address or range'],
    ['host.example', '"host.example" is not an IPv4 address'],
    ['10.0.0.0-10.1.0.0', `more than ${MAX_ADDRESS_LIST} addresses`],
  ])('refuses %j clearly', (list, why) => {
    const r = parseAddressList(list);
    expect(r).toHaveProperty('error');
    expect((r as { error: string }).error).toContain(why);
  });
  it('node names as --node-name takes them', () => {
    for (const ok of ['n1', 'exit-nyc-1', 'a.b_c:d']) expect(isNodeName(ok)).toBe(true);
    for (const bad of ['', '-n', 'no such', 'x'.repeat(64), 'n/1']) expect(isNodeName(bad)).toBe(false);
  });
});
