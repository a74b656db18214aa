// `--egress-pool`: parsing the list (IPv4 addresses, or one IPv6 prefix), the bind check at start, and
// where sticky sessions live. With `--workers N` the primary holds the one session table and workers ask it
// over IPC (caching each answer until the session ends), so a session leaves from one address whichever
// worker takes its connection. Over an IPv6 prefix the primary also picks the session's random address.
import cluster, { type Worker } from 'node:cluster';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { isStrictIPv4 } from '../../contract/ipv4.js';
import {
  AddressSessionTable,
  EgressPrefix,
  SessionTable,
  type ExpiringSessions,
  type HeldAddress,
  type StickyAddresses,
  type StickyAssignment,
  type StickySessions,
} from '../../gateway/index.js';

/** A CIDR block larger than this (/22) is refused: it is almost surely a typo for a smaller one. */
const MAX_BLOCK = 1024;
/** All items of one pool together. */
const MAX_POOL = 65_536;

const toInt = (ip: string): number => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const toIp = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/** `a,b`, ranges `a-b`, CIDR `a/n` (n ≥ 22), IPv4 only; duplicates dropped, order kept. An error names the item. */
export function parseEgressPool(list: string): string[] | { error: string } {
  const out = new Set<string>();
  for (const item of list.split(',').map((x) => x.trim())) {
    if (!item) continue;
    let from: number;
    let to: number;
    const range = /^([^-/]+)-([^-/]+)$/.exec(item);
    const cidr = /^([^-/]+)\/(\d{1,2})$/.exec(item);
    if (range) {
      if (!isStrictIPv4(range[1]) || !isStrictIPv4(range[2])) return { error: `"${item}" is not an IPv4 range a-b` };
      [from, to] = [toInt(range[1]), toInt(range[2])];
      if (to < from) return { error: `"${item}": the range ends before it starts` };
    } else if (cidr) {
      const bits = Number(cidr[2]);
      if (!isStrictIPv4(cidr[1]) || bits > 32) return { error: `"${item}" is not an IPv4 CIDR block` };
      if (bits < 22) return { error: `"${item}": blocks larger than /22 (1,024 addresses) are refused` };
      const size = 2 ** (32 - bits);
      from = toInt(cidr[1]) - (toInt(cidr[1]) % size);
      to = from + size - 1;
    } else if (isStrictIPv4(item)) {
      from = to = toInt(item);
    } else return { error: `"${item}" is not an IPv4 address, range a-b or CIDR block` };
    if (to - from + 1 > MAX_BLOCK) return { error: `"${item}": ranges larger than ${MAX_BLOCK} addresses are refused` };
    for (let n = from; n <= to; n++) out.add(toIp(n));
    if (out.size > MAX_POOL) return { error: `more than ${MAX_POOL} addresses in the pool` };
  }
  if (out.size === 0) return { error: 'the pool is empty' };
  return [...out];
}

/**
 * `--egress-pool` as given: IPv4 items (parseEgressPool), or exactly one IPv6 prefix (/48 … /112). Mixing the
 * two, or several prefixes, is refused. An error names the item.
 */
export function parseEgress(list: string): { addresses: string[] } | { prefix: EgressPrefix } | { error: string } {
  const items = list
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const v6 = items.filter((x) => x.includes(':'));
  if (v6.length === 0) {
    const addresses = parseEgressPool(list);
    return 'error' in addresses ? addresses : { addresses };
  }
  if (v6.length < items.length) {
    const v4 = items.find((x) => !x.includes(':'))!;
    return { error: `"${v4}" and "${v6[0]}": a pool is IPv4 addresses or one IPv6 prefix, not both` };
  }
  if (v6.length > 1) return { error: `"${v6[1]}": an IPv6 pool is exactly one prefix (got ${v6.length})` };
  const prefix = EgressPrefix.parse(v6[0]!);
  return prefix instanceof EgressPrefix ? { prefix } : prefix;
}

/** Binds a socket to addr:0 and closes it: null, or why it could not (the error's code). */
function bindProblem(address: string): Promise<string | null> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    s.listen({ host: address, port: 0, exclusive: true }, () => s.close(() => resolve(null)));
  });
}

/** Every pool address must be ours: each must bind. Throws naming the first that fails. */
export async function checkBindable(addresses: readonly string[], flag = '--egress-pool'): Promise<void> {
  for (let i = 0; i < addresses.length; i += 64) {
    const batch = addresses.slice(i, i + 64);
    const errs = await Promise.all(batch.map(bindProblem));
    const bad = errs.findIndex((e) => e !== null);
    if (bad >= 0) {
      const err = new Error(
        `${flag}: cannot bind ${batch[bad]} (${errs[bad]}): this host does not own it`,
      ) as NodeJS.ErrnoException;
      err.code = 'EGRESS_UNBINDABLE';
      throw err;
    }
  }
}

/** How to make an IPv6 prefix usable: docs/operations.md (Egress pool) says the same. */
export function prefixHowTo(prefix: EgressPrefix): string {
  return `run \`ip -6 route add local ${prefix.text} dev lo\` (or the real interface) and \`sysctl -w net.ipv6.ip_nonlocal_bind=1\` (docs/operations.md, Egress pool)`;
}

/** Linux's RTF_LOCAL in /proc/net/ipv6_route: the route delivers to this host (an `ip -6 route add local`). */
const RTF_LOCAL = 0x80000000;

/**
 * Whether a local route (any table) covers the address: null when the kernel's table cannot be read (not
 * Linux). Read from /proc rather than by sending anything: a connect to an address not routed here would leave
 * the host.
 */
async function hasLocalRoute(address: string, routes = '/proc/net/ipv6_route'): Promise<boolean | null> {
  let text: string;
  try {
    text = await readFile(routes, 'utf8');
  } catch {
    return null;
  }
  const addr = ipaddr.IPv6.parse(address);
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[0]!.length !== 32) continue;
    const flags = Number.parseInt(f[8]!, 16);
    if (!(flags & RTF_LOCAL)) continue;
    const bits = Number.parseInt(f[1]!, 16);
    const net6 = ipaddr.IPv6.parse(f[0]!.match(/.{4}/g)!.join(':'));
    if (addr.match(net6, bits)) return true;
  }
  return false;
}

/**
 * An IPv6 prefix must be routed to this host and bindable: a random address of it must have a local route
 * and bind (port 0). Throws (code EGRESS_UNBINDABLE, as checkBindable) naming the prefix and what to run.
 */
export async function checkPrefixBindable(prefix: EgressPrefix, routes?: string): Promise<void> {
  const address = prefix.randomAddress();
  const fail = (why: string) => {
    const err = new Error(
      `--egress-pool ${prefix.text}: cannot use ${address} (${why}): ${prefixHowTo(prefix)}`,
    ) as NodeJS.ErrnoException;
    err.code = 'EGRESS_UNBINDABLE';
    return err;
  };
  if ((await hasLocalRoute(address, routes)) === false) throw fail('the prefix has no local route on this host');
  const bindError = await bindProblem(address);
  if (bindError) throw fail(`${bindError}: non-local binds are off`);
}

const ASK = 'proxyd:egress-session';
const ANSWER = 'proxyd:egress-session-res';
const ASK_ADDRESS = 'proxyd:egress-address';
const ANSWER_ADDRESS = 'proxyd:egress-address-res';
const ASK_TIMEOUT_MS = 2000;

type Ask = { type: string; id: number; key: string; minutes: number };
type Answer<V> = { type: string; id: number; held: V };

/** A table the primary assigns from (and a worker caches in). */
type Table<V extends { expiresAt: number }> = ExpiringSessions<V> & { assign(key: string, minutes: number): V };

/** The primary's side of one kind of table: answers every worker's asks. */
function serveTable<V extends { expiresAt: number }>(ask: string, answer: string, table: Table<V>): void {
  cluster.on('message', (worker: Worker, m: Ask) => {
    if (m?.type !== ask || typeof m.key !== 'string' || typeof m.minutes !== 'number') return;
    const held = table.assign(m.key, m.minutes);
    if (worker.isConnected()) worker.send({ type: answer, id: m.id, held } satisfies Answer<V>);
  });
}

/** The primary's side: one table for every worker. Call once, before forking. */
export function serveStickySessions(poolSize: number, now: () => number = Date.now): SessionTable {
  const table = new SessionTable(poolSize, { now });
  serveTable(ASK, ANSWER, table);
  return table;
}

/** The primary's side over an IPv6 prefix: it picks each session's address. Call once, before forking. */
export function serveStickyAddresses(prefix: EgressPrefix, now: () => number = Date.now): AddressSessionTable {
  const table = new AddressSessionTable(() => prefix.randomAddress(), { now });
  serveTable(ASK_ADDRESS, ANSWER_ADDRESS, table);
  return table;
}

/** A worker's side: ask the primary once per session, then answer from the cache until the session ends. */
class AskPrimary<V extends { expiresAt: number }> {
  private readonly pending = new Map<string, Promise<V>>();
  private readonly waiting = new Map<number, (a: V | null) => void>();
  private nextId = 0;

  constructor(
    private readonly kind: { ask: string; answer: string },
    private readonly cache: Table<V>,
  ) {
    process.on('message', (m: Answer<V>) => {
      if (m?.type !== kind.answer) return;
      this.waiting.get(m.id)?.(m.held);
    });
  }

  assign(key: string, minutes: number): V | Promise<V> {
    const hit = this.cache.get(key);
    if (hit) return hit;
    let p = this.pending.get(key);
    if (!p) {
      p = this.ask(key, minutes).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  private ask(key: string, minutes: number): Promise<V> {
    const id = this.nextId++;
    return new Promise<V | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), ASK_TIMEOUT_MS);
      this.waiting.set(id, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
      process.send?.({ type: this.kind.ask, id, key, minutes } satisfies Ask);
    }).then((a) => {
      this.waiting.delete(id);
      // Primary unreachable (it is going away): stick within this worker rather than fail the connection.
      if (!a) return this.cache.assign(key, minutes);
      this.cache.remember(key, a);
      return a;
    });
  }
}

/** Where this serving process keeps sticky sessions: its own table, or (a cluster worker) the primary's. */
export function stickySessionsFor(poolSize: number): StickySessions {
  return cluster.isWorker
    ? new AskPrimary<StickyAssignment>({ ask: ASK, answer: ANSWER }, new SessionTable(poolSize))
    : new SessionTable(poolSize);
}

/** The same over an IPv6 prefix: the session's address comes from this process's table or the primary's. */
export function stickyAddressesFor(prefix: EgressPrefix): StickyAddresses {
  const table = new AddressSessionTable(() => prefix.randomAddress());
  return cluster.isWorker ? new AskPrimary<HeldAddress>({ ask: ASK_ADDRESS, answer: ANSWER_ADDRESS }, table) : table;
}
