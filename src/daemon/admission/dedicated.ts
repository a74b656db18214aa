// Dedicated egress addresses as every node holds them in memory (docs/gateway.md, "Dedicated addresses"): the
// whole egress_addresses table, read again when its version moves (polled every 250 ms: a change applies on every
// node within 1 s), answering the gateway's questions synchronously. When an address changes hands, connections
// leaving from it that are no longer its holder's are closed, as are connections of an account that now holds
// addresses here but left from another one.
import { networkInterfaces } from 'node:os';
import type { DedicatedEgress } from '../../gateway/types.js';
import type { EgressHolderRow, Store } from '../store/index.js';

const POLL_MS = 250;

interface Held {
  node: string;
  accountId: number | null;
  /** Epoch ms a quarantine ends (0: none). */
  quarantineUntilMs: number;
}

export interface DedicatedViewOptions {
  /** This node's name (`--node-name`); an entry holds no addresses of its own. */
  node: string;
  /** Closes open connections from a local address that `match` says (the gateway's closeEgressWhere). */
  close?: (match: (address: string, accountId: number) => boolean) => number;
  log?: { warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
  now?: () => number;
}

export class DedicatedView implements DedicatedEgress {
  private byAddress = new Map<string, Held>();
  /** This node's addresses per account. */
  private mine = new Map<number, string[]>();
  /** Nodes per account, fleet-wide. */
  private nodes = new Map<number, Set<string>>();
  private version = -1;
  /** Moves with every table read that changed something, and when a quarantine ends (PoolDialer rebuilds its free list). */
  private gen = 0;
  /** The earliest quarantine end still ahead (ms; Infinity: none). */
  private nextQuarantineEnd = Infinity;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastWarn = 0;
  private readonly now: () => number;
  private static readonly NONE: readonly string[] = [];

  constructor(
    private readonly store: Store,
    private readonly o: DedicatedViewOptions,
  ) {
    this.now = o.now ?? Date.now;
  }

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  here(accountId: number): readonly string[] {
    return this.mine.get(accountId) ?? DedicatedView.NONE;
  }

  holdsAny(accountId: number): boolean {
    return this.nodes.has(accountId);
  }

  reserved(address: string): boolean {
    const h = this.byAddress.get(address);
    return h !== undefined && (h.accountId !== null || h.quarantineUntilMs > this.now());
  }

  generation(): number {
    if (this.now() >= this.nextQuarantineEnd) this.quarantinesEnded();
    return this.gen;
  }

  private quarantinesEnded(): void {
    const now = this.now();
    let next = Infinity;
    for (const h of this.byAddress.values())
      if (h.quarantineUntilMs > now && h.quarantineUntilMs < next) next = h.quarantineUntilMs;
    this.nextQuarantineEnd = next;
    this.gen++;
  }

  nodeOf(accountId: number, ip: string): string | null {
    const h = this.byAddress.get(ip);
    return h !== undefined && h.accountId === accountId ? h.node : null;
  }

  nodesOf(accountId: number): ReadonlySet<string> {
    return this.nodes.get(accountId) ?? new Set();
  }

  /** This node's addresses by state, for /metrics. */
  counts(): Record<'assigned' | 'quarantined' | 'free', number> {
    const c = { assigned: 0, quarantined: 0, free: 0 };
    const now = this.now();
    for (const h of this.byAddress.values()) {
      if (h.node !== this.o.node) continue;
      if (h.accountId !== null) c.assigned++;
      else if (h.quarantineUntilMs > now) c.quarantined++;
      else c.free++;
    }
    return c;
  }

  refresh(): Promise<void> {
    return (this.running ??= this.load()
      .catch((e: unknown) => this.warn(e)) // the database away: keep the last view
      .finally(() => (this.running = null)));
  }

  private warn(e: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.o.log?.warn(
      { event: 'dedicated_refresh_failed', detail: e instanceof Error ? e.message : String(e) },
      'dedicated addresses: keeping the last view',
    );
  }

  private async load(): Promise<void> {
    const version = await this.store.egress.version();
    if (version === this.version) return;
    const rows = await this.store.egress.holders();
    this.apply(rows);
    this.version = version;
  }

  /** The table as read; connections that may no longer leave as they do are closed. */
  apply(rows: readonly EgressHolderRow[]): void {
    const before = this.byAddress;
    const byAddress = new Map<string, Held>();
    const mine = new Map<number, string[]>();
    const nodes = new Map<number, Set<string>>();
    for (const r of rows) {
      byAddress.set(r.address, {
        node: r.node,
        accountId: r.accountId,
        quarantineUntilMs: (r.quarantineUntil ?? 0) * 1000,
      });
      if (r.accountId === null) continue;
      let set = nodes.get(r.accountId);
      if (!set) nodes.set(r.accountId, (set = new Set()));
      set.add(r.node);
      if (r.node === this.o.node) {
        const list = mine.get(r.accountId);
        if (list) list.push(r.address);
        else mine.set(r.accountId, [r.address]);
      }
    }
    const changed = new Set<string>();
    for (const [a, h] of byAddress) {
      const b = before.get(a);
      if (!b || b.accountId !== h.accountId || b.quarantineUntilMs !== h.quarantineUntilMs) changed.add(a);
    }
    for (const a of before.keys()) if (!byAddress.has(a)) changed.add(a);
    this.byAddress = byAddress;
    this.mine = mine;
    this.nodes = nodes;
    this.quarantinesEnded(); // a new generation, and the next quarantine end
    if (!this.o.close || this.version < 0) return;
    const closed = this.o.close((address, accountId) => {
      const owner = byAddress.get(address)?.accountId ?? null;
      if (owner === accountId) return false;
      // The address changed hands (released, replaced, assigned to someone else), or the account now holds
      // addresses and this is not one of them.
      return changed.has(address) || owner !== null || (accountId >= 0 && nodes.has(accountId));
    });
    if (closed > 0)
      this.o.log?.info(
        { event: 'dedicated_connections_closed', connections: closed },
        'connections from addresses that changed hands closed',
      );
  }
}

/**
 * The addresses a node offers for dedicated use: its `--egress-pool`, else its `--egress-address`, else its local
 * IPv4 addresses (loopback's 127.0.0.1 aside, unless it is the only one). `named`: the operator named them (a pool
 * or an address), so the offer replaces the last one; read off the interfaces (perhaps before the network is up),
 * it only adds.
 */
export function offeredAddresses(
  pool: readonly string[] | null,
  egressAddress: string | undefined,
): { addresses: string[]; named: boolean } {
  if (pool && pool.length > 0) return { addresses: [...pool], named: true };
  if (egressAddress && !egressAddress.includes(':')) return { addresses: [egressAddress], named: true };
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces()))
    for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) out.push(i.address);
  return { addresses: out, named: false };
}
