// SOCKS5 UDP ASSOCIATE (RFC 1928 section 7): a relay socket on the SOCKS listener's address, from the
// configured port range, for one admitted control connection. Client datagrams are accepted only from the
// control connection's address (and the port the request named, if it named one), FRAG ≠ 0 is dropped, each
// target passes the same resolver and target policy as a CONNECT, and every datagram of the association leaves
// from one egress address; answers come back wrapped in the header that names their sender, and only from
// targets the association sent to. The association ends with its control connection, or after its idle time.
// Where its datagrams go is the carrier the gateway's dialer gave (dial/udp-out.ts, hop/udp-carrier.ts); they are
// metered as a tunnel's bytes are (relay/datagrams.ts).
import dgram from 'node:dgram';
import net from 'node:net';
import type { ClientConn } from '../conn.js';
import { canonicalIp } from '../dial/target-policy.js';
import {
  holdsUdpPort,
  holdUdpPort,
  isOwnUdpSocket,
  literalLookup,
  releaseUdpPort,
  type UdpCarrier,
  type UdpSender,
} from '../dial/udp-out.js';
import { countDatagram, datagramMayPass } from '../relay/datagrams.js';
import { encodeUdpHeader, isBadNameTarget, parseUdpDatagram } from '../wire/socks5.js';

/** The largest UDP payload over IPv4. */
const MAX_DATAGRAM = 65_507;

export type UdpDrop = 'frag' | 'source' | 'policy' | 'unsolicited' | 'malformed' | 'over_limit';

/** A relay socket bound on `host` to a free port of the range, or null when none is free. */
export async function bindRelay(host: string, range: { lo: number; hi: number }): Promise<dgram.Socket | null> {
  const type = net.isIPv6(host) ? 'udp6' : 'udp4';
  const span = range.hi - range.lo + 1;
  const start = Math.floor(Math.random() * span);
  for (let i = 0; i < span; i++) {
    const port = range.lo + ((start + i) % span);
    if (holdsUdpPort(port)) continue; // this process's (other processes' are found by EADDRINUSE)
    const s = dgram.createSocket({ type, reuseAddr: false, lookup: literalLookup });
    const ok = await new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false));
      s.bind({ address: host, port, exclusive: true }, () => resolve(true));
    });
    if (ok) {
      holdUdpPort(host, port);
      s.once('close', () => releaseUdpPort(host, port));
      return s;
    }
    s.close();
  }
  return null;
}

/** Whether `msg` starts with the bytes of `head` (a SOCKS5 UDP header, at most 262 bytes). */
function sameHeader(msg: Buffer, head: Buffer): boolean {
  const n = head.length;
  if (msg.length < n) return false;
  for (let i = 0; i < n; i++) if (msg[i] !== head[i]) return false;
  return true;
}

export class UdpAssociation {
  private carrier: UdpCarrier | null = null;
  private readonly headers = new Map<string, Buffer>();
  private lastHost: string | null = null;
  /** The source address the request named (null: any, the control connection's address decides). */
  private readonly expectedHost: string | null;
  /** Where answers go: the client's port, learned from its first datagram. */
  private clientPort: number | null;
  /**
   * The connection's datagrams either way at the idle check's last look, and (lastActive) when that count last
   * changed: the check watches the count, so no datagram reads the clock.
   */
  private relayedSeen = 0;
  private lastActive = Date.now();
  /** The client address and port that passed the source check last. */
  private okAddress: string | null = null;
  private okPort = -1;
  /** The last datagram's header (its bytes, FRAG 0) and the target it names. */
  private lastTarget: { head: Buffer; host: string; port: number } | null = null;
  /** The last sender an answer came from, and its header. */
  private lastFrom: { from: object; header: Buffer } | null = null;
  private readonly idleTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly conn: ClientConn,
    private readonly relay: dgram.Socket,
    /** The address and port the request named (0.0.0.0:0 or :: 0: any port of the control connection's address). */
    private readonly expected: { host: string; port: number },
    private readonly idleMs: number,
  ) {
    this.clientPort = expected.port !== 0 ? expected.port : null;
    const named = canonicalIp(expected.host);
    this.expectedHost = named === '0.0.0.0' || named === '::' ? null : named;
    relay.on('message', (msg, rinfo) => this.fromClient(msg, rinfo));
    relay.on('error', () => conn.destroy());
    this.idleTimer = setInterval(
      () => {
        const now = Date.now();
        const relayed = conn.datagramsUp + conn.datagramsDown;
        if (relayed !== this.relayedSeen) {
          this.relayedSeen = relayed;
          this.lastActive = now;
        } else if (now - this.lastActive >= this.idleMs) conn.destroy();
      },
      Math.min(1_000, Math.max(50, Math.floor(idleMs / 4))),
    );
    this.idleTimer.unref();
    // The control connection carries nothing more; its end (or loss) ends the association.
    conn.socket.on('data', () => {});
    conn.socket.on('end', () => conn.destroy());
    conn.socket.on('error', () => conn.destroy());
    conn.socket.once('close', () => this.close());
    conn.socket.resume();
  }

  /** Where its datagrams go from now on; its answers come to answer(), and its end ends the association. */
  attach(carrier: UdpCarrier): void {
    if (this.closed) return carrier.close();
    this.carrier = carrier;
    carrier.receive(
      (from, data) => this.answer(from, data),
      () => this.conn.destroy(),
    );
  }

  private drop(reason: UdpDrop): void {
    this.conn.core.countUdpDrop(reason);
  }

  private fromClient(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    if (this.closed || this.carrier === null) return;
    // The sender checked once per address and port (a client sends from one): the same again skips the check.
    if (rinfo.address !== this.okAddress || rinfo.port !== this.okPort) {
      const from = canonicalIp(rinfo.address);
      if (
        from !== this.conn.clientAddress ||
        (this.expectedHost !== null && from !== this.expectedHost) ||
        (this.expected.port !== 0 && rinfo.port !== this.expected.port)
      ) {
        return this.drop('source');
      }
      // One of the gateway's own sockets (a client on the gateway's host shares its address): never a client.
      if (isOwnUdpSocket(from, rinfo.port)) return this.drop('source');
      this.okAddress = rinfo.address;
      this.okPort = rinfo.port;
    }
    // The header parsed once per target: a datagram whose header repeats the last one's bytes reuses it.
    let target = this.lastTarget;
    if (target === null || !sameHeader(msg, target.head)) {
      const d = parseUdpDatagram(msg);
      if (d.kind !== 'ok') return this.drop('malformed');
      if (d.value.frag !== 0) return this.drop('frag');
      if (isBadNameTarget(d.value.address)) return this.drop('malformed');
      target = { head: Buffer.from(msg.subarray(0, d.value.dataAt)), host: d.value.address.host, port: d.value.port };
      this.lastTarget = target;
    }
    this.clientPort = rinfo.port;
    const data = msg.subarray(target.head.length);
    // The budget and rate a tunnel's pump takes from (shared with the user's connections); a datagram cannot wait.
    if (!datagramMayPass(this.conn, 'up', data.length)) return this.drop('over_limit');
    const host = target.host;
    const sent = this.carrier.send(host, target.port, data);
    if (sent === true) this.sentUp(data.length, host);
    else if (sent !== false) void sent.then((ok) => ok && !this.closed && this.sentUp(data.length, host));
  }

  private sentUp(n: number, host: string): void {
    // Usage per target domain: what went before stays with the previous target (rarely more than one).
    if (host !== this.lastHost) {
      this.lastHost = host;
      this.conn.core.retarget(this.conn, host);
    }
    countDatagram(this.conn, 'up', n);
  }

  /** The header naming a sender, made once per sender (an association talks to few). */
  private headerFor(from: UdpSender): Buffer {
    if (this.lastFrom?.from === from) return this.lastFrom.header;
    const header = this.headerOf(from);
    this.lastFrom = { from, header };
    return header;
  }

  private headerOf(from: UdpSender): Buffer {
    const key = `${from.address}:${from.port}`;
    let h = this.headers.get(key);
    if (h === undefined) {
      h = encodeUdpHeader(from.address, from.port);
      if (this.headers.size >= 1_024) this.headers.clear();
      this.headers.set(key, h);
    }
    return h;
  }

  /** An answer from a target (the carrier's, through attach): to the client, in the header that names its sender. */
  private answer(from: UdpSender, data: Buffer): void {
    // Before the client's first datagram there is nowhere to send it (the carrier drops senders never sent to).
    if (this.closed || this.clientPort === null) return this.drop('unsolicited');
    // Past what one datagram can carry with the header: dropped here (sending it would fail the relay socket).
    if (data.length > MAX_DATAGRAM - 22 || !datagramMayPass(this.conn, 'down', data.length))
      return this.drop('over_limit');
    // No callback: a send the kernel refuses (an unreachable client, a full buffer) loses that datagram and
    // nothing else (dgram reports it only to a callback, which would cost a tick per datagram).
    this.relay.send([this.headerFor(from), data], this.clientPort, this.conn.clientAddress);
    countDatagram(this.conn, 'down', data.length);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.idleTimer);
    this.conn.core.stats.udp.associationsOpen--;
    this.relay.close();
    this.carrier?.close();
  }
}
