// Loopback TCP and UDP fixtures shared by the suites.
import dgram from 'node:dgram';
import net from 'node:net';
import { sleep, waitFor } from './wait.js';

/**
 * The UDP relay ports a gateway uses unless told (`--udp-ports`, UDP_DEFAULTS): on a local address every one of
 * them is a relay of some worker, so the gateway refuses them as datagram targets. A test's UDP target on
 * loopback takes a port outside them (an ephemeral port falls inside about one time in six).
 */
export const RELAY_PORTS = { lo: 40000, hi: 44999 } as const;
const inRelayPorts = (port: number) => port >= RELAY_PORTS.lo && port <= RELAY_PORTS.hi;

/** A UDP socket bound on `host` to an ephemeral port outside RELAY_PORTS (for a target of a SOCKS5 UDP association). */
export async function udpTargetSocket(host = '127.0.0.1'): Promise<dgram.Socket> {
  for (;;) {
    const s = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    await new Promise<void>((r) => s.bind(0, host, r));
    if (!inRelayPorts(s.address().port)) return s;
    await new Promise<void>((r) => s.close(() => r()));
  }
}

/** TCP echo server on 127.0.0.1 (a tunnel's far end). */
export function tcpEcho(): Promise<net.Server> {
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

/** `127.0.0.1:port` of a listening server. */
export const addrOf = (s: net.Server) => `127.0.0.1:${(s.address() as net.AddressInfo).port}`;

/** A port on 127.0.0.1 that was free a moment ago: for a server to bind, or as a closed port (nothing listens). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A port free on 127.0.0.1 right now for UDP and for TCP alike (a DNS server binds both), outside RELAY_PORTS. */
export async function freeUdpPort(): Promise<number> {
  for (;;) {
    const s = await udpTargetSocket();
    const port = s.address().port;
    await new Promise<void>((r) => s.close(() => r()));
    const tcpFree = await new Promise<boolean>((resolve) => {
      const t = net.createServer();
      t.once('error', () => resolve(false));
      t.listen(port, '127.0.0.1', () => t.close(() => resolve(true)));
    });
    if (tcpFree) return port;
  }
}

/**
 * One SOCKS5 UDP association through `socks` (host:port) as `user`: the addresses `n` datagrams left from, as an echo
 * target saw them, or the ASSOCIATE's failure reply.
 */
export async function udpFrom(
  socks: string,
  password: string,
  user: string,
  n: number,
): Promise<string[] | { reply: number }> {
  const echo = await udpTargetSocket();
  const seen: string[] = [];
  echo.on('message', (m, r) => {
    seen.push(r.address);
    echo.send(m, r.port, r.address);
  });
  const client = dgram.createSocket('udp4');
  await new Promise<void>((r) => client.bind(0, '127.0.0.1', r));
  const [host, port] = socks.split(':') as [string, string];
  const control = net.connect(Number(port), host);
  control.on('error', () => {});
  let buf = Buffer.alloc(0);
  control.on('data', (d: Buffer) => (buf = Buffer.concat([buf, d])));
  try {
    const u = Buffer.from(user);
    const p = Buffer.from(password);
    control.write(
      Buffer.concat([
        Buffer.from([5, 1, 2, 1, u.length]),
        u,
        Buffer.from([p.length]),
        p,
        Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]),
      ]),
    );
    await waitFor('the ASSOCIATE reply', () => buf.length >= 6 || control.destroyed, 5_000);
    if (buf[3] !== 0 || buf.length < 14 || buf[5] !== 0) return { reply: buf[5] ?? -1 };
    const relayPort = buf.readUInt16BE(12);
    const ep = (echo.address() as net.AddressInfo).port;
    const answers: Buffer[] = [];
    client.on('message', (m) => answers.push(m));
    for (let i = 0; i < n; i++) {
      client.send(
        Buffer.concat([Buffer.from([0, 0, 0, 1, 127, 0, 0, 1, ep >> 8, ep & 255]), Buffer.from(`d${i}`)]),
        relayPort,
        '127.0.0.1',
      );
      const had = answers.length;
      const t0 = Date.now();
      while (answers.length === had && Date.now() - t0 < 3_000) await sleep(5);
    }
    return seen;
  } finally {
    control.destroy();
    client.close();
    echo.close();
  }
}
