// The address lists of dedicated egress addresses (`proxyd admin ip assign|release --addresses LIST`,
// docs/admin.md "ip"): IPv4 addresses and ranges `a-b`, comma-separated. An error names the item.
import { isStrictIPv4 } from '../rules/ipv4-syntax.js';

/** At most this many addresses in one list (a range of a /16). */
export const MAX_ADDRESS_LIST = 65_536;

export const ipv4ToInt = (ip: string): number => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
export const intToIpv4 = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/** `a,b`, ranges `a-b`; duplicates dropped, order kept; `{ error }` names the first bad item. */
export function parseAddressList(list: string): string[] | { error: string } {
  const out = new Set<string>();
  const items = list.split(',').map((x) => x.trim());
  if (items.every((x) => x === '')) return { error: 'the list is empty' };
  for (const item of items) {
    if (item === '') return { error: 'an empty item (two commas, or one at an end)' };
    const range = /^([^-]+)-([^-]+)$/.exec(item);
    let from: number;
    let to: number;
    if (range) {
      const [a, b] = [range[1]!.trim(), range[2]!.trim()];
      if (!isStrictIPv4(a) || !isStrictIPv4(b)) return { error: `"${item}" is not an IPv4 range a-b` };
      [from, to] = [ipv4ToInt(a), ipv4ToInt(b)];
      if (to < from) return { error: `"${item}": the range ends before it starts` };
    } else if (isStrictIPv4(item)) from = to = ipv4ToInt(item);
    else return { error: `"${item}" is not an IPv4 address or range a-b` };
    if (to - from + 1 > MAX_ADDRESS_LIST) return { error: `"${item}": more than ${MAX_ADDRESS_LIST} addresses` };
    for (let n = from; n <= to; n++) out.add(intToIpv4(n));
    if (out.size > MAX_ADDRESS_LIST) return { error: `more than ${MAX_ADDRESS_LIST} addresses in the list` };
  }
  return [...out];
}

/** Node names as `--node-name` takes them. */
export function isNodeName(name: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$/.test(name);
}
