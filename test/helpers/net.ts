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
