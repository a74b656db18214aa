// The entry's end of the hop to one exit: TLS 1.3 connections that accept the exit only by the certificate
// fingerprint its registry row names (pinned from the database: no CA, no name), prove the fleet secret bound
// to their own TLS session, and are kept ready before a tunnel needs one, so a tunnel's set-up pays one DIAL
// line and the exit's own dial. A session ticket from a verified exit resumes the next handshake.
import net from 'node:net';
import tls from 'node:tls';
import type { DialOutcome, DialRequest } from '../dial/dialer.js';
import { isTargetFailure } from '../dial/dialer.js';
import { destroySelf } from '../relay/sockets.js';
import { normalFingerprint } from './identity.js';
import { ALPN, hopProof, readLine, sessionBinding } from './wire.js';

/** Ready hop connections an entry keeps per exit at most. */
const MAX_WARM = 256;
/** A ready connection is closed by the entry after this (the exit's own limit on a waiting one is twice it). */
const RETIRE_MS = 60_000;
/** A DIAL's answer is waited for at most this (a hung exit is usually found by its probes well before). */
const ANSWER_TIMEOUT_MS = 30_000;

/** The admitted account at the end of a DIAL or UDP line: the exit applies its target rules to what it resolves. */
const accountTail = (req: DialRequest): string => (req.accountId !== undefined && req.accountId >= 0 ? ` ${req.accountId}` : '');

let sharedContext: tls.SecureContext | null = null;
const clientContext = (): tls.SecureContext => (sharedContext ??= tls.createSecureContext({ minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' }));

/** Why a hop connection to an exit was given up before it was ready (said once per exit by the directory). */
export type HopRejection = 'certificate_mismatch' | 'certificate_expired' | 'handshake_failed' | 'proof_refused';

export interface HopLinkOptions {
  /** The fingerprints the exit's registry row names now (its certificate, and the next one during a rotation). */
  fingerprints: () => readonly string[];
  /** The fleet secrets to prove (the newest first). */
  secrets: () => readonly Buffer[];
  /** A ready connection was closed by the exit (it may have died): the directory probes it now. */
  onLost?: () => void;
  /** A connection was given up before it was ready, and why. */
  onRejected?: (why: HopRejection, detail: string) => void;
  /** Authenticated connections kept ready at least (default 4); more while tunnels take them faster. */
  warm?: number;
  connectTimeoutMs?: number;
}

interface Ready {
  /** When it last proved itself (made, or answered a PING). */
  since: number;
  /** The certificate fingerprint it was made with. */
  fingerprint: string;
}

/**
 * An entry's connections to one exit: a few kept authenticated and ready, so a tunnel takes one, sends its
 * DIAL and waits for one line. A taken connection is the tunnel's (it is not given back).
 */
export class HopLink {
  private readonly idle: tls.TLSSocket[] = [];
  private readonly ready = new WeakMap<net.Socket, Ready>();
  private readonly tracked = new WeakSet<net.Socket>();
  /** Connections whose DIAL waits for the exit's answer. */
  private readonly waiting = new Set<net.Socket>();
  /** Its probes failed (abortWaiting) and none has answered since. */
  private down = false;
  private opening = 0;
  private closed = false;
  private readonly minWarm: number;
  /** How many to keep ready now: what tunnels took in the last second (`retune`), at least minWarm. */
  private warm: number;
  private taken = 0;
  private readonly timeoutMs: number;
  /** The last session ticket, and the certificate (fingerprint, expiry) its session was verified with. */
  private ticket: { session: Buffer; fingerprint: string; notAfter: number } | null = null;

  constructor(
    readonly hop: { host: string; port: number },
    private readonly o: HopLinkOptions,
  ) {
    this.minWarm = this.warm = o.warm ?? 4;
    this.timeoutMs = o.connectTimeoutMs ?? 2_000;
  }

  /** Opens connections until `warm` are ready (in the background); none to an exit no valid fingerprint pins. */
  fill(): void {
    if (this.o.fingerprints().length === 0) return;
    while (!this.closed && this.idle.length + this.opening < this.warm) {
      this.opening++;
      void this.open()
        .then((s) => {
          if (s === null) return;
          if (this.closed) return void s.destroy();
          this.keep(s);
        })
        .finally(() => this.opening--);
    }
  }

  /** A new verified and authenticated connection, or null (refused, timed out, another certificate, wrong secret). */
  open(): Promise<tls.TLSSocket | null> {
    return new Promise((resolve) => {
      const pinned = this.o.fingerprints();
      const ticket = this.ticket && pinned.includes(this.ticket.fingerprint) ? this.ticket : null;
      let s: tls.TLSSocket;
      try {
        // allowHalfOpen (a FIN one way keeps the other way open) is read by tls.connect, though its types omit it.
        const options: tls.ConnectionOptions & { allowHalfOpen: boolean } = {
          host: this.hop.host,
          port: this.hop.port,
          allowHalfOpen: true,
          // One context for every hop connection: tls.connect would otherwise build one per call (with the
          // default root store), a few milliseconds of CPU each, on every tunnel's refill.
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
      s.once('secureConnect', () => {
        handshook = true;
        verified = this.verify(s, pinned, ticket);
        if (verified === null) return void s.destroy();
        const fingerprint = verified.fingerprint;
        const binding = sessionBinding(s);
        s.write(`AUTH ${this.o.secrets().map((secret) => hopProof(secret, binding)).join(' ')}\n`);
        void readLine(s, this.timeoutMs).then((answer) => {
          clearTimeout(timer);
          if (answer === 'OK') {
            this.ready.set(s, { since: Date.now(), fingerprint });
            return resolve(s);
          }
          if (answer === null && !s.destroyed) this.o.onRejected?.('proof_refused', 'the exit closed the connection after the proof (another fleet secret?)');
          s.destroy();
          resolve(null);
        });
      });
      s.once('close', () => {
        clearTimeout(timer);
        // Reached, but no handshake: something else answers on the exit's address (unreachable ones are the probes' to say).
        if (connected && !handshook && !this.closed) this.o.onRejected?.('handshake_failed', 'no TLS 1.3 handshake with the exit');
        resolve(null);
      });
    });
  }

  /** The certificate the exit proved (fingerprint, expiry), or null (said to the directory) when the registry does not pin it or it expired. */
  private verify(s: tls.TLSSocket, pinned: readonly string[], ticket: { fingerprint: string; notAfter: number } | null): { fingerprint: string; notAfter: number } | null {
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
      this.o.onRejected?.('certificate_expired', `certificate ${got.fingerprint} expired ${new Date(got.notAfter).toISOString()}`);
      return null;
    }
    return got;
  }

  /** A ready connection (`warm`: taken from the ready ones, refilled behind it), else a new one. */
  private async take(): Promise<{ s: tls.TLSSocket; warm: boolean } | null> {
    this.taken++;
    if (this.taken > this.warm) this.warm = Math.min(MAX_WARM, this.taken); // a burst: open ahead of it now
    const s = this.unpark(this.idle.pop());
    this.fill();
    if (s) return { s, warm: true };
    const fresh = await this.open();
    return fresh && { s: fresh, warm: false };
  }

  /**
   * Called every second: keep as many ready as tunnels took in the last second (so a busy entry rarely opens
   * a hop on a tunnel's set-up path: that costs the exit's round trips twice more), and let the extra go.
   */
  retune(): void {
    this.warm = Math.max(this.minWarm, Math.min(MAX_WARM, this.taken));
    this.taken = 0;
    while (this.idle.length > this.warm * 2) this.idle.shift()?.destroy();
    // Retired well before the exit's own limit on a waiting connection, so none is taken as it closes.
    const old = Date.now() - RETIRE_MS;
    this.retireIf((r) => r.since < old);
    this.fill();
  }

  /**
   * The registry names other fingerprints now (a rotated certificate): ready connections made with one it no
   * longer names close, so every new tunnel goes over the exit's current certificate; open tunnels go on.
   */
  repin(): void {
    const pinned = this.o.fingerprints();
    if (this.ticket && !pinned.includes(this.ticket.fingerprint)) this.ticket = null;
    this.retireIf((r) => !pinned.includes(r.fingerprint));
    this.fill();
  }

  private retireIf(drop: (r: Ready) => boolean): void {
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const s = this.idle[i]!;
      const r = this.ready.get(s);
      if (r === undefined || drop(r)) {
        this.idle.splice(i, 1);
        s.destroy();
      }
    }
  }

  /**
   * The exit stopped answering its probes: tunnels waiting for its answer go elsewhere, and no tunnel tries it
   * again until a probe answers.
   */
  abortWaiting(): void {
    this.down = true;
    for (const s of this.waiting) s.destroy();
  }

  /** Out of the ready ones: no longer watched, paused for its next reader. */
  private unpark(s: tls.TLSSocket | undefined): tls.TLSSocket | null {
    if (s === undefined) return null;
    s.removeListener('data', destroySelf);
    s.removeListener('end', destroySelf);
    s.pause();
    return s.destroyed || s.readableEnded ? (s.destroy(), this.unpark(this.idle.pop())) : s;
  }

  /**
   * The tunnel's dial through this exit; 'retry' when the exit gave no answer (it died, or stopped answering:
   * another exit may take it). A ready connection that fails before the answer (the exit closed it as it was
   * taken) is tried once more on a new one before giving up on the exit.
   */
  async dial(req: DialRequest): Promise<DialOutcome | 'retry'> {
    const key = req.session ? encodeURIComponent(req.session.key) : '-';
    return this.ask(req, `DIAL ${req.host} ${req.port} ${key} ${req.session?.minutes ?? 0}${accountTail(req)}\n`);
  }

  /** A UDP association through this exit: the hop connection its datagrams travel on in frames (hop/udp.ts). */
  async associate(req: DialRequest): Promise<DialOutcome | 'retry'> {
    const key = req.session ? encodeURIComponent(req.session.key) : '-';
    return this.ask(req, `UDP ${key} ${req.session?.minutes ?? 0}${accountTail(req)}\n`);
  }

  private async ask(req: DialRequest, line: string): Promise<DialOutcome | 'retry'> {
    const got = await this.take();
    if (got === null) return 'retry';
    const out = await this.askOn(got.s, req, line);
    if (out !== 'retry' || !got.warm || this.down) return out;
    // The ready connection failed before the exit answered (closed as it was taken): once more on a new one.
    const fresh = await this.open();
    return fresh === null ? 'retry' : this.askOn(fresh, req, line);
  }

  private async askOn(s: tls.TLSSocket, req: DialRequest, line: string): Promise<DialOutcome | 'retry'> {
    if (!req.wanted()) {
      s.destroy();
      return null;
    }
    if (this.down) {
      s.destroy();
      return 'retry';
    }
    req.connecting(s);
    s.write(line);
    this.waiting.add(s);
    // The exit answers after its own connect; a hung exit fails its probes and abortWaiting() ends this wait.
    const answer = await readLine(s, ANSWER_TIMEOUT_MS);
    this.waiting.delete(s);
    if (!req.wanted()) {
      s.destroy();
      return null;
    }
    if (answer === null) {
      s.destroy();
      return 'retry';
    }
    if (answer.startsWith('OK')) return { ok: true, socket: s };
    s.destroy();
    const f = answer.slice(4);
    return { ok: false, failure: isTargetFailure(f) ? f : 'host_unreachable' };
  }

  /** Whether the exit answers on an authenticated connection within `timeoutMs`. */
  async ping(timeoutMs = 1_000): Promise<boolean> {
    if (this.o.fingerprints().length === 0) return false; // nothing could verify it: not one handshake a second
    const s = this.unpark(this.idle.shift()) ?? (await this.open());
    if (!s) return false;
    s.write('PING\n');
    const ok = (await readLine(s, timeoutMs)) === 'PONG';
    if (ok) this.down = false;
    const r = this.ready.get(s);
    if (ok && r) r.since = Date.now();
    if (ok && !this.closed && this.idle.length < this.warm && r && this.o.fingerprints().includes(r.fingerprint)) this.keep(s);
    else s.destroy();
    return ok;
  }

  /**
   * Back among the ready ones, read while it waits: the exit closing it (it died, or restarted) is seen at
   * once, not when a tunnel writes its DIAL into it. Dropped from them when it closes.
   */
  private keep(s: tls.TLSSocket): void {
    if (s.destroyed || s.readableEnded) return void s.destroy();
    this.idle.push(s);
    // A ready connection hears nothing until its DIAL: any byte, or its end, and it is useless.
    s.on('data', destroySelf);
    s.on('end', destroySelf);
    s.resume();
    if (this.tracked.has(s)) return;
    this.tracked.add(s);
    s.once('close', () => {
      const i = this.idle.indexOf(s);
      if (i < 0) return;
      this.idle.splice(i, 1);
      if (!this.closed) this.o.onLost?.();
    });
  }

  /** The exit left the registry (or the entry stops): ready connections close, waiting tunnels go elsewhere. */
  close(): void {
    this.closed = true;
    this.abortWaiting();
    for (const s of this.idle.splice(0)) s.destroy();
  }
}
