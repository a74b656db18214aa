// SOCKS5 (RFC 1928) with username/password (RFC 1929): greeting -> [auth] -> CONNECT request ->
// reply -> tunnel. Admission happens at method selection (source IP) or after RFC 1929 (credentials).
import { afterAdmission, dialTarget, type ClientConn, type ProtocolHandler } from '../conn.js';
import { formatHostPort } from '../../rules/host-port.js';
import { failureLogReason, socksFailureReply, type Failure } from '../replies.js';
import { splice } from '../relay/splice.js';
import { bindRelay, UdpAssociation } from './socks5-udp.js';
import { UDP_DEFAULTS } from '../../rules/udp-defaults.js';
import { canonicalIp } from '../dial/target-policy.js';
import {
  AUTH_VERSION,
  Command,
  Method,
  Reply,
  SOCKS_VERSION,
  encodeReply,
  isBadNameTarget,
  parseGreeting,
  parseRequest,
  parseUserPass,
  type SocksRequest,
} from '../wire/socks5.js';

type Stage = 'greeting' | 'auth' | 'request' | 'done';

// The handshake's fixed answers, made once: a socket write takes the same buffer every time.
const CHOSEN_USER_PASS = Buffer.from([SOCKS_VERSION, Method.UserPass]);
const CHOSEN_NO_AUTH = Buffer.from([SOCKS_VERSION, Method.NoAuth]);
const AUTH_OK = Buffer.from([AUTH_VERSION, 0x00]);

// Refusals that are not about who the client is: the handshake succeeds and the CONNECT gets 0x02.
const AFTER_REQUEST = new Set<Failure>(['traffic_limit', 'plan_expired', 'connection_limit']);

export class Socks5Handler implements ProtocolHandler {
  private stage: Stage = 'greeting';
  /** A plan refusal, answered at the CONNECT request (after a successful handshake). */
  private deferred: Failure | null = null;

  constructor(private readonly conn: ClientConn) {}

  onBytes(): void {
    const { conn } = this;
    const buf = conn.queue.view();
    if (this.stage === 'greeting') {
      const r = parseGreeting(buf);
      if (r.kind === 'incomplete') return;
      if (r.kind === 'error') {
        // A SOCKS5 greeting that offers no method: none of them is acceptable (RFC 1928's 0xFF), said before closing.
        if (r.error === 'no_methods')
          return conn.refuse('malformed', Buffer.from([SOCKS_VERSION, Method.NoAcceptable]));
        conn.logRefusal('malformed');
        return conn.destroy();
      }
      conn.queue.consume(r.consumed);
      conn.core.stats.connectionsTotal.socks5++;
      conn.protocol = 'socks5';
      if (r.value.methods.includes(Method.UserPass)) {
        this.stage = 'auth';
        conn.socket.write(CHOSEN_USER_PASS);
        return this.onBytes();
      }
      if (!r.value.methods.includes(Method.NoAuth)) {
        conn.core.countFailure('no_acceptable_method');
        return conn.refuse('malformed', Buffer.from([SOCKS_VERSION, Method.NoAcceptable]));
      }
      afterAdmission(
        conn,
        () => conn.admit(null),
        (failure) => {
          if (failure === 'gone') return;
          if (failure && AFTER_REQUEST.has(failure)) this.deferred = failure;
          else if (failure)
            return conn.refuse(failureLogReason(failure), Buffer.from([SOCKS_VERSION, Method.NoAcceptable]));
          this.stage = 'request';
          conn.socket.write(CHOSEN_NO_AUTH);
          conn.to('handshake');
        },
      );
      return;
    }
    if (this.stage === 'auth') {
      const r = parseUserPass(buf);
      if (r.kind === 'incomplete') return;
      if (r.kind === 'error') {
        conn.core.countFailure('malformed');
        return conn.refuse('malformed', Buffer.from([AUTH_VERSION, 0x01]));
      }
      conn.queue.consume(r.consumed);
      conn.username = r.value.username;
      afterAdmission(
        conn,
        () => conn.admit(r.value),
        (failure) => {
          if (failure === 'gone') return;
          if (failure && AFTER_REQUEST.has(failure)) this.deferred = failure;
          else if (failure) return conn.refuse(failureLogReason(failure), Buffer.from([AUTH_VERSION, 0x01]));
          this.stage = 'request';
          conn.socket.write(AUTH_OK);
          conn.to('handshake');
        },
      );
      return;
    }
    if (this.stage === 'request') {
      const r = parseRequest(buf);
      if (r.kind === 'incomplete') return;
      if (r.kind === 'error') {
        if (r.error === 'bad_version') {
          conn.logRefusal('malformed');
          return conn.destroy();
        }
        const rep = r.error === 'bad_address_type' ? Reply.AddressTypeNotSupported : Reply.GeneralFailure;
        return conn.refuse('malformed', encodeReply(rep));
      }
      conn.queue.consume(r.consumed);
      this.stage = 'done';
      const udp = r.value.command === Command.UdpAssociate;
      if (udp) conn.protocol = 'socks5-udp';
      else conn.target = formatHostPort(r.value.address.host, r.value.port);
      if (this.deferred) return conn.refuse(failureLogReason(this.deferred), socksFailureReply(this.deferred));
      if (udp) return this.associate(r.value);
      if (r.value.command !== Command.Connect) return conn.refuse('malformed', encodeReply(Reply.CommandNotSupported));
      this.connect(r.value);
    }
  }

  /**
   * UDP ASSOCIATE: a relay port of the range on the listener's address, for as long as this connection lives. Its
   * datagrams go where the gateway's dialer carries them (`Dialer.associate`, as a CONNECT's `dial`): out from this
   * node, or over the hop to an exit chosen like a connection's.
   */
  private associate(req: SocksRequest): void {
    const { conn } = this;
    const udp = conn.core.opts.udp ?? UDP_DEFAULTS;
    // Reserved now, before any wait: concurrent requests cannot all pass the cap. Released when the association
    // ends, or at once if it never starts.
    const counts = conn.core.stats.udp;
    if (counts.associationsOpen >= udp.maxAssociations)
      return conn.refuse('connection_limit', encodeReply(Reply.GeneralFailure));
    counts.associationsOpen++;
    let started = false;
    conn.socket.once('close', () => {
      if (!started) counts.associationsOpen--;
    });
    const dialer = conn.core.dialer;
    // A dialer that carries no UDP (an entry whose exit dialer cannot): never from here (an entry has no egress of its own).
    if (!dialer.associate) return conn.refuse('malformed', encodeReply(Reply.CommandNotSupported));
    void (async () => {
      const relay = await bindRelay(canonicalIp(conn.socket.localAddress ?? '127.0.0.1'), udp.ports);
      if (relay === null) return conn.refuse('connection_limit', encodeReply(Reply.GeneralFailure)); // every port of the range in use
      if (conn.closed) return void relay.close();
      // The egress is chosen now, as a connection's (a `both` node targeted elsewhere gets no_exit, as a CONNECT
      // does). The account goes with it: its target rules apply to each datagram's target as asked, and (here or
      // at the exit) to what a name resolves to.
      const out = await dialer.associate!({
        session: conn.egressSession,
        exitWish: conn.exitWish,
        pin: conn.egressPin,
        onlyExits: conn.onlyExits(),
        accountId: conn.accountId,
        stillWanted: () => !conn.closed,
        judge: (host) => conn.core.judgeTarget(conn.accountId, host, conn.meterSubject),
        relayPorts: udp.ports,
        drop: (reason) => conn.core.countUdpDrop(reason),
      });
      if (out?.via) conn.via = out.via;
      if (!out || !out.ok) {
        relay.close();
        if (out && !out.ok)
          conn.refuse(
            failureLogReason(out.failure),
            out.failure === 'no_exit' ? encodeReply(Reply.NetworkUnreachable) : socksFailureReply(out.failure),
          );
        return;
      }
      const { carrier } = out;
      if (out.egress && conn.core.countsByAddress(conn.accountId)) conn.egressAddress = out.egress;
      if (conn.closed || !conn.to('udp')) {
        relay.close();
        carrier.close();
        return;
      }
      const a = relay.address();
      conn.socket.write(encodeReply(Reply.Succeeded, { address: a.address, port: a.port }));
      started = true; // from here the association gives the reservation back when it ends
      new UdpAssociation(conn, relay, { host: req.address.host, port: req.port }, udp.idleMs).attach(carrier);
    })().catch(() => conn.destroy());
  }

  private connect(req: SocksRequest): void {
    const { conn } = this;
    if (req.port === 0 || isBadNameTarget(req.address)) {
      conn.refuse('malformed', encodeReply(Reply.HostUnreachable));
      return;
    }
    void dialTarget(conn, req.address.host, req.port)
      .then((out) => {
        if (!out) return;
        if (!out.ok) return conn.refuse(failureLogReason(out.failure), socksFailureReply(out.failure));
        const socket = out.socket;
        const early = conn.handOff('tunnel');
        if (!early) return void socket.destroy();
        const bound =
          socket.localAddress && socket.localPort
            ? {
                address: socket.localAddress,
                port: socket.localPort,
                family: socket.localFamily === 'IPv6' ? (6 as const) : (4 as const),
              }
            : undefined;
        conn.socket.write(encodeReply(Reply.Succeeded, bound));
        splice(conn, socket, early);
      })
      .catch(() => conn.destroy());
  }
}
