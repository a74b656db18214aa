// Shared state of one gateway: limits, admission with per-account slots, target resolution under
// the SSRF policy, outgoing dials bound to the egress address, and the counters behind stats().
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { ClientConn } from './conn.js';
import { resolveLimits } from './limits.js';
import { destroySelf, Tunnels } from './splice.js';
import { canonicalIp, checkTarget, parseIp, type TargetRefusal } from './target-policy.js';
import type { AdmitFailure, GatewayLimits, GatewayOptions, GatewayStats } from './types.js';

export type AdmitOutcome =
  | { ok: true; accountId: number }
  | { ok: false; reason: AdmitFailure | 'admission_error' };

export type ResolveOutcome =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; reason: TargetRefusal | 'dns_failed' | 'no_usable_address' };

export type DialFailure = 'refused' | 'net_unreachable' | 'host_unreachable' | 'timeout';

type Lookup = (host: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

const defaultLookup: Lookup = async (host) => {
  const list = await dns.promises.lookup(host, { all: true });
  return list.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export class GatewayCore {
  readonly limits: GatewayLimits;
  readonly stats: GatewayStats;
  readonly conns = new Set<ClientConn>();
  readonly tunnels: Tunnels;
  private readonly perAccount = new Map<number, number>();
  private readonly trusted: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
  private readonly lookup: Lookup;
  private readonly egressFamily: 4 | 6 | null;
  /** The gateway's own bound addresses, refused as targets like the daemon's listeners. */
  ownAddresses: Array<{ host: string; port: number }> = [];

  constructor(readonly opts: GatewayOptions) {
    this.limits = resolveLimits(opts.limits);
    this.tunnels = new Tunnels(this.limits.idleTimeoutMs);
    this.trusted = opts.proxyProtocolFrom.map((c) => {
      const text = c.includes('/') ? c : `${c}/${c.includes(':') ? 128 : 32}`;
      return ipaddr.parseCIDR(text);
    });
    this.lookup = opts.lookup ?? defaultLookup;
    this.egressFamily = opts.egressAddress ? (net.isIPv6(opts.egressAddress) ? 6 : 4) : null;
    this.stats = {
      connectionsOpen: 0,
      connectionsTotal: { http: 0, connect: 0, socks5: 0 },
      admissionFailures: {},
      targetRefusals: {},
      bytesUp: 0,
      bytesDown: 0,
    };
  }

  isTrustedPeer(ip: string): boolean {
    if (this.trusted.length === 0) return false;
    const a = parseIp(ip);
    if (!a) return false;
    for (const [net, bits] of this.trusted) if (net.kind() === a.kind() && a.match(net, bits)) return true;
    return false;
  }

  countFailure(reason: string): void {
    this.stats.admissionFailures[reason] = (this.stats.admissionFailures[reason] ?? 0) + 1;
  }

  countRefusal(reason: string): void {
    this.stats.targetRefusals[reason] = (this.stats.targetRefusals[reason] ?? 0) + 1;
  }

  /** Admit a new connection and take one of its account's connection slots. */
  async admit(creds: { username: string; password: string } | null, sourceIp: string | null): Promise<AdmitOutcome> {
    let out: AdmitOutcome;
    try {
      if (creds) out = await this.opts.admission.admitByCredentials(creds.username, creds.password);
      else if (sourceIp && net.isIPv4(sourceIp)) out = await this.opts.admission.admitBySourceIp(sourceIp);
      else out = { ok: false, reason: 'not_whitelisted' };
    } catch (err) {
      this.opts.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'gateway admission failed');
      out = { ok: false, reason: 'admission_error' };
    }
    if (out.ok) {
      const n = this.perAccount.get(out.accountId) ?? 0;
      if (n >= this.limits.maxConnectionsPerAccount) out = { ok: false, reason: 'over_connection_limit' };
      else {
        this.perAccount.set(out.accountId, n + 1);
        this.opts.traffic?.connectionOpened(out.accountId);
      }
    }
    if (!out.ok) this.countFailure(out.reason);
    return out;
  }

  releaseSlot(accountId: number, bytesUp: number, bytesDown: number): void {
    const n = (this.perAccount.get(accountId) ?? 1) - 1;
    if (n <= 0) this.perAccount.delete(accountId);
    else this.perAccount.set(accountId, n);
    this.opts.traffic?.connectionClosed(accountId, bytesUp, bytesDown);
  }

  /** Resolve a target and pick the first address the policy allows: that is the one to dial. */
  async resolveTarget(host: string, port: number): Promise<ResolveOutcome> {
    let candidates: Array<{ address: string; family: 4 | 6 }>;
    const literal = parseIp(host);
    if (literal) {
      candidates = [{ address: literal.toString(), family: literal.kind() === 'ipv4' ? 4 : 6 }];
    } else {
      try {
        candidates = await this.lookup(host);
      } catch {
        return { ok: false, reason: 'dns_failed' };
      }
      candidates = candidates.map((c) => {
        const text = canonicalIp(c.address);
        return { address: text, family: net.isIPv4(text) ? 4 : 6 };
      });
      if (candidates.length === 0) return { ok: false, reason: 'dns_failed' };
    }
    if (this.egressFamily) candidates = candidates.filter((c) => c.family === this.egressFamily);
    if (candidates.length === 0) return { ok: false, reason: 'no_usable_address' };
    let refusal: TargetRefusal | null = null;
    const policy = {
      allowPrivateTargets: this.opts.allowPrivateTargets,
      ownListeners: () => [...this.opts.ownListeners(), ...this.ownAddresses],
    };
    for (const c of candidates) {
      const r = checkTarget(c.address, port, policy);
      if (r === null) return { ok: true, address: c.address, family: c.family };
      refusal ??= r;
    }
    this.countRefusal(refusal as TargetRefusal);
    return { ok: false, reason: refusal as TargetRefusal };
  }

  /** Start an outgoing connection; `onDone` fires once, with null on success. */
  dial(address: string, family: 4 | 6, port: number, onDone: (err: DialFailure | null) => void): net.Socket {
    const socket = net.connect({
      host: address,
      port,
      family,
      localAddress: this.opts.egressAddress,
      allowHalfOpen: true,
      noDelay: true,
    });
    let done = false;
    const finish = (err: DialFailure | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeListener('connect', onConnect);
      socket.removeListener('error', onError);
      // Never an unhandled 'error' (which would crash the process) before the pump attaches its own.
      socket.on('error', destroySelf);
      onDone(err);
    };
    const onConnect = (): void => finish(null);
    const onError = (err: NodeJS.ErrnoException): void => {
      socket.destroy();
      finish(dialFailure(err.code));
    };
    const timer = setTimeout(() => {
      socket.destroy();
      finish('timeout');
    }, this.limits.connectTimeoutMs);
    socket.once('connect', onConnect);
    socket.once('error', onError);
    return socket;
  }
}

function dialFailure(code: string | undefined): DialFailure {
  switch (code) {
    case 'ECONNREFUSED':
      return 'refused';
    case 'ENETUNREACH':
      return 'net_unreachable';
    case 'ETIMEDOUT':
      return 'timeout';
    default:
      return 'host_unreachable';
  }
}
