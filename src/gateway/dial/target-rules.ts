// Account and service target rules (docs/gateway.md, "Target rules"): deny and allow lists of domain patterns
// and CIDRs, compiled once per change into a reversed-label trie and per-prefix-length sets, so a check costs a
// walk of the name's labels and one lookup per prefix length in use, however many rules a list holds.
import ipaddr from 'ipaddr.js';
import { parseIp } from './target-policy.js';

/** Why a target was refused by rules: the service's (checked first) or the account's. */
export type TargetDenial = 'target_denied' | 'target_denied_service';

/** A list's item that is not a domain pattern or a CIDR, and why. */
export interface RuleItemProblem {
  item: string;
  problem: string;
}

/** Items a list may hold (a bound on memory, far above any real policy). */
export const MAX_RULE_ITEMS = 50_000;

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A name as rules see it: lower-case, without a trailing dot. */
export function ruleName(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** The canonical text of one item (`example.com`, `*.example.com`, `10.0.0.0/8`), or what is wrong with it. */
export function canonicalRuleItem(raw: string): { ok: true; item: string } | { ok: false; problem: string } {
  const text = raw.trim();
  if (text === '') return { ok: false, problem: 'empty item' };
  if (text.includes('/') || text.includes(':') || /^[0-9.]+$/.test(text)) return canonicalCidr(text);
  let name = ruleName(text);
  let prefix = '';
  if (name.startsWith('*.')) {
    prefix = '*.';
    name = name.slice(2);
  }
  if (name.includes('*')) return { ok: false, problem: 'a wildcard may only be the first label (*.example.com)' };
  if (name.length === 0 || name.length > 253) return { ok: false, problem: 'not a domain name' };
  const labels = name.split('.');
  for (const l of labels) {
    if (!LABEL.test(l)) {
      return {
        ok: false,
        problem: /[^\x20-\x7e]/.test(l)
          ? 'not a domain name (write international names in punycode, xn--…)'
          : 'not a domain name',
      };
    }
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1]!)) return { ok: false, problem: 'not a domain name or an IP address' };
  return { ok: true, item: prefix + name };
}

function canonicalCidr(text: string): { ok: true; item: string } | { ok: false; problem: string } {
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const a = parseIp(addrText);
  if (!a) return { ok: false, problem: 'not a CIDR (address/prefix) or a domain name' };
  const mapped = a.kind() === 'ipv4' && addrText.includes(':');
  const max = a.kind() === 'ipv4' ? 32 : 128;
  let bits = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^[0-9]{1,3}$/.test(p)) return { ok: false, problem: 'the prefix length must be a number' };
    bits = Number(p);
    // An IPv4-mapped network (::ffff:10.0.0.0/104) is the IPv4 network it maps.
    if (mapped) bits -= 96;
    if (bits < 0 || bits > max)
      return {
        ok: false,
        problem: `the prefix length must be 0 to ${mapped ? 128 : max}${mapped ? ' (at least 96 for an IPv4-mapped address)' : ''}`,
      };
  }
  const net = ipaddr.parseCIDR(`${a.toString()}/${bits}`);
  const base = (
    a.kind() === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(`${a.toString()}/${bits}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${a.toString()}/${bits}`)
  ).toString();
  if (base !== net[0].toString()) return { ok: false, problem: `host bits set (the network is ${base}/${bits})` };
  return { ok: true, item: `${base}/${bits}` };
}

/**
 * A comma-separated list (`none`: empty) as canonical items, or every item that is wrong: nothing is kept
 * unless all are valid. Duplicates collapse.
 */
export function parseRuleList(
  list: string,
): { ok: true; items: string[] } | { ok: false; problems: RuleItemProblem[] } {
  const trimmed = list.trim();
  if (trimmed.toLowerCase() === 'none') return { ok: true, items: [] };
  const parts = trimmed === '' ? [] : trimmed.split(',');
  if (parts.length > MAX_RULE_ITEMS)
    return {
      ok: false,
      problems: [{ item: `${parts.length} items`, problem: `a list holds at most ${MAX_RULE_ITEMS} items` }],
    };
  const items = new Set<string>();
  const problems: RuleItemProblem[] = [];
  for (const p of parts) {
    const r = canonicalRuleItem(p);
    if (r.ok) items.add(r.item);
    else problems.push({ item: p.trim(), problem: r.problem });
  }
  if (parts.length === 0) problems.push({ item: '', problem: 'empty list (write none to empty it)' });
  return problems.length ? { ok: false, problems } : { ok: true, items: [...items] };
}

/** A node of the reversed-label trie: `tree` = this name and all below it, `below` = only names below it. */
interface LabelNode {
  next: Map<string, LabelNode> | null;
  tree: boolean;
  below: boolean;
}

class DomainTrie {
  private readonly root: LabelNode = { next: null, tree: false, below: false };
  size = 0;

  add(pattern: string): void {
    const below = pattern.startsWith('*.');
    const labels = (below ? pattern.slice(2) : pattern).split('.');
    let n = this.root;
    for (let i = labels.length - 1; i >= 0; i--) {
      n.next ??= new Map();
      let c = n.next.get(labels[i]!);
      if (!c) n.next.set(labels[i]!, (c = { next: null, tree: false, below: false }));
      n = c;
    }
    if (below) n.below = true;
    else n.tree = true;
    this.size++;
  }

  /** `name` already lower-case without a trailing dot. */
  matches(name: string): boolean {
    if (this.size === 0) return false;
    let n = this.root;
    let end = name.length;
    while (end > 0) {
      const dot = name.lastIndexOf('.', end - 1);
      const c = n.next?.get(name.slice(dot + 1, end));
      if (!c) return false;
      n = c;
      if (n.tree) return true;
      end = dot;
      if (n.below && end > 0) return true;
    }
    return false;
  }
}

/** Networks by prefix length: one set lookup per length in use. */
class CidrSet {
  private readonly v4 = new Map<number, Set<number>>();
  private readonly v6 = new Map<number, Set<string>>();
  size = 0;

  add(cidr: string): void {
    const [a, bits] = ipaddr.parseCIDR(cidr);
    if (a.kind() === 'ipv4') {
      let s = this.v4.get(bits);
      if (!s) this.v4.set(bits, (s = new Set()));
      s.add(v4Key(a as ipaddr.IPv4, bits));
    } else {
      let s = this.v6.get(bits);
      if (!s) this.v6.set(bits, (s = new Set()));
      s.add(v6Key(a as ipaddr.IPv6, bits));
    }
    this.size++;
  }

  contains(a: ipaddr.IPv4 | ipaddr.IPv6): boolean {
    if (this.size === 0) return false;
    if (a.kind() === 'ipv4') {
      for (const [bits, s] of this.v4) if (s.has(v4Key(a as ipaddr.IPv4, bits))) return true;
    } else {
      for (const [bits, s] of this.v6) if (s.has(v6Key(a as ipaddr.IPv6, bits))) return true;
    }
    return false;
  }
}

function v4Key(a: ipaddr.IPv4, bits: number): number {
  const o = a.octets;
  const n = ((o[0]! << 24) | (o[1]! << 16) | (o[2]! << 8) | o[3]!) >>> 0;
  return bits === 0 ? 0 : (n & (0xffffffff << (32 - bits))) >>> 0;
}

function v6Key(a: ipaddr.IPv6, bits: number): string {
  let out = '';
  const parts = a.parts;
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
    out += (parts[i]! & mask).toString(16) + ':';
  }
  return out;
}

/** One scope's rules (an account's, or the service's), compiled from canonical items. */
export class TargetRuleSet {
  private readonly denyNames = new DomainTrie();
  private readonly denyNets = new CidrSet();
  private readonly allowNames = new DomainTrie();
  private readonly allowNets = new CidrSet();

  constructor(deny: readonly string[], allow: readonly string[]) {
    for (const i of deny) i.includes('/') ? this.denyNets.add(i) : this.denyNames.add(i);
    for (const i of allow) i.includes('/') ? this.allowNets.add(i) : this.allowNames.add(i);
  }

  get empty(): boolean {
    return this.denyNames.size + this.denyNets.size + this.allowNames.size + this.allowNets.size === 0;
  }

  get hasAllow(): boolean {
    return this.allowNames.size + this.allowNets.size > 0;
  }

  /** Refuses an address (a literal target, or one a name resolved to); `needAllow`: it must be in the allow list. */
  refusesAddress(a: ipaddr.IPv4 | ipaddr.IPv6, needAllow: boolean): boolean {
    return this.denyNets.contains(a) || (needAllow && !this.allowNets.contains(a));
  }

  /**
   * A name: 'refused', 'screen' (its addresses still decide: a deny CIDR, or an allow list only CIDRs can
   * satisfy), 'screen-allow' (its addresses must also be in the allow CIDRs), or 'ok'.
   */
  judgeName(name: string): 'refused' | 'screen' | 'screen-allow' | 'ok' {
    if (this.denyNames.matches(name)) return 'refused';
    const needAllow = this.hasAllow && !this.allowNames.matches(name);
    if (needAllow) return this.allowNets.size > 0 ? 'screen-allow' : 'refused';
    return this.denyNets.size > 0 ? 'screen' : 'ok';
  }
}

/** The rules a connection's target is checked against: the service's first, then its account's, then its proxy user's (null: none). */
export interface TargetRuleSets {
  service: TargetRuleSet | null;
  account: TargetRuleSet | null;
  user?: TargetRuleSet | null;
}

/** What the addresses a name resolves to must pass before one is dialled. */
export class AddressScreen {
  constructor(
    private readonly sets: TargetRuleSets,
    private readonly needAllow: { service: boolean; account: boolean; user?: boolean },
  ) {}

  /** A refusal for this resolved address, or null. */
  check(address: string): TargetDenial | null {
    const a = parseIp(address);
    if (!a) return null;
    if (this.sets.service?.refusesAddress(a, this.needAllow.service)) return 'target_denied_service';
    if (this.sets.account?.refusesAddress(a, this.needAllow.account)) return 'target_denied';
    if (this.sets.user?.refusesAddress(a, this.needAllow.user ?? false)) return 'target_denied';
    return null;
  }
}

/**
 * The target as the client asked for it (CONNECT authority, absolute-form host, SOCKS5 name or address): a
 * refusal, an AddressScreen for the addresses the name resolves to, or null (nothing more to check).
 */
export function judgeTarget(sets: TargetRuleSets, host: string): { denied: TargetDenial } | AddressScreen | null {
  if (!sets.service && !sets.account && !sets.user) return null;
  const literal = parseIp(host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);
  if (literal) {
    if (sets.service?.refusesAddress(literal, sets.service.hasAllow)) return { denied: 'target_denied_service' };
    if (sets.account?.refusesAddress(literal, sets.account.hasAllow)) return { denied: 'target_denied' };
    if (sets.user?.refusesAddress(literal, sets.user.hasAllow)) return { denied: 'target_denied' };
    return null;
  }
  const name = ruleName(host);
  const s = sets.service?.judgeName(name) ?? 'ok';
  if (s === 'refused') return { denied: 'target_denied_service' };
  const a = sets.account?.judgeName(name) ?? 'ok';
  if (a === 'refused') return { denied: 'target_denied' };
  // A proxy user's own rules after its account's: they narrow what the account allows, never widen it.
  const u = sets.user?.judgeName(name) ?? 'ok';
  if (u === 'refused') return { denied: 'target_denied' };
  if (s === 'ok' && a === 'ok' && u === 'ok') return null;
  return new AddressScreen(sets, {
    service: s === 'screen-allow',
    account: a === 'screen-allow',
    user: u === 'screen-allow',
  });
}
