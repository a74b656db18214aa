// Scripted local peers for the check tests: echo targets, a minimal HTTP proxy and a SOCKS5 peer
// whose answers the test chooses (certificates: test/helpers/tls.ts). Loopback only.
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import {
  connect as netConnect,
  createServer as createNetServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import { encodeSocksAddress } from '../../../src/rules/socks5-address.js';

function listen<T extends Server | HttpServer>(server: T): Promise<T & { port: number }> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(Object.assign(server, { port: (server.address() as AddressInfo).port })),
    ),
  );
}

export interface Closable {
  port: number;
  close(): Promise<void>;
}

function closer(server: Server | HttpServer, sockets: Set<Socket>): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
}

function track(server: Server | HttpServer): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return sockets;
}

export type EchoMode = 'json' | 'text' | 'status500' | 'noip' | 'hang';

function echoHandler(mode: EchoMode) {
  return (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const ip = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (mode === 'hang') return;
    if (mode === 'status500') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      return;
    }
    if (mode === 'noip') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hello</html>');
      return;
    }
    if (mode === 'text') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`${ip}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ip }));
  };
}

/** An IP echo over plain HTTP on 127.0.0.1. */
export async function httpEcho(mode: EchoMode = 'json'): Promise<Closable> {
  const server = createHttpServer(echoHandler(mode));
  const sockets = track(server);
  await listen(server);
  return { port: (server.address() as AddressInfo).port, close: closer(server, sockets) };
}

/** An IP echo over HTTPS with the given certificate. */
export async function httpsEcho(pair: { key: string; cert: string }, mode: EchoMode = 'json'): Promise<Closable> {
  const server = createHttpsServer({ key: pair.key, cert: pair.cert }, echoHandler(mode));
  const sockets = new Set<Socket>();
  server.on('secureConnection', (s) => sockets.add(s));
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await listen(server);
  return { port: (server.address() as AddressInfo).port, close: closer(server, sockets) };
}

/** A TCP server that accepts and never says anything. */
export async function silentServer(): Promise<Closable> {
  const server = createNetServer(() => {});
  const sockets = track(server);
  await listen(server);
  return { port: (server.address() as AddressInfo).port, close: closer(server, sockets) };
}

/** A port that was free a moment ago (nothing listens). */
export { freePort as closedPort } from '../../helpers/net.js';

export type HttpProxyScript =
  | { kind: 'tunnel'; user?: string; pass?: string; realm?: string; allowNoCreds?: boolean; egress?: string }
  | { kind: 'answer'; status: number; reason: string; body?: string; headers?: Record<string, string> }
  | { kind: 'hang' }
  | { kind: 'close' };

export interface HttpProxyPeer extends Closable {
  /** Raw heads the proxy received. */
  heads: string[];
}

/** A minimal HTTP proxy: CONNECT tunnels and absolute-form forwarding, with scripted admission. */
export async function httpProxyPeer(script: HttpProxyScript): Promise<HttpProxyPeer> {
  const heads: string[] = [];
  const server = createNetServer((client) => {
    client.on('error', () => {});
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      const head = buf.subarray(0, end).toString('latin1');
      const rest = buf.subarray(end + 4);
      heads.push(head);
      handle(client, head, rest);
    };
    client.on('data', onData);
  });
  const handle = (client: Socket, head: string, rest: Buffer) => {
    if (script.kind === 'hang') return;
    if (script.kind === 'close') return void client.destroy();
    if (script.kind === 'answer') {
      const body = script.body ?? '';
      const extra = Object.entries(script.headers ?? {})
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      client.end(
        `HTTP/1.1 ${script.status} ${script.reason}\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const lines = head.split('\r\n');
    const [method, uri] = lines[0]!.split(' ') as [string, string];
    const auth = lines
      .find((l) => /^proxy-authorization:/i.test(l))
      ?.split(':')
      .slice(1)
      .join(':')
      .trim();
    const expected =
      script.user !== undefined
        ? `Basic ${Buffer.from(`${script.user}:${script.pass ?? ''}`).toString('base64')}`
        : undefined;
    const admitted = auth ? auth === expected : script.allowNoCreds === true;
    if (!admitted) {
      client.end(
        `HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="${script.realm ?? 'proxy'}"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
      );
      return;
    }
    if (method === 'CONNECT') {
      const [host, port] = [
        uri.slice(0, uri.lastIndexOf(':')).replace(/^\[|\]$/g, ''),
        Number(uri.slice(uri.lastIndexOf(':') + 1)),
      ];
      const up = netConnect({ host, port, localAddress: script.egress });
      up.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
      up.on('connect', () => {
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (rest.length) up.write(rest);
        client.pipe(up).pipe(client);
      });
      return;
    }
    const u = new URL(uri);
    const up = netConnect({ host: u.hostname, port: Number(u.port || 80), localAddress: script.egress });
    up.on('error', () => client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    up.on('connect', () => {
      const fwd = [
        `${method} ${u.pathname}${u.search} HTTP/1.1`,
        ...lines.slice(1).filter((l) => !/^proxy-/i.test(l)),
      ].join('\r\n');
      up.write(`${fwd}\r\n\r\n`);
      if (rest.length) up.write(rest);
      client.pipe(up).pipe(client);
    });
  };
  const sockets = track(server);
  await listen(server);
  return { port: (server.address() as AddressInfo).port, heads, close: closer(server, sockets) };
}

export interface SocksScript {
  /** Method the peer picks: default 0x02 when offered with matching creds config, else 0x00. */
  method?: number;
  user?: string;
  pass?: string;
  /** RFC 1929 status to send (default: 0 if creds match, else 1). */
  authStatus?: number;
  /** CONNECT reply code (default: 0 and a real tunnel). */
  reply?: number;
  hangAt?: 'greeting' | 'auth' | 'connect';
  egress?: string;
  /** The address the success reply names as bound (default 127.0.0.1), written by src/rules/socks5-address.ts. */
  bound?: string;
}

export interface SocksPeer extends Closable {
  /** CONNECT requests seen: atyp and address. */
  requests: Array<{ atyp: number; host: string; port: number }>;
}

/** A SOCKS5 peer with scripted answers; with reply 0 it really tunnels. */
export async function socksPeer(script: SocksScript): Promise<SocksPeer> {
  const requests: SocksPeer['requests'] = [];
  const server = createNetServer((client) => {
    client.on('error', () => {});
    let buf = Buffer.alloc(0);
    let phase: 'greeting' | 'auth' | 'connect' | 'done' = 'greeting';
    client.on('data', (chunk: Buffer) => {
      if (phase === 'done') return;
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (script.hangAt === phase) return;
        if (phase === 'greeting') {
          if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
          const methods = [...buf.subarray(2, 2 + buf[1]!)];
          buf = buf.subarray(2 + buf[1]!);
          const pick =
            script.method ??
            (methods.includes(0x02) && script.user !== undefined
              ? 0x02
              : methods.includes(0x00) && script.user === undefined
                ? 0x00
                : 0xff);
          client.write(Buffer.from([0x05, pick]));
          if (pick === 0xff) return void client.end();
          phase = pick === 0x02 ? 'auth' : 'connect';
        } else if (phase === 'auth') {
          if (buf.length < 2) return;
          const ulen = buf[1]!;
          if (buf.length < 3 + ulen) return;
          const plen = buf[2 + ulen]!;
          if (buf.length < 3 + ulen + plen) return;
          const user = buf.subarray(2, 2 + ulen).toString();
          const pass = buf.subarray(3 + ulen, 3 + ulen + plen).toString();
          buf = buf.subarray(3 + ulen + plen);
          const status = script.authStatus ?? (user === script.user && pass === script.pass ? 0 : 1);
          client.write(Buffer.from([0x01, status]));
          if (status !== 0) return void client.end();
          phase = 'connect';
        } else if (phase === 'connect') {
          if (buf.length < 5) return;
          const atyp = buf[3]!;
          const alen = atyp === 0x01 ? 4 : atyp === 0x04 ? 16 : 1 + buf[4]!;
          if (buf.length < 4 + alen + 2) return;
          const addr = buf.subarray(4, 4 + alen);
          const host =
            atyp === 0x01 ? [...addr].join('.') : atyp === 0x03 ? addr.subarray(1).toString() : addr.toString('hex');
          const port = buf.readUInt16BE(4 + alen);
          buf = buf.subarray(4 + alen + 2);
          requests.push({ atyp, host, port });
          phase = 'done';
          const reply = script.reply ?? 0;
          if (reply !== 0) return void client.end(Buffer.from([0x05, reply, 0x00, 0x01, 0, 0, 0, 0, 0, 0]));
          const up = netConnect({ host: host === 'localhost' ? '127.0.0.1' : host, port, localAddress: script.egress });
          up.on('error', () => client.end(Buffer.from([0x05, 0x05, 0x00, 0x01, 0, 0, 0, 0, 0, 0])));
          up.on('connect', () => {
            const bound = encodeSocksAddress(script.bound ?? '127.0.0.1', up.localPort ?? 0)!;
            client.write(Buffer.concat([Buffer.from([0x05, 0x00, 0x00]), bound]));
            if (buf.length) up.write(buf);
            client.pipe(up).pipe(client);
          });
          return;
        } else return;
      }
    });
  });
  const sockets = track(server);
  await listen(server);
  return { port: (server.address() as AddressInfo).port, requests, close: closer(server, sockets) };
}
