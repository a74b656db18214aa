// Shared state of one gateway: limits, admission with per-account slots (and the username's sticky
// session), the dialer every handler reaches targets through (dialer.ts), and the counters behind stats().
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { ByteBudget } from './relay/byte-budget.js';
import type { RateBudget } from './relay/rate-budget.js';
import {
  DedicatedDialer,
  DirectDialer,
  LocatedDialer,
  OwnListenerGuard,
  PoolDialer,
  PrefixDialer,
  type Dialer,
  type EgressSession,
  type ExitWish,
} from './dial/dialer.js';
import { resolveLimits } from './limits.js';
import { AddressScreen, judgeTarget } from './dial/target-rules.js';
import { Tunnels } from './relay/open-tunnels.js';
import { LiveSet, type LiveMember } from './relay/live-set.js';
import { canonicalIp, parseIp } from './dial/target-policy.js';
import type {
  AdmitFailure,
  AdmitResult,
  DedicatedEgress,
  EgressUsageDelta,
  GatewayLimits,
  GatewayOptions,
  GatewayStats,
  CloseCause,
  RefusalReason,
  UsageDelta,
} from './types.js';
import { parseProxyUsername, type ProxyUsername } from '../rules/proxy-username.js';
import { ipSubject, usageKey, userSubject } from '../rules/usage-key.js';

export type { DialFailure, ResolveOutcome } from './dial/dialer.js';

export type AdmitOutcome =
  | {
      ok: true;
      accountId: number;
      session: EgressSession | null;
      subject: string;
      budget?: ByteBudget | null;
      rate?: RateBudget | null;
      exitWish?: ExitWish | null;
      key?: string;
      pin?: string | null;
    }
  | { ok: false; reason: AdmitFailure | 'admission_error'; accountId?: number | undefined };

/** What the core tracks of a live client connection (conn.ts's ClientConn), without importing it. */
export interface LiveConn extends LiveMember {
  readonly state: string;
  bytesUp: number;
  bytesDown: number;
  /** Admitted: its account (else -1) and what its bytes count for. */
  accountId: number;
  meterSubject: string;
  /** usageKey(accountId, meterSubject), made once at admission ('' before). */
  slotKey: string;
  /** The host its bytes went to lately (null: none dialled yet), and whether its connection is still to be counted. */
  meterTarget: string | null;
  connectionUnmetered: boolean;
  /**
   * `relaying`: it reached its target (a tunnel, a forwarded request, a UDP association); `refused`: it was
   * answered by the gateway instead (its record says refused). A connection is counted in the usage only as
   * the connection log calls it admitted: relaying, or ended without asking for a target, never refused.
   */
  connectionFate: 'pending' | 'relaying' | 'refused';
  /** The byte budget its bytes pass under (a traffic limit on its account or user), else null. */
  budget: ByteBudget | null;
  /** The rate budget its bytes pass under (a rate limit on its user or account), else null. */
  rate: RateBudget | null;
  /** The dedicated address it leaves from (an account holding some; null: none, or not counted by address). */
  egressAddress: string | null;
  /** Bytes already handed to the meter. */
  meteredUp: number;
  meteredDown: number;
  destroy(): void;
  /** Closed by a change to its account or user: answered `cause` first when it has had no answer yet. */
  cut(cause: CloseCause): void;
}

/**
 * Request ids: a random prefix per process (48 bits) and a counter, so ids are unique across a fleet without
 * coordination and cost one string per connection. Support searches the connection log by it.
 */
const ID_PREFIX = randomBytes(6).toString('hex');

/** Upper bounds (ms) of the set-up time histogram (accept to relaying; /metrics `proxyd_gateway_setup_seconds`). */
export const SETUP_BOUNDS_MS: readonly number[] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/** A target host as usage is kept under it: lower-case, without a trailing dot, IPv6 without brackets. */
export function meterHost(host: string): string {
  const h = host.toLowerCase();
  // Most targets need nothing more (no brackets, no trailing dot, no colon): no regex per connection.
  if (h.charCodeAt(0) !== 0x5b && h.charCodeAt(h.length - 1) !== 0x2e && !h.includes(':')) return h;
  const bare = h.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  // An IPv6 literal under one spelling, whichever the client wrote (`0:0::1`, `::1`): RFC 5952's.
  return bare.includes(':') ? canonicalIp(bare) : bare;
}

/**
 * An `Admitter`'s answer that is still to come: a promise, or any thenable (one from another realm or library),
 * which `instanceof Promise` would take for an answer.
 */
function isThenable<T>(x: T | PromiseLike<T>): x is PromiseLike<T> {
  return typeof (x as { then?: unknown } | null)?.then === 'function';
}

/** What whitelist admission of `sourceIp` gives the gateway. */
function byIp(r: AdmitResult, sourceIp: string): AdmitOutcome {
  return r.ok
    ? { ok: true, accountId: r.accountId, session: null, subject: ipSubject(sourceIp) }
    : { ok: false, reason: r.reason, accountId: r.accountId };
}

/**
 * What credentials' admission gives the gateway: metered for the user that matched (a parameterised username's base
 * user). A `-ip-` address must be one of the account's dedicated addresses (`bad_ip_parameter`, the same 407).
 */
function byUser(
  out: AdmitResult,
  username: string,
  parsed: ProxyUsername,
  dedicated: DedicatedEgress | undefined,
): AdmitOutcome {
  if (!out.ok) return { ok: false, reason: out.reason, accountId: out.accountId };
  // The base user of parameters that do not parse: its password matched, so its account hears why (same 407).
  if (parsed.kind === 'malformed' && out.user !== username)
    return { ok: false, reason: 'bad_username_params', accountId: out.accountId };
  const subject = userSubject(out.user ?? username);
  if (parsed.kind === 'params' && out.user === parsed.user) {
    const session =
      parsed.session === null
        ? null
        : { key: `${out.accountId}:${parsed.user}:${parsed.session}`, minutes: parsed.minutes };
    const exitWish =
      parsed.country === null && parsed.city === null ? null : { country: parsed.country, city: parsed.city };
    if (parsed.ip !== undefined) {
      if (!dedicated || dedicated.nodeOf(out.accountId, parsed.ip) === null)
        return { ok: false, reason: 'bad_ip_parameter', accountId: out.accountId };
      return { ok: true, accountId: out.accountId, session, subject, exitWish, pin: parsed.ip };
    }
    return { ok: true, accountId: out.accountId, session, subject, exitWish };
  }
  return { ok: true, accountId: out.accountId, session: null, subject };
}

export class GatewayCore {
  private requestSeq = 0;
  readonly limits: GatewayLimits;
  readonly stats: GatewayStats;
  /** Open client connections (not a Set: live-set.ts says why). */
  readonly conns = new LiveSet<LiveConn>();
  /**
   * Connections not admitted yet (in their handshake, or answered with a refusal), by source (target-policy.ts sourceKey; a
   * trusted PROXY peer's are not counted, it carries many clients): one host's idle or junk connections cannot take the whole total.
   */
  readonly handshaking = new Map<string, number>();
  readonly tunnels: Tunnels;
  private readonly perAccount = new Map<number, number>();
  /** Open connections per account and subject, for per-user caps. */
  private readonly perSubject = new Map<string, number>();
  /** Usage not yet collected: ended connections' last bytes, admissions. Key: account id, subject and target. */
  private usage = new Map<string, UsageDelta>();
  /** Usage by dedicated address not yet collected (collectUsage moves it out with the rest). Key: account id and address. */
  private egressUsage = new Map<string, EgressUsageDelta>();
  private lastAdmissionErrorLog = 0;
  private readonly trusted: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
  /** How every handler reaches a target (forward, CONNECT, SOCKS5). */
  readonly dialer: Dialer;
  readonly localDialer: Dialer;
  /** Open outgoing connections and UDP associations by the local address they leave from (closed when it changes hands). */
  readonly egressOpen = new Map<{ destroy(): void }, { address: string; accountId: number }>();
  /** The gateway's own bound addresses, refused as targets like the daemon's listeners. */
  ownAddresses: Array<{ host: string; port: number }> = [];

  constructor(readonly opts: GatewayOptions) {
    this.limits = resolveLimits(opts.limits);
    this.tunnels = new Tunnels(this.limits.idleTimeoutMs);
    this.trusted = opts.proxyProtocolFrom.map((c) => {
      const text = c.includes('/') ? c : `${c}/${c.includes(':') ? 128 : 32}`;
      return ipaddr.parseCIDR(text);
    });
    this.stats = {
      connectionsOpen: 0,
      connectionsTotal: { http: 0, connect: 0, socks5: 0 },
      admissionFailures: {},
      targetRefusals: {},
      refusals: {},
      setup: { boundsMs: SETUP_BOUNDS_MS, counts: new Array<number>(SETUP_BOUNDS_MS.length + 1).fill(0), sumMs: 0 },
      bytesUp: 0,
      bytesDown: 0,
      egressConnections: {},
      udp: { associationsOpen: 0, datagramsUp: 0, datagramsDown: 0, bytesUp: 0, bytesDown: 0, dropped: {} },
    };
    const pool = opts.egressPool;
    const prefix = opts.egressPrefix;
    const direct = new DirectDialer({
      localAddress: opts.egressAddress,
      family: pool ? 4 : prefix ? 6 : opts.egressAddress ? (net.isIPv6(opts.egressAddress) ? 6 : 4) : null,
      allowPrivateTargets: opts.allowPrivateTargets,
      ownListeners: () => [...this.opts.ownListeners(), ...this.ownAddresses],
      connectTimeoutMs: this.limits.connectTimeoutMs,
      lookup: opts.lookup,
      countRefusal: (r) => this.countRefusal(r),
      countEgress: (a) => {
        const e = this.stats.egressConnections;
        e[a] = (e[a] ?? 0) + 1;
      },
      trackEgress: opts.dedicated
        ? (socket, address, accountId) => this.trackEgress(socket, address, accountId)
        : undefined,
    });
    const dedicated = opts.dedicated;
    const shared = pool
      ? new PoolDialer(direct, pool.addresses, pool.sessions, dedicated ?? null)
      : prefix
        ? new PrefixDialer(direct, prefix.prefix, prefix.sessions)
        : direct;
    // Dedicated addresses first: an account holding some leaves from them only; the rest share what is left.
    const local: Dialer = dedicated ? new DedicatedDialer(direct, shared, dedicated) : shared;
    // An entry reaches every target through an exit; a `both` node dials here, within its own location.
    this.dialer = opts.exitDialer
      ? new OwnListenerGuard(
          opts.exitDialer,
          () => [...this.opts.ownListeners(), ...this.ownAddresses],
          (r) => this.countRefusal(r),
        )
      : new LocatedDialer(local, opts.location ?? null);
    /** What an exit's hop dials with: this node's own dialer, whatever the username asked (the entry chose). */
    this.localDialer = local;
  }

  /** The account's and the service's target rules on a target as asked: a refusal, a screen for what it resolves to, or null. */
  judgeTarget(accountId: number, host: string, subject?: string): ReturnType<typeof judgeTarget> {
    const rules = this.opts.targetRules;
    let judged: ReturnType<typeof judgeTarget> = null;
    if (rules && accountId >= 0) {
      const sets = rules.forAccount(accountId);
      const user = subject && rules.forUser ? rules.forUser(accountId, subject) : null;
      judged = judgeTarget(user ? { ...sets, user } : sets, host);
    }
    if (judged && !(judged instanceof AddressScreen)) this.countRefusal(judged.denied);
    return judged;
  }

  /** An outgoing connection or UDP association from `address`, until it closes. */
  trackEgress(
    socket: { destroy(): void; once(event: 'close', f: () => void): unknown },
    address: string,
    accountId: number,
  ): void {
    this.egressOpen.set(socket, { address, accountId });
    socket.once('close', () => this.egressOpen.delete(socket));
  }

  closeEgressWhere(match: (address: string, accountId: number) => boolean): number {
    let n = 0;
    for (const [s, e] of [...this.egressOpen]) {
      if (match(e.address, e.accountId)) {
        this.egressOpen.delete(s);
        s.destroy();
        n++;
      }
    }
    return n;
  }

  countUdpDrop(reason: string): void {
    const d = this.stats.udp.dropped;
    d[reason] = (d[reason] ?? 0) + 1;
  }

  nextRequestId(): string {
    return `${ID_PREFIX}-${(++this.requestSeq).toString(36).padStart(6, '0')}`;
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

  /** A connection refused, by its log reason (every refusal, whichever check made it); a throttled login apart. */
  countRefused(reason: RefusalReason): void {
    const r = this.stats.refusals;
    r[reason] = (r[reason] ?? 0) + 1;
  }

  /** A connection reached its target `ms` after it was accepted. */
  countSetup(ms: number): void {
    const s = this.stats.setup;
    let i = 0;
    while (i < SETUP_BOUNDS_MS.length && ms > SETUP_BOUNDS_MS[i]!) i++;
    s.counts[i]!++;
    s.sumMs += ms;
  }

  /**
   * Admit a new connection and take one of its account's connection slots. Answered in the caller's turn when
   * the admitter answers at once (verified credentials, a whitelisted address) and the plan needs no reading:
   * a promise only when something is awaited (decisions.md#d-040, "Admission answered in its own turn").
   */
  admit(
    creds: { username: string; password: string } | null,
    sourceIp: string | null,
  ): AdmitOutcome | Promise<AdmitOutcome> {
    let out: AdmitOutcome | Promise<AdmitOutcome>;
    try {
      if (creds) out = this.admitUser(creds.username, creds.password, sourceIp);
      else if (sourceIp && net.isIPv4(sourceIp)) {
        const r = this.opts.admission.admitBySourceIp(sourceIp);
        out = isThenable(r) ? Promise.resolve(r).then((x) => byIp(x, sourceIp)) : byIp(r, sourceIp);
      } else out = { ok: false, reason: 'not_whitelisted' };
    } catch (err) {
      out = this.admissionFailed(err);
    }
    if (out instanceof Promise)
      return out.then(
        (o) => this.slotFor(o),
        (err: unknown) => this.slotFor(this.admissionFailed(err)),
      );
    return this.slotFor(out);
  }

  /** The admitter threw (the admission view is stale): logged once per 10 s at most, as every connection fails alike. */
  private admissionFailed(err: unknown): AdmitOutcome {
    const now = Date.now();
    if (now - this.lastAdmissionErrorLog >= 10_000) {
      this.lastAdmissionErrorLog = now;
      this.opts.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'gateway admission failed');
    }
    return { ok: false, reason: 'admission_error' };
  }

  /** An admitted connection takes its slot; a refusal is counted. */
  private slotFor(out: AdmitOutcome): AdmitOutcome | Promise<AdmitOutcome> {
    if (out.ok) {
      const slot = this.takeSlot(out);
      if (slot instanceof Promise) return slot.then((o) => this.counted(o));
      out = slot;
    }
    return this.counted(out);
  }

  private counted(out: AdmitOutcome): AdmitOutcome {
    if (!out.ok) this.countFailure(out.reason);
    return out;
  }

  /**
   * An admitted connection's slot: refused while its plan is over (403), at a connection cap (429: this node's
   * per-account cap, or the plan's fleet-wide caps through the slots this node leases), else counted here.
   */
  private takeSlot(out: AdmitOutcome & { ok: true }): AdmitOutcome | Promise<AdmitOutcome> {
    const plans = this.opts.plans;
    const reading = plans?.pending(out.accountId, out.subject) ?? null;
    // Answered in this turn unless the plan is still being read or the fleet asked for slots.
    return reading !== null ? reading.then(() => this.decideSlot(out)) : this.decideSlot(out);
  }

  private decideSlot(out: AdmitOutcome & { ok: true }): AdmitOutcome | Promise<AdmitOutcome> {
    const plans = this.opts.plans;
    const { accountId, subject } = out;
    const refusal = plans?.refusal(accountId, subject) ?? null;
    if (refusal) return { ok: false, reason: refusal, accountId };
    const key = usageKey(accountId, subject);
    const open = () => ({ account: this.perAccount.get(accountId) ?? 0, user: this.perSubject.get(key) ?? 0 });
    let free = open().account < this.limits.maxConnectionsPerAccount;
    if (free && plans) {
      const fits = plans.slotFree(accountId, subject, open());
      if (fits === null) return this.slotFromFleet(out, open);
      free = fits;
    }
    if (!free) return { ok: false, reason: 'connection_limit', accountId };
    return this.countSlot(out, key, open());
  }

  /** At the slots this node holds: ask the fleet for more, then decide on the counts as they are then. */
  private async slotFromFleet(
    out: AdmitOutcome & { ok: true },
    open: () => { account: number; user: number },
  ): Promise<AdmitOutcome> {
    const plans = this.opts.plans!;
    const { accountId, subject } = out;
    let fits: boolean | null = null;
    // A burst of admissions shares each call, and the first ones may take what it brought: ask again.
    for (let round = 0; fits === null && round < 3; round++) {
      await plans.moreSlots(accountId, subject, open);
      fits = open().account < this.limits.maxConnectionsPerAccount ? plans.slotFree(accountId, subject, open()) : false;
    }
    if (fits !== true) return { ok: false, reason: 'connection_limit', accountId };
    return this.countSlot(out, usageKey(accountId, subject), open());
  }

  private countSlot(
    out: AdmitOutcome & { ok: true },
    key: string,
    { account, user }: { account: number; user: number },
  ): AdmitOutcome {
    const { accountId, subject } = out;
    const plans = this.opts.plans;
    this.perAccount.set(accountId, account + 1);
    this.perSubject.set(key, user + 1);
    // Its connection is counted by meter(), once the target it asks for is known (or when it ends without one).
    // Written out, not spread: one shape for every admitted connection, no copy of the outcome.
    return {
      ok: true,
      accountId,
      session: out.session,
      subject,
      exitWish: out.exitWish ?? null,
      key,
      pin: out.pin ?? null,
      budget: plans?.budgetFor(accountId, subject) ?? null,
      rate: plans?.rateFor?.(accountId, subject) ?? null,
    };
  }

  /** Open connections of an account (and one of its subjects). */
  openConnections(accountId: number, subject?: string): number {
    return subject === undefined
      ? (this.perAccount.get(accountId) ?? 0)
      : (this.perSubject.get(usageKey(accountId, subject)) ?? 0);
  }

  /**
   * The username as written first (an existing user of that name wins), then the base user its parameters
   * name. Parameters that do not parse fail like wrong credentials (407); the base user's password is still
   * checked, so the record names its account and says which: a wrong password, or `bad_username_params`.
   */
  private admitUser(username: string, password: string, sourceIp: string | null): AdmitOutcome | Promise<AdmitOutcome> {
    const parsed = parseProxyUsername(username);
    const base = parsed.kind === 'plain' ? undefined : parsed.user;
    const r = this.opts.admission.admitByCredentials(username, password, base, sourceIp);
    const d = this.opts.dedicated;
    return isThenable(r)
      ? Promise.resolve(r).then((out) => byUser(out, username, parsed, d))
      : byUser(r, username, parsed, d);
  }

  /** `key`: usageKey(accountId, subject), when the caller has it. */
  releaseSlot(accountId: number, subject: string, key = usageKey(accountId, subject)): void {
    const n = (this.perAccount.get(accountId) ?? 1) - 1;
    if (n <= 0) this.perAccount.delete(accountId);
    else this.perAccount.set(accountId, n);
    const m = (this.perSubject.get(key) ?? 1) - 1;
    if (m <= 0) this.perSubject.delete(key);
    else this.perSubject.set(key, m);
  }

  /** Puts every open admitted connection under the byte budget `budgetFor` gives now (a limit set or lifted while it is open). */
  rebudget(budgetFor: (accountId: number, subject: string) => ByteBudget | null): void {
    for (const c of this.conns) if (c.accountId >= 0) c.budget = budgetFor(c.accountId, c.meterSubject);
  }

  /** Puts every open admitted connection under the rate `rateFor` gives now (a limit set, changed or lifted while it is open). */
  rerate(rateFor: (accountId: number, subject: string) => RateBudget | null): void {
    for (const c of this.conns) if (c.accountId >= 0) c.rate = rateFor(c.accountId, c.meterSubject);
  }

  closeWhere(match: (accountId: number, subject: string) => CloseCause | null): number {
    let n = 0;
    for (const c of [...this.conns]) {
      if (c.accountId < 0) continue;
      const cause = match(c.accountId, c.meterSubject);
      if (cause === null) continue;
      c.cut(cause);
      n++;
    }
    return n;
  }

  private usageOf(
    accountId: number,
    subject: string,
    target: string | null,
    slotKey = usageKey(accountId, subject),
  ): UsageDelta {
    const key = `${slotKey}\0${target ?? ''}`;
    let u = this.usage.get(key);
    if (!u) {
      u = { accountId, subject, target, bytesUp: 0, bytesDown: 0, connections: 0 };
      this.usage.set(key, u);
    }
    return u;
  }

  /**
   * Moves a connection's bytes not yet metered into the pending usage, under the target they went to; counts
   * the connection once it relays to its target, or when it ends (`final`) having asked for none. The gateway's
   * own answers (403, 502, …) are not connections of the account's usage, nor their target a domain used.
   */
  meter(c: LiveConn, final = false): void {
    const up = c.bytesUp - c.meteredUp;
    const down = c.bytesDown - c.meteredDown;
    const fate = c.connectionFate;
    const count =
      c.connectionUnmetered && (fate === 'relaying' ? c.meterTarget !== null || final : final && fate === 'pending');
    if (up === 0 && down === 0 && !count) return;
    const u = this.usageOf(c.accountId, c.meterSubject, c.meterTarget, c.slotKey || undefined);
    if (count) {
      u.connections++;
      c.connectionUnmetered = false;
    }
    u.bytesUp += up;
    u.bytesDown += down;
    if (c.egressAddress !== null) {
      const k = `${c.accountId}\0${c.egressAddress}`;
      let e = this.egressUsage.get(k);
      if (!e)
        this.egressUsage.set(
          k,
          (e = { accountId: c.accountId, address: c.egressAddress, bytesUp: 0, bytesDown: 0, connections: 0 }),
        );
      e.bytesUp += up;
      e.bytesDown += down;
      if (count) e.connections++;
    }
    c.meteredUp = c.bytesUp;
    c.meteredDown = c.bytesDown;
  }

  /** An admitted connection that ended before it asked for a target. */
  countConnection(accountId: number, subject: string): void {
    this.usageOf(accountId, subject, null).connections++;
  }

  /** A connection dials `host` (a keep-alive client may ask for another host per request): what it relayed so far stays with the previous one. */
  retarget(c: LiveConn, host: string): void {
    this.meter(c);
    c.meterTarget = meterHost(host);
  }

  /** Everything since the last call: open connections' new bytes, ended ones' last bytes, admissions. */
  collectUsage(): UsageDelta[] {
    for (const c of this.conns) if (c.accountId >= 0) this.meter(c);
    const out = [...this.usage.values()];
    this.usage = new Map();
    return out;
  }

  /** Usage by dedicated address since the last call (what collectUsage metered; call it after collectUsage). */
  collectEgressUsage(): EgressUsageDelta[] {
    const out = [...this.egressUsage.values()];
    this.egressUsage = new Map();
    return out;
  }

  /** Whether this connection's bytes are counted by the address it leaves from too (its account holds dedicated addresses). */
  countsByAddress(accountId: number): boolean {
    return accountId >= 0 && this.opts.dedicated !== undefined && this.opts.dedicated.holdsAny(accountId);
  }
}
