// Loopback TCP fixtures shared by the suites.
import net from 'node:net';

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

/** A port free on 127.0.0.1 right now for UDP and for TCP alike (a DNS server binds both). */
export async function freeUdpPort(): Promise<number> {
  const { default: dgram } = await import('node:dgram');
  for (;;) {
    const s = dgram.createSocket('udp4');
    await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
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
