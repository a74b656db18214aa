// Target names resolved off libuv's thread pool. dns.lookup (getaddrinfo) runs on the same four threads as
// password hashing (scrypt) and file I/O: a flood of wrong passwords queued every customer's hostname
// behind the hashes (set-up p50 1 ms → 269 ms; docs/benchmarks/wrong-password-flood.md, "Wrong-password flood"). This resolver
// asks the system's DNS servers through c-ares (dns.Resolver: sockets on the event loop, no pool), answers
// names from /etc/hosts itself (c-ares does not read it), caches answers for their TTL, and folds
// concurrent questions for one name into one query.
import dns from 'node:dns';
import { readFile, stat } from 'node:fs/promises';
import net from 'node:net';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface ResolverOptions {
  /** DNS servers (`ip` or `ip:port`); default: the system's (/etc/resolv.conf). */
  servers?: string[];
  hostsFile?: string;
  /** Per-query timeout and attempts (c-ares). */
  timeoutMs?: number;
  tries?: number;
  /** Cache bounds: names kept, and the TTL range applied to answers (seconds). */
  maxEntries?: number;
  minTtlS?: number;
  maxTtlS?: number;
  /** How long a name that does not resolve is remembered (seconds). */
  negativeTtlS?: number;
  nowMs?: () => number;
}

interface Entry {
  addresses: ResolvedAddress[] | null; // null: the name does not resolve
  expiresAt: number;
}

const HOSTS_RECHECK_MS = 5_000;

/** Parses /etc/hosts text: lower-cased name → its addresses, IPv4 first, in file order. */
export function parseHosts(text: string): Map<string, ResolvedAddress[]> {
  const out = new Map<string, ResolvedAddress[]>();
  for (const raw of text.split('\n')) {
    const [address, ...names] = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (!address || names.length === 0) continue;
    const family = net.isIPv4(address) ? 4 : net.isIPv6(address) ? 6 : 0;
    if (!family) continue;
    for (const name of names) {
      const key = name.toLowerCase();
      const list = out.get(key) ?? [];
      if (!list.some((a) => a.address === address)) list.push({ address, family });
      out.set(key, list);
    }
  }
  for (const list of out.values()) list.sort((a, b) => a.family - b.family);
  return out;
}

export class CachingResolver {
  private readonly resolver: dns.promises.Resolver;
  private readonly cache = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<ResolvedAddress[]>>();
  private hosts = new Map<string, ResolvedAddress[]>();
  private hostsMtimeMs = -1;
  private hostsCheckedAt = -Infinity;
  private hostsLoading: Promise<void> | null = null;
  private readonly now: () => number;

  constructor(private readonly o: ResolverOptions = {}) {
    this.resolver = new dns.promises.Resolver({ timeout: o.timeoutMs ?? 2_000, tries: o.tries ?? 2 });
    if (o.servers?.length) this.resolver.setServers(o.servers);
    this.now = o.nowMs ?? Date.now;
  }

  /** The name's addresses, IPv4 first; rejects (code ENOTFOUND) when it has none. */
  readonly lookup = async (host: string): Promise<ResolvedAddress[]> => {
    const name = host.toLowerCase().replace(/\.$/, '');
    const loading = this.refreshHosts();
    if (loading && this.hostsMtimeMs === -1) await loading; // only the first read is waited for
    const fromHosts =
      this.hosts.get(name) ?? (name === 'localhost' || name.endsWith('.localhost') ? LOCALHOST : undefined);
    if (fromHosts) return fromHosts;
    const hit = this.cache.get(name);
    if (hit && hit.expiresAt > this.now()) return hit.addresses ?? Promise.reject(notFound(host));
    let pending = this.inFlight.get(name);
    if (!pending) {
      pending = this.query(name).finally(() => this.inFlight.delete(name));
      this.inFlight.set(name, pending);
    }
    return pending;
  };

  private async query(name: string): Promise<ResolvedAddress[]> {
    const [v4, v6] = await Promise.allSettled([
      this.resolver.resolve4(name, { ttl: true }),
      this.resolver.resolve6(name, { ttl: true }),
    ]);
    const addresses: ResolvedAddress[] = [];
    let ttl = Infinity;
    for (const [r, family] of [
      [v4, 4],
      [v6, 6],
    ] as const) {
      if (r.status !== 'fulfilled') continue;
      for (const a of r.value) {
        addresses.push({ address: a.address, family });
        ttl = Math.min(ttl, a.ttl);
      }
    }
    const minTtl = this.o.minTtlS ?? 1;
    const maxTtl = this.o.maxTtlS ?? 300;
    if (addresses.length === 0) {
      // A timeout or a server failure is not remembered; an answer that the name has no address is, briefly.
      const codes = [v4, v6].map((r) =>
        r.status === 'rejected' ? (r.reason as NodeJS.ErrnoException).code : 'NODATA',
      );
      if (codes.every((c) => c === 'ENOTFOUND' || c === 'ENODATA' || c === 'NODATA'))
        this.remember(name, null, this.o.negativeTtlS ?? 5);
      throw notFound(name);
    }
    this.remember(name, addresses, Math.min(maxTtl, Math.max(minTtl, ttl)));
    return addresses;
  }

  private remember(name: string, addresses: ResolvedAddress[] | null, ttlS: number): void {
    if (this.cache.size >= (this.o.maxEntries ?? 10_000)) {
      // Drop the oldest insertions first (Map keeps insertion order): bounded, no per-hit bookkeeping.
      let drop = Math.ceil(this.cache.size / 10);
      for (const k of this.cache.keys()) {
        if (drop-- <= 0) break;
        this.cache.delete(k);
      }
    }
    this.cache.delete(name);
    this.cache.set(name, { addresses, expiresAt: this.now() + ttlS * 1000 });
  }

  /** Re-reads the hosts file when it changed (checked at most every 5 s, in the background after the first read). */
  private refreshHosts(): Promise<void> | void {
    const now = this.now();
    if (now - this.hostsCheckedAt < HOSTS_RECHECK_MS) return;
    if (this.hostsLoading) return this.hostsLoading;
    this.hostsCheckedAt = now;
    const file = this.o.hostsFile ?? '/etc/hosts';
    this.hostsLoading = (async () => {
      try {
        const st = await stat(file);
        if (st.mtimeMs !== this.hostsMtimeMs) {
          this.hosts = parseHosts(await readFile(file, 'utf8'));
          this.hostsMtimeMs = st.mtimeMs;
        }
      } catch {
        this.hosts = new Map();
      } finally {
        this.hostsLoading = null;
      }
    })();
    return this.hostsLoading;
  }
}

const LOCALHOST: ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

function notFound(host: string): NodeJS.ErrnoException {
  const e: NodeJS.ErrnoException = new Error(`${host}: no address`);
  e.code = 'ENOTFOUND';
  return e;
}
