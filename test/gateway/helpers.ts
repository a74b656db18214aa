// Test fixtures for the gateway: a mutable Admitter, a recording TrafficSink, loopback targets
// (TCP echo, HTTP echo, HTTPS echo with an openssl-made certificate), curl, raw sockets.
import { execFile, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startGateway } from '../../src/gateway/index.js';
import type { AdmitResult, Admitter, Gateway, GatewayOptions } from '../../src/gateway/types.js';
import { selfSignedCert } from '../helpers/tls.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

export class TestAdmitter implements Admitter {
  users = new Map<string, { password: string; accountId: number }>();
  whitelist = new Map<string, number>();
  inactiveAccounts = new Set<number>();
  calls = 0;

  async admitByCredentials(username: string, password: string, baseUsername?: string): Promise<AdmitResult> {
    this.calls++;
    const name = this.users.has(username) || !baseUsername ? username : baseUsername;
    const u = this.users.get(name);
    if (!u) return { ok: false, reason: 'unknown_user' };
    if (u.password !== password) return { ok: false, reason: 'wrong_password', accountId: u.accountId };
    if (this.inactiveAccounts.has(u.accountId)) return { ok: false, reason: 'account_inactive' };
    return { ok: true, accountId: u.accountId, user: name };
  }

  async admitBySourceIp(ipv4: string): Promise<AdmitResult> {
    this.calls++;
    const id = this.whitelist.get(ipv4);
    if (id === undefined || this.inactiveAccounts.has(id)) return { ok: false, reason: 'not_whitelisted' };
    return { ok: true, accountId: id };
  }
}

/** The gateway's metered usage, collected as the daemon's meter does and summed per account. */
export class UsageTally {
  readonly byAccount = new Map<number, { up: number; down: number; connections: number; subjects: Set<string> }>();
  constructor(private readonly gw: () => Gateway) {}
  collect(): this {
    for (const d of this.gw().collectUsage()) {
      const t = this.byAccount.get(d.accountId) ?? { up: 0, down: 0, connections: 0, subjects: new Set<string>() };
      t.up += d.bytesUp;
      t.down += d.bytesDown;
      t.connections += d.connections;
      t.subjects.add(d.subject);
      this.byAccount.set(d.accountId, t);
    }
    return this;
  }
  of(accountId: number) {
    return this.collect().byAccount.get(accountId) ?? { up: 0, down: 0, connections: 0, subjects: new Set<string>() };
  }
}

export interface TestGateway {
  gw: Gateway;
  admission: TestAdmitter;
  usage: UsageTally;
  http: string; // host:port
  socks: string;
  httpPort: number;
  socksPort: number;
}

/** A gateway on loopback; over `TestAdmitter` unless another Admitter is given (then `admission` is that one). */
export async function startTestGateway(over: Partial<GatewayOptions> = {}): Promise<TestGateway> {
  const admission = (over.admission as TestAdmitter | undefined) ?? new TestAdmitter();
  if (admission instanceof TestAdmitter) admission.users.set('alice', { password: 's3cret:pw', accountId: 1 });
  let gateway: Gateway | null = null;
  const usage = new UsageTally(() => gateway!);
  const gw = await startGateway({
    httpProxyListen: { host: '127.0.0.1', port: 0 },
    socksListen: { host: '127.0.0.1', port: 0 },
    allowPrivateTargets: true,
    proxyProtocolFrom: [],
    ownListeners: () => [],
    ...over,
    admission,
  });
  gateway = gw;
  const h = gw.httpProxyAddress();
  const s = gw.socksAddress();
  return {
    gw,
    admission,
    usage,
    http: h ? `${h.host}:${h.port}` : '',
    socks: s ? `${s.host}:${s.port}` : '',
    httpPort: h?.port ?? 0,
    socksPort: s?.port ?? 0,
  };
}

/** TCP echo server; records each connection's remote address. */
export async function startTcpEcho(
  host = '127.0.0.1',
): Promise<{ server: net.Server; port: number; peers: string[]; sockets: Set<net.Socket> }> {
  const peers: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    peers.push(s.remoteAddress ?? '');
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, port: (server.address() as net.AddressInfo).port, peers, sockets };
}

function echoHandler(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.stringify({
      remote: req.socket.remoteAddress,
      method: req.method,
      url: req.url,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: Buffer.concat(chunks).toString('latin1'),
    });
    res.setHeader('content-type', 'application/json');
    res.setHeader('x-echo', 'yes');
    res.end(body);
  });
}

export async function startHttpEcho(): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(echoHandler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port };
}

let certCache: { key: string; cert: string; certFile: string } | null = null;

/** A self-signed certificate for "localhost" and 127.0.0.1 (test/helpers/tls.ts), made once per file. */
export function testCertificate(): { key: string; cert: string; certFile: string } {
  certCache ??= selfSignedCert(mkdtempSync(path.join(tmpdir(), 'gw-cert-')), 'localhost', 'DNS:localhost,IP:127.0.0.1');
  return certCache;
}

export async function startHttpsEcho(): Promise<{ server: https.Server; port: number; certFile: string }> {
  const c = testCertificate();
  const server = https.createServer({ key: c.key, cert: c.cert }, echoHandler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port, certFile: c.certFile };
}

export interface CurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function curl(args: string[], timeoutS = 10): Promise<CurlResult> {
  return new Promise((resolve) => {
    execFile(
      '/usr/bin/curl',
      ['-sS', '--max-time', String(timeoutS), '--noproxy', '', ...args],
      { env: { PATH: process.env.PATH ?? '/usr/bin' }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** A raw client socket with a byte inbox. */
export class RawClient {
  readonly socket: net.Socket;
  private inbox = Buffer.alloc(0);
  private waiters: Array<() => void> = [];
  ended = false;
  closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (c: Buffer) => {
      this.inbox = Buffer.concat([this.inbox, c]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    // Like an ordinary client: when the peer has finished, stop holding the socket (no CLOSE_WAIT).
    socket.on('end', () => setTimeout(() => socket.end(), 20));
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => {});
  }

  static connect(port: number, host = '127.0.0.1', localAddress?: string): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ port, host, localAddress, allowHalfOpen: true }, () => resolve(new RawClient(s)));
      s.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  write(b: Buffer | string): void {
    this.socket.write(b);
  }

  /** Wait until `n` bytes are in the inbox (or the socket ended) and take them. */
  async read(n: number, timeoutMs = 5000): Promise<Buffer> {
    const deadline = Date.now() + patient(timeoutMs);
    while (this.inbox.length < n && !this.ended && !this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${n} bytes (have ${this.inbox.length})`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    const out = this.inbox.subarray(0, n);
    this.inbox = this.inbox.subarray(out.length);
    return out;
  }

  /** Wait for a string to appear in the inbox, take everything up to and including it. */
  async readUntil(marker: string, timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + patient(timeoutMs);
    for (;;) {
      const i = this.inbox.indexOf(marker);
      if (i >= 0) {
        const out = this.inbox.subarray(0, i + marker.length).toString('latin1');
        this.inbox = this.inbox.subarray(i + marker.length);
        return out;
      }
      if (this.ended || this.closed)
        throw new Error(`ended before ${JSON.stringify(marker)}: ${this.inbox.toString('latin1')}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out waiting for ${JSON.stringify(marker)}: ${this.inbox.toString('latin1')}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Everything until the peer ends or closes. */
  async readToEnd(timeoutMs = 5000): Promise<Buffer> {
    const deadline = Date.now() + patient(timeoutMs);
    while (!this.ended && !this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for end');
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    const out = this.inbox;
    this.inbox = Buffer.alloc(0);
    return out;
  }

  async waitClosed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + patient(timeoutMs);
    while (!this.closed && !this.ended) {
      if (Date.now() > deadline) throw new Error('still open');
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

export { sleep };

/** Polls until `check` holds (test/helpers/wait.ts's waitFor, for a plain condition). */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  await waitFor('a condition', check, timeoutMs);
}

export function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

/**
 * Sockets still held by a process (inode != 0, so not kernel orphans) in the given states, whose
 * local port (side 'local') or remote port (side 'remote') is `port`. From /proc/net/tcp{,6}.
 */
export function socketsInState(port: number, states: string[], side: 'local' | 'remote' = 'local'): number {
  const codes: Record<string, string> = {
    CLOSE_WAIT: '08',
    FIN_WAIT2: '05',
    ESTABLISHED: '01',
    TIME_WAIT: '06',
    FIN_WAIT1: '04',
    LAST_ACK: '09',
  };
  const want = new Set(states.map((s) => codes[s]));
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const addr = (side === 'local' ? cols[1] : cols[2]) ?? '';
      if (addr.endsWith(`:${hex}`) && want.has(cols[3]) && cols[9] !== '0') n++;
    }
  }
  return n;
}

/**
 * A loopback port whose SYNs go unanswered: a listener (backlog 0) whose accept queue is kept full
 * and never drained, so a new connect times out. Runs in python3 (node would accept).
 */
export async function startBlackhole(): Promise<{ port: number; stop: () => void }> {
  const code = [
    'import socket, sys, time',
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)",
    'port = s.getsockname()[1]; fill = []',
    'for i in range(3):',
    '    c = socket.socket(); c.setblocking(False)',
    "    try: c.connect(('127.0.0.1', port))",
    '    except BlockingIOError: pass',
    '    fill.append(c)',
    'time.sleep(0.2); print(port, flush=True); sys.stdin.read()',
  ].join('\n');
  const p = spawn('python3', ['-c', code], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve) => createInterface({ input: p.stdout }).once('line', resolve));
  return { port: Number(line), stop: () => p.kill() };
}
