// The entry's end of the hop to one exit: a few TLS 1.3 connections that accept the exit only by the
// certificate fingerprint its registry row names (pinned from the database: no CA, no name), prove the fleet
// secret bound to their own TLS session, and carry every tunnel to that exit as a stream (mux.ts). A tunnel's
// set-up pays one OPEN frame and the exit's own dial: no handshake of its own. A session ticket from a
// verified exit resumes the next connection's handshake.
import net from 'node:net';
import tls from 'node:tls';
import type { DialOutcome, DialRequest } from '../dial/dialer.js';
import { isTargetFailure } from '../dial/dialer.js';
import { destroySelf } from '../relay/sockets.js';
import { normalFingerprint } from './identity.js';
import { GOING_AWAY, MuxSession, type MuxStream } from './mux.js';
import { ALPN, encodeHopRequest, hopProof, parseHopAnswer, readLine, sessionBinding } from './wire.js';
import { HOUR_MS } from '../../rules/time.js';

/** Connections an entry keeps to one exit at most. */
const MAX_CONNECTIONS = 16;
/** Streams on the least busy connection past which another connection is opened (up to MAX_CONNECTIONS). */
const STREAMS_PER_CONNECTION = 512;
/** A connection takes no new stream after this (a fresh handshake now and then: new keys, a spread over the exit's workers). */
const RETIRE_MS = HOUR_MS;
/** A stream's answer is waited for at most this (a hung exit is usually found by its probes well before). */
const ANSWER_TIMEOUT_MS = 30_000;

/** The admitted account at the end of a DIAL or UDP line: the exit applies its target rules to what it resolves. */
let sharedContext: tls.SecureContext | null = null;
const clientContext = (): tls.SecureContext =>
  (sharedContext ??= tls.createSecureContext({ minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' }));

/** Why a hop connection to an exit was given up before it was ready (said once per exit by the directory). */
export type HopRejection = 'certificate_mismatch' | 'certificate_expired' | 'handshake_failed' | 'proof_refused';

export interface HopLinkOptions {
  /** The fingerprints the exit's registry row names now (its certificate, and the next one during a rotation). */
  fingerprints: () => readonly string[];
  /** The fleet secrets to prove (the newest first). */
  secrets: () => readonly Buffer[];
  /** A connection was closed by the exit (it may have died): the directory probes it now. */
  onLost?: () => void;
  /** A connection was given up before it was ready, and why. */
  onRejected?: (why: HopRejection, detail: string) => void;
  /** Connections kept open and authenticated at least (default 2); more while many tunnels share them. */
  warm?: number;
  connectTimeoutMs?: number;
}

/** One authenticated connection to the exit and what it was made with. */
interface Conn {
  mux: MuxSession;
  since: number;
  /** The certificate fingerprint it was verified with. */
  fingerprint: string;
  /** The newest secret it proved (a rotation makes it old: the connection takes no new stream). */
  secret: Buffer;
  /** Closed by this end (retired, or the link closed): not a sign of the exit's death. */
  ours: boolean;
  /** PINGs it did not answer in a row. */
  missed: number;
}

/**
 * An entry's connections to one exit: a few kept authenticated, each carrying many tunnels as streams. A
 * tunnel takes the least busy one, sends its OPEN and waits for one REPLY.
 */
export class HopLink {
  private readonly conns: Conn[] = [];
  /** Streams whose OPEN waits for the exit's answer. */
  private readonly waiting = new Set<MuxStream>();
  /** Its probes failed (abortWaiting) and none has answered since. */
  private down = false;
  private opening = 0;
  private closed = false;
  private readonly warm: number;
  private readonly timeoutMs: number;
  /** The last session ticket, and the certificate (fingerprint, expiry) its session was verified with. */
  private ticket: { session: Buffer; fingerprint: string; notAfter: number } | null = null;

  constructor(
    readonly hop: { host: string; port: number },
    private readonly o: HopLinkOptions,
  ) {
    this.warm = Math.max(1, o.warm ?? 2);
    this.timeoutMs = o.connectTimeoutMs ?? 2_000;
  }

  /** Connections that take new streams. */
  private usable(): Conn[] {
    return this.conns.filter((c) => c.mux.usable());
  }

  /** How many verified and authenticated connections take new tunnels now (/metrics: hop links per exit). */
  linksUp(): number {
    return this.usable().length;
  }

  /** Opens connections until `warm` take streams (in the background); none to an exit no valid fingerprint pins. */
  fill(want = this.warm): void {
    if (this.o.fingerprints().length === 0) return;
    while (!this.closed && this.usable().length + this.opening < Math.min(want, MAX_CONNECTIONS)) {
      this.opening++;
      void this.open().finally(() => this.opening--);
    }
  }

  /** A new verified and authenticated connection, kept for streams; null (refused, timed out, another certificate, wrong secret). */
  open(): Promise<MuxSession | null> {
    return new Promise((resolve) => {
      const pinned = this.o.fingerprints();
      const secrets = this.o.secrets();
      const ticket = this.ticket && pinned.includes(this.ticket.fingerprint) ? this.ticket : null;
      let s: tls.TLSSocket;
      try {
        // allowHalfOpen (a FIN one way keeps the other way open) is read by tls.connect, though its types omit it.
        const options: tls.ConnectionOptions & { allowHalfOpen: boolean } = {
          host: this.hop.host,
          port: this.hop.port,
          allowHalfOpen: true,
          // One context for every hop connection: tls.connect would otherwise build one per call (with the
          // default root store), a few milliseconds of CPU each.
          secureContext: clientContext(),
          ALPNProtocols: [ALPN],
          // The certificate is checked below, against the pinned fingerprints: no CA and no name are involved.
          rejectUnauthorized: false,
          session: ticket?.session,
          ...(net.isIP(this.hop.host) ? {} : { servername: this.hop.host }),
        };
        s = tls.connect(options);
      } catch {
        return resolve(null); // a registry row no socket can reach (a bad port): this exit never answers
      }
      s.setNoDelay(true);
      s.setKeepAlive(true);
      s.on('error', destroySelf);
      let verified: { fingerprint: string; notAfter: number } | null = null;
      let connected = false;
      let handshook = false;
      s.once('connect', () => (connected = true));
      const timer = setTimeout(() => s.destroy(), this.timeoutMs);
      s.on('session', (session: Buffer) => {
        if (verified !== null) this.ticket = { session, ...verified };
      });
      const onEarlyClose = (): void => {
        clearTimeout(timer);
        // Reached, but no handshake: something else answers on the exit's address (unreachable ones are the probes' to say).
        if (connected && !handshook && !this.closed)
          this.o.onRejected?.('handshake_failed', 'no TLS 1.3 handshake with the exit');
        resolve(null);
      };
      s.once('close', onEarlyClose);
      s.once('secureConnect', () => {
        handshook = true;
        verified = this.verify(s, pinned, ticket);
        if (verified === null) return void s.destroy();
        const fingerprint = verified.fingerprint;
        const binding = sessionBinding(s);
        s.write(`AUTH ${secrets.map((secret) => hopProof(secret, binding)).join(' ')}\n`);
        void readLine(s, this.timeoutMs).then((answer) => {
          clearTimeout(timer);
          if (answer !== 'OK') {
            if (answer === null && !s.destroyed)
              this.o.onRejected?.(
                'proof_refused',
                'the exit closed the connection after the proof (another fleet secret?)',
              );
            s.destroy();
            return resolve(null);
          }
          s.removeListener('close', onEarlyClose);
          if (this.closed) {
            s.destroy();
            return resolve(null);
          }
          const c: Conn = {
            mux: null as unknown as MuxSession,
            since: Date.now(),
            fingerprint,
            secret: secrets[0]!,
            ours: false,
            missed: 0,
          };
          c.mux = new MuxSession(s, {
            onGoAway: () => {
              this.retire(c);
              this.fill();
            },
            onIdle: () => this.retireIfDone(c),
            onClose: () => this.gone(c),
          });
          this.conns.push(c);
          resolve(c.mux);
        });
      });
    });
  }

  /** The certificate the exit proved (fingerprint, expiry), or null (said to the directory) when the registry does not pin it or it expired. */
  private verify(
    s: tls.TLSSocket,
    pinned: readonly string[],
    ticket: { fingerprint: string; notAfter: number } | null,
  ): { fingerprint: string; notAfter: number } | null {
    let got: { fingerprint: string; notAfter: number };
    // A resumed session presents no certificate: it was verified when its ticket was issued, against a
    // fingerprint still pinned; its expiry is checked all the same.
    if (s.isSessionReused() && ticket !== null) got = { fingerprint: ticket.fingerprint, notAfter: ticket.notAfter };
    else {
      const cert = s.getPeerX509Certificate();
      if (cert === undefined) {
        this.o.onRejected?.('handshake_failed', 'the exit presented no certificate');
        return null;
      }
      got = { fingerprint: normalFingerprint(cert.fingerprint256), notAfter: new Date(cert.validTo).getTime() };
      if (!pinned.includes(got.fingerprint)) {
        this.o.onRejected?.('certificate_mismatch', `certificate ${got.fingerprint} is not the one the registry names`);
        return null;
      }
    }
    if (got.notAfter < Date.now()) {
      this.ticket = null;
      this.o.onRejected?.(
        'certificate_expired',
        `certificate ${got.fingerprint} expired ${new Date(got.notAfter).toISOString()}`,
      );
      return null;
    }
    return got;
  }

  /** The connection closed: forgotten; when the exit closed it, the directory probes the exit now. */
  private gone(c: Conn): void {
    const i = this.conns.indexOf(c);
    if (i >= 0) this.conns.splice(i, 1);
    if (!c.ours && !this.closed) this.o.onLost?.();
    if (!this.closed) this.fill();
  }

  /** Takes no new stream: closed now if none is open on it, else when its last one ends (open tunnels go on). */
  private retire(c: Conn): void {
    c.mux.draining = true;
    this.retireIfDone(c);
  }

  private retireIfDone(c: Conn): void {
    if (!c.mux.draining || c.mux.streams.size > 0 || c.mux.closed) return;
    c.ours = true;
    c.mux.end(); // after its last frames have gone (a tunnel's last bytes and END may still be queued)
  }

  /** A new connection for tunnels that found none usable: one handshake shared by all that wait for it. */
  private fresh(): Promise<MuxSession | null> {
    this.pending ??= this.open().finally(() => (this.pending = null));
    return this.pending;
  }

  private pending: Promise<MuxSession | null> | null = null;

  /** The least busy connection that takes streams (another is opened behind it when all are busy), else a new one. */
  private async take(): Promise<MuxSession | null> {
    let best: MuxSession | null = null;
    let usable = 0;
    for (const c of this.conns) {
      if (!c.mux.usable()) continue;
      usable++;
      if (best === null || c.mux.streams.size < best.streams.size) best = c.mux;
    }
    if (best !== null) {
      if (best.streams.size >= STREAMS_PER_CONNECTION) this.fill(usable + 1);
      return best;
    }
    return this.fresh();
  }

  /**
   * Called every second: connections that are old, or proved a secret that is no longer the newest, take no new
   * stream; enough are kept open.
   */
  retune(): void {
    const old = Date.now() - RETIRE_MS;
    const newest = this.o.secrets()[0];
    for (const c of [...this.conns]) {
      if (c.since < old || (newest !== undefined && !newest.equals(c.secret))) this.retire(c);
      else this.retireIfDone(c);
    }
    this.fill();
  }

  /**
   * The registry names other fingerprints now (a rotated certificate): connections made with one it no longer
   * names take no new stream, so every new tunnel goes over the exit's current certificate; open tunnels go on.
   */
  repin(): void {
    const pinned = this.o.fingerprints();
    if (this.ticket && !pinned.includes(this.ticket.fingerprint)) this.ticket = null;
    for (const c of [...this.conns]) if (!pinned.includes(c.fingerprint)) this.retire(c);
    this.fill();
  }

  /**
   * The exit stopped answering its probes: tunnels waiting for its answer go elsewhere, and no tunnel tries it
   * again until a probe answers.
   */
  abortWaiting(): void {
    this.down = true;
    for (const s of [...this.waiting]) s.destroy();
  }

  /**
   * The tunnel's dial through this exit; 'retry' when the exit gave no answer (it died, or stopped answering:
   * another exit may take it). A connection that fails before the answer (the exit closed it as it was
   * taken), or whose proof's secret the exit no longer accepts, is tried once more on a new one.
   */
  async dial(req: DialRequest): Promise<DialOutcome | 'retry'> {
    return this.ask(
      req,
      encodeHopRequest({
        kind: 'dial',
        host: req.host,
        port: req.port,
        session: req.session,
        accountId: req.accountId,
        pin: req.pin,
      }),
    );
  }

  /** A UDP association through this exit: the stream its datagrams travel on in frames (hop/udp.ts). */
  async associate(
    req: Pick<DialRequest, 'session' | 'accountId' | 'pin' | 'stillWanted'>,
  ): Promise<DialOutcome | 'retry'> {
    return this.ask(
      { ...req, host: '-', port: 0, connecting: () => {} },
      encodeHopRequest({ kind: 'udp', session: req.session, accountId: req.accountId, pin: req.pin }),
    );
  }

  private async ask(req: DialRequest, line: string): Promise<DialOutcome | 'retry'> {
    const mux = await this.take();
    if (mux === null) return 'retry';
    const out = await this.askOn(mux, req, line);
    if (out !== 'again' || this.down) return out === 'again' ? 'retry' : out;
    const fresh = await this.fresh();
    if (fresh === null) return 'retry';
    const second = await this.askOn(fresh, req, line);
    return second === 'again' ? 'retry' : second;
  }

  private async askOn(mux: MuxSession, req: DialRequest, line: string): Promise<DialOutcome | 'retry' | 'again'> {
    if (!req.stillWanted()) return null;
    if (this.down || mux.closed) return 'retry';
    const st = mux.open(line);
    req.connecting(st.asSocket());
    this.waiting.add(st);
    // The exit answers after its own connect; a hung exit fails its probes and abortWaiting() ends this wait.
    const answer = await st.answer(ANSWER_TIMEOUT_MS);
    this.waiting.delete(st);
    if (!req.stillWanted()) {
      st.destroy();
      return null;
    }
    if (answer === null) {
      st.destroy();
      // The connection went before the exit answered (closed as it was taken): once more on a new one.
      return mux.closed ? 'again' : 'retry';
    }
    const a = parseHopAnswer(answer);
    if (a.ok) {
      // `OK <egress address> <port>` (a DIAL) or `OK udp [<egress address>]`: where it leaves from, for usage by address.
      return a.egress ? { ok: true, socket: st.asSocket(), egress: a.egress } : { ok: true, socket: st.asSocket() };
    }
    const f = a.failure;
    // Not a target's failure: this connection takes no new stream (proved with a secret whose grace ended, or
    // the exit is stopping, or the connection is full): the tunnel goes on another one at once.
    if (f === 'proof_expired' || f === GOING_AWAY) {
      mux.draining = true;
      return 'again';
    }
    return { ok: false, failure: isTargetFailure(f) ? f : 'host_unreachable' };
  }

  /**
   * Whether the exit answers a PING within `timeoutMs` on every connection that takes streams (one is opened
   * when none does). A connection this end retired meanwhile (a repin, a rotation) is no sign of the exit.
   */
  async ping(timeoutMs = 1_000, fresh = false): Promise<boolean> {
    if (this.o.fingerprints().length === 0) return false; // nothing could verify it: not one handshake a second
    let live = fresh ? [] : this.usable();
    if (live.length === 0) {
      const m = await this.fresh();
      if (m === null) return false;
      live = this.conns.filter((c) => c.mux === m);
    }
    const answers = await Promise.all(live.map((c) => c.mux.ping(timeoutMs)));
    let ok = true;
    let counted = 0;
    live.forEach((c, i) => {
      if (c.ours) return;
      counted++;
      if (answers[i]) return void (c.missed = 0);
      ok = false;
      // Silent twice in a row: given up (a path that went dead); the next probe opens a new connection. Once is
      // not enough: a paused exit answers on its connections again when it resumes, and the next probe, on the
      // same connections, takes a second (a new connection to a silent exit waits for its connect timeout).
      if (++c.missed >= 2) c.mux.destroy();
    });
    if (counted === 0) return fresh ? false : this.ping(timeoutMs, true);
    if (ok) this.down = false;
    return ok;
  }

  /** Connections open now (for tests and the directory's view). */
  connections(): number {
    return this.conns.length;
  }

  /** The exit left the registry (or the entry stops): waiting tunnels go elsewhere, idle connections close, open tunnels finish. */
  close(): void {
    this.closed = true;
    this.abortWaiting();
    for (const c of [...this.conns]) this.retire(c);
  }
}
