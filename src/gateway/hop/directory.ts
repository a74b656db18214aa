// An entry's view of the exits: it reads the exit registry every second, keeps a few verified and
// authenticated hop connections ready to each exit, probes each every second, and picks an exit per
// connection among the healthy ones that match the username's targeting.
//
// Healthy: its heartbeat is fresh (the database saw one within EXIT_STALE_MS) and the entry's own last probe
// did not fail twice in a row. A killed exit's hop connections close at once, so the entry probes it again at
// once: it leaves selection within milliseconds, not seconds (the heartbeat is the slower, second guard).
// A session (`-session-ID`) goes to the exit with the highest rendezvous score for (account, user, session)
// among those that match: every entry computes the same answer with no shared table, and when that exit
// dies only its sessions move.
import type { ExitWish } from '../dial/dialer.js';
import { unmet } from '../dial/dialer.js';
import { splitHostPort } from '../../rules/host-port.js';
import { rendezvousScore } from '../../rules/rendezvous.js';
import { FINGERPRINT } from './identity.js';
import { HopLink, type HopRejection } from './link.js';

/** An exit whose heartbeat the database has not seen for this long gets no new connection. */
export const EXIT_STALE_MS = 2_500;
const READ_EVERY_MS = 1_000;
const PROBE_EVERY_MS = 1_000;
/** Consecutive failed probes that take an exit out of selection. */
const PROBE_FAILURES = 2;

/** One exit as the registry holds it. */
export interface ExitRow {
  node: string;
  /** host:port entries dial. */
  hop: string;
  country: string | null;
  city: string | null;
  /** SHA-256 fingerprints of the certificates it may present (its own; during a rotation, the next one too). */
  fingerprints: readonly string[];
  /** Milliseconds since its last heartbeat, by the database's clock. */
  ageMs: number;
}

/** Where an entry reads the exits from (the daemon's store). */
export interface ExitRegistry {
  /** Exits that heartbeated within `withinMs`. */
  list(withinMs: number): Promise<ExitRow[]>;
}

export interface ExitState {
  row: ExitRow;
  link: HopLink;
  /** Consecutive failed probes (0 after any success); -1 before the first probe answered. */
  failures: number;
  /** The probe under way (one at a time per exit). */
  probing: Promise<void> | null;
  /** Has not answered a probe since it was listed (its first failures are logged as unreachable, once). */
  neverUp: boolean;
  /** Rejections already said since it last answered (each is logged once, not every second). */
  said: Set<HopRejection | 'bad_fingerprint'>;
}

export interface ExitDirectoryOptions {
  /** The fleet secrets to prove on each new hop connection, the newest first. */
  secrets: () => readonly Buffer[];
  log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** Warm hop connections per exit. */
  warm?: number;
}

export class ExitDirectory {
  private readonly exits = new Map<string, ExitState>();
  private timers: NodeJS.Timeout[] = [];
  private lastReadFailureLog = 0;
  private reading = false;
  /** When the registry was last read, and until when exits missing from it stay (see readOnce). */
  private lastRead = 0;
  private keepUntil = 0;
  /** The exit each live session went to on this entry, so a move is said (bounded: oldest dropped). */
  private readonly sessionExit = new Map<string, { node: string; until: number }>();

  constructor(
    private readonly registry: ExitRegistry,
    private readonly o: ExitDirectoryOptions,
  ) {}

  async start(): Promise<void> {
    await this.read();
    await Promise.all([...this.exits.values()].map((e) => this.probe(e)));
    this.timers.push(
      setInterval(() => void this.read(), READ_EVERY_MS),
      setInterval(() => this.probeAll(), PROBE_EVERY_MS),
    );
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const e of this.exits.values()) e.link.close();
    this.exits.clear();
  }

  /** The registry as the database has it now: new exits get a link (probed at once), stale ones leave. */
  private async read(): Promise<void> {
    if (this.reading) return; // a slow database: one read at a time, so an older answer never undoes a newer one
    this.reading = true;
    try {
      await this.readOnce();
    } finally {
      this.reading = false;
    }
  }

  private async readOnce(): Promise<void> {
    let rows: ExitRow[];
    try {
      rows = await this.registry.list(EXIT_STALE_MS);
    } catch (e) {
      // The database away: keep the last view and go on probing (exits that die still leave by their probe).
      const now = Date.now();
      if (now - this.lastReadFailureLog > 10_000) {
        this.lastReadFailureLog = now;
        this.o.log?.warn(
          { event: 'exit_registry_unavailable', detail: e instanceof Error ? e.message : String(e) },
          'exits: keeping the last view',
        );
      }
      return;
    }
    // Unread for a while (the database away or hung): when it answers again every heartbeat is stale through no
    // exit's fault. Exits that still answer their probes stay until their heartbeats have had time to land.
    const now = Date.now();
    if (this.lastRead > 0 && now - this.lastRead > 2 * READ_EVERY_MS) this.keepUntil = now + EXIT_STALE_MS;
    this.lastRead = now;
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.node);
      const known = this.exits.get(row.node);
      if (known && known.row.hop === row.hop) {
        const repinned = known.row.fingerprints.join() !== row.fingerprints.join();
        known.row = row;
        if (repinned) this.repin(known);
        continue;
      }
      known?.link.close();
      // A row no socket can reach (not HOST:PORT) gets a link that never connects: its probes say so.
      const { host, port } = splitHostPort(row.hop) ?? { host: row.hop, port: 0 };
      const e: ExitState = {
        row,
        link: new HopLink(
          { host, port },
          {
            fingerprints: () => e.row.fingerprints.filter((f) => FINGERPRINT.test(f)),
            secrets: this.o.secrets,
            warm: this.o.warm,
            onLost: () => void this.probe(e),
            onRejected: (why, detail) => this.sayOnce(e, why, detail),
          },
        ),
        failures: -1,
        probing: null,
        neverUp: true,
        said: new Set(),
      };
      this.exits.set(row.node, e);
      this.o.log?.info(
        { event: 'exit_joined', exit: row.node, hop: row.hop, country: row.country, city: row.city },
        'exit node joined',
      );
      this.checkPins(e);
      void this.probe(e);
    }
    for (const [node, e] of this.exits) {
      if (seen.has(node) || (now < this.keepUntil && this.healthy(e))) continue;
      this.o.log?.info({ event: 'exit_left', exit: node }, 'exit node left (no heartbeat)');
      e.link.close();
      this.exits.delete(node);
    }
  }

  private repin(e: ExitState): void {
    this.o.log?.info(
      { event: 'exit_certificate_changed', exit: e.row.node, fingerprints: e.row.fingerprints },
      'exit node names another hop certificate',
    );
    this.checkPins(e);
    e.link.repin();
  }

  /** A row whose fingerprints are not fingerprints: said once; no connection to it can be verified, so it is skipped. */
  private checkPins(e: ExitState): void {
    if (e.row.fingerprints.some((f) => FINGERPRINT.test(f))) return;
    this.sayOnce(
      e,
      'bad_fingerprint',
      `the registry row names no valid certificate fingerprint (${JSON.stringify(e.row.fingerprints.join(',').slice(0, 80))})`,
    );
  }

  private sayOnce(e: ExitState, why: HopRejection | 'bad_fingerprint', detail: string): void {
    if (e.said.has(why)) return;
    e.said.add(why);
    this.o.log?.warn(
      { event: 'exit_rejected', exit: e.row.node, hop: e.row.hop, why, detail },
      'hop connection to an exit given up',
    );
  }

  private probeAll(): void {
    for (const e of this.exits.values()) {
      e.link.retune();
      void this.probe(e);
    }
  }

  /** Probes the exit (or joins the probe under way): whether it answers an authenticated PING. */
  private probe(e: ExitState): Promise<void> {
    e.probing ??= this.probeNow(e).finally(() => (e.probing = null));
    return e.probing;
  }

  private async probeNow(e: ExitState): Promise<void> {
    const ok = await e.link.ping();
    const was = this.healthy(e);
    const never = e.neverUp;
    e.failures = ok ? 0 : Math.max(0, e.failures) + 1;
    if (ok) {
      e.neverUp = false;
      e.said.clear();
      e.link.fill();
    } else if (never && e.failures === PROBE_FAILURES && e.said.size === 0) {
      // Registered but never reached: a hop address entries cannot reach (a wildcard, a firewall), or the
      // wrong secret. Said once; it stays out of selection until it answers. An exit refused for a reason
      // already said (its certificate, its handshake) did answer: not said again as unreachable.
      this.o.log?.warn(
        { event: 'exit_unreachable', exit: e.row.node, hop: e.row.hop },
        'exit node registered but does not answer on its hop address',
      );
    }
    if (was !== this.healthy(e)) {
      this.o.log?.info(
        { event: ok ? 'exit_up' : 'exit_down', exit: e.row.node },
        ok ? 'exit node answers' : 'exit node failed its probes',
      );
      // Tunnels waiting for its answer go to another exit now.
      if (!ok) e.link.abortWaiting();
    }
    // Failed once: look again now rather than in a second (a dead exit leaves selection at once).
    if (!ok && e.failures < PROBE_FAILURES && this.exits.get(e.row.node) === e) return this.probeNow(e);
  }

  private healthy(e: ExitState): boolean {
    // Still in the registry (a probe may finish after its exit left), and answering: it answered once (an exit
    // that never has is not taken between its first failed probe and its second), and not failed twice since.
    return this.exits.get(e.row.node) === e && !e.neverUp && e.failures >= 0 && e.failures < PROBE_FAILURES;
  }

  /** Exits a connection with this targeting may go to now. */
  candidates(want: ExitWish | null): ExitState[] {
    const out: ExitState[] = [];
    for (const e of this.exits.values()) if (this.healthy(e) && unmet(want, e.row) === null) out.push(e);
    return out;
  }

  /** What the directory holds, for /metrics and the ready check. */
  view(): Array<{
    node: string;
    hop: string;
    country: string | null;
    city: string | null;
    healthy: boolean;
    links: number;
  }> {
    return [...this.exits.values()].map((e) => ({
      node: e.row.node,
      hop: e.row.hop,
      country: e.row.country,
      city: e.row.city,
      healthy: this.healthy(e),
      links: e.link.linksUp(),
    }));
  }

  /**
   * The exit for one connection: a session's by rendezvous hashing (the same from every entry), else one at
   * random. `avoid`: exits that just failed this connection.
   */
  pick(want: ExitWish | null, sessionKey: string | null, avoid: ReadonlySet<string>): ExitState | null {
    const c = this.candidates(want).filter((e) => !avoid.has(e.row.node));
    if (c.length === 0) return null;
    if (sessionKey === null) return c[Math.floor(Math.random() * c.length)]!;
    let best = c[0]!;
    let bestScore = -1;
    for (const e of c) {
      const s = rendezvousScore(sessionKey, e.row.node);
      if (s > bestScore) [best, bestScore] = [e, s];
    }
    return best;
  }

  /**
   * Remembers where a session went, for its minutes from its first connection here; the exit it had before
   * when it moved (within those minutes), else null. An expired session's ID used again is a new session.
   */
  notePlacement(sessionKey: string, node: string, minutes: number): string | null {
    const now = Date.now();
    const before = this.sessionExit.get(sessionKey);
    const live = before !== undefined && before.until > now;
    if (live && before.node === node) return null;
    this.sessionExit.delete(sessionKey);
    this.sessionExit.set(sessionKey, { node, until: live ? before.until : now + minutes * 60_000 });
    if (this.sessionExit.size > 100_000) this.sessionExit.delete(this.sessionExit.keys().next().value as string);
    return live ? before.node : null;
  }
}
