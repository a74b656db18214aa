// The hop between an entry node and an exit node (SPEC 13): one TCP connection per tunnel, authenticated
// and kept warm before it is needed, so a tunnel's set-up pays one request line and the exit's own dial.
//
// Wire (text lines, then raw bytes; docs/decisions.md "The hop"):
//   exit  → `PROXYD-HOP/1 <nonce>`               on accept (a fresh random nonce per connection)
//   entry → `AUTH <hex HMAC-SHA256(secret, "proxyd-hop/1:" + nonce)>`
//   exit  → `OK`                                   (a wrong proof: the connection is closed, nothing said)
//   then, on an authenticated connection, any number of `PING` → `PONG`, and at most one
//   entry → `DIAL <host> <port> <session key, URI-encoded, or -> <minutes>`
//   exit  → `OK <local address>` and from then on the connection carries the tunnel's bytes both ways,
//           or `ERR <failure>` (dialer.ts's TargetFailure names) and the connection closes.
// The exit dials through its own dialer: its target policy, resolver, egress address or pool and sticky
// sessions. The entry admits, meters and logs; the exit only relays (each connection counted once).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import type { Dialer, DialOutcome, DialRequest, TargetFailure } from './dialer.js';
import { destroySelf } from './dialer.js';
import { splice, type SpliceOwner } from './splice.js';

const GREETING = 'PROXYD-HOP/1';
const MAX_LINE = 1024;
/** Ready hop connections an entry keeps per exit at most. */
const MAX_WARM = 256;
/** A ready connection is closed by the entry after this (the exit's own limit, READY_IDLE_MS, is twice it). */
const RETIRE_MS = 60_000;
/** A DIAL's answer is waited for at most this (a hung exit is usually found by its probes well before). */
const ANSWER_TIMEOUT_MS = 30_000;
/** When each ready connection last proved itself (made, or answered a PING). */
const readySince = new WeakMap<net.Socket, number>();
/** An accepted connection must prove the secret within this. */
const AUTH_TIMEOUT_MS = 5_000;
/** Accepted connections that have not proved the secret yet, at most (more are closed at once). */
const MAX_PROVING = 1_024;
/** An authenticated connection waiting for its DIAL (a warm one in an entry's pool) is closed after this. */
const READY_IDLE_MS = 120_000;

const FAILURES: ReadonlySet<string> = new Set<TargetFailure>([
  'private_target',
  'own_listener',
  'dns_failed',
  'no_usable_address',
  'refused',
  'net_unreachable',
  'host_unreachable',
  'timeout',
]);

export function hopProof(secret: Buffer, nonce: string): string {
  return createHmac('sha256', secret).update(`proxyd-hop/1:${nonce}`).digest('hex');
}

/** Reads one `\n`-terminated line (at most MAX_LINE bytes); what came after it is put back on the socket. */
function readLine(socket: net.Socket, timeoutMs: number): Promise<string | null> {
  if (socket.destroyed || socket.readableEnded) return Promise.resolve(null);
  return new Promise((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (line: string | null): void => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.removeListener('end', onClose);
      socket.pause();
      resolve(line);
    };
    const onData = (c: Buffer): void => {
      buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
      const nl = buf.indexOf(10);
      if (nl < 0) {
        if (buf.length > MAX_LINE) done(null);
        return;
      }
      const rest = buf.subarray(nl + 1);
      done(buf.subarray(0, nl).toString('latin1'));
      if (rest.length > 0) socket.unshift(rest);
    };
    const onClose = (): void => done(null);
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('end', onClose);
    socket.resume();
  });
}

// ---- the exit's side ------------------------------------------------------------------------------------

export interface HopServerOptions {
  listen: { host: string; port: number };
  secret: Buffer;
  /** The exit's own dialer (target policy, egress, sessions). */
  dialer: Dialer;
  /** The gateway's open tunnels (their idle sweep) and limits: a hop's tunnel runs in the same pump. */
  core: SpliceOwner['core'];
  /** A connection that failed the proof (counted; never logged per attempt). */
  onRefused?: () => void;
}

export interface HopServer {
  address(): { host: string; port: number };
  /** Connections open now (warm and carrying tunnels). */
  open(): number;
  /** Stops accepting, closes warm connections at once, lets tunnels finish for up to `drainMs`. */
  close(drainMs?: number): Promise<void>;
}

export async function startHopServer(o: HopServerOptions): Promise<HopServer> {
  const sockets = new Set<net.Socket>();
  /** The ones carrying a tunnel (the rest are warm, or still proving the secret). */
  const relaying = new Set<net.Socket>();
  let closing = false;
  /** Connections still proving the secret: bounded, so a flood of idle sockets on the hop port costs little. */
  let proving = 0;
  const server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true }, (s) => {
    if (closing || proving >= MAX_PROVING) return void s.destroy();
    proving++;
    let proved = false;
    const settled = () => {
      if (!proved) proving--;
      proved = true;
    };
    s.once('close', settled);
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      relaying.delete(s);
    });
    s.on('error', destroySelf);
    void serveHop(s, o, () => relaying.add(s), settled).catch(() => s.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: o.listen.host, port: o.listen.port }, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const a = server.address() as net.AddressInfo;
  return {
    address: () => ({ host: a.address, port: a.port }),
    open: () => sockets.size,
    async close(drainMs = 0): Promise<void> {
      closing = true;
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Warm connections go now: their entries see it at once and send nothing more here.
      for (const s of sockets) if (!relaying.has(s)) s.destroy();
      const deadline = Date.now() + drainMs;
      while (relaying.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

async function serveHop(s: net.Socket, o: HopServerOptions, onTunnel: () => void, onProved: () => void): Promise<void> {
  const nonce = randomBytes(18).toString('base64url');
  s.write(`${GREETING} ${nonce}\n`);
  const auth = await readLine(s, AUTH_TIMEOUT_MS);
  const expected = Buffer.from(hopProof(o.secret, nonce), 'latin1');
  const given = Buffer.from(auth?.startsWith('AUTH ') ? auth.slice(5) : '', 'latin1');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    o.onRefused?.();
    s.destroy();
    return;
  }
  onProved();
  s.write('OK\n');
  for (;;) {
    const line = await readLine(s, READY_IDLE_MS);
    if (line === null) return void s.destroy();
    if (line === 'PING') {
      s.write('PONG\n');
      continue;
    }
    const m = /^DIAL (\S+) (\d{1,5}) (\S+) (\d{1,4})$/.exec(line);
    if (!m) return void s.destroy();
    onTunnel();
    let session: { key: string; minutes: number } | null = null;
    try {
      session = m[3] === '-' ? null : { key: decodeURIComponent(m[3]!), minutes: Number(m[4]) };
    } catch {
      return void s.destroy(); // not an encoding an entry makes
    }
    let upstream: net.Socket | null = null;
    const out = await o.dialer.dial({
      host: m[1]!,
      port: Number(m[2]),
      session,
      wanted: () => !s.destroyed,
      connecting: (u) => (upstream = u),
    });
    if (out === null) return void (upstream as net.Socket | null)?.destroy();
    if (!out.ok) {
      // The answer, then the connection goes whole (a half-closed socket never read again would stay in
      // CLOSE_WAIT, one per failed dial).
      s.end(`ERR ${out.failure}\n`, () => s.destroy());
      return;
    }
    s.write(`OK ${out.socket.localAddress ?? '-'}\n`);
    // The gateway's own pump (splice.ts): no budget or metering here (the entry counts), the idle sweep alike.
    splice({ socket: s, upstream: null, budget: null, bytesUp: 0, bytesDown: 0, core: o.core }, out.socket, Buffer.alloc(0));
    return;
  }
}

// ---- the entry's side -----------------------------------------------------------------------------------


export interface HopLinkOptions {
  secret: Buffer;
  /** A ready connection was closed by the exit (it may have died): the directory probes it now. */
  onLost?: () => void;
  /** Authenticated connections kept ready at least (default 4); more while tunnels take them faster. */
  warm?: number;
  connectTimeoutMs?: number;
}

/**
 * An entry's connections to one exit: a few kept authenticated and ready, so a tunnel takes one, sends its
 * DIAL and waits for one line. A taken connection is the tunnel's (it is not given back).
 */
export class HopLink {
  private readonly idle: net.Socket[] = [];
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

  constructor(
    readonly hop: { host: string; port: number },
    private readonly o: HopLinkOptions,
  ) {
    this.minWarm = this.warm = o.warm ?? 4;
    this.timeoutMs = o.connectTimeoutMs ?? 2_000;
  }

  /** Opens connections until `warm` are ready (in the background). */
  fill(): void {
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

  /** A new authenticated connection, or null (refused, timed out, wrong secret). */
  open(): Promise<net.Socket | null> {
    return new Promise((resolve) => {
      let s: net.Socket;
      try {
        s = net.connect({ host: this.hop.host, port: this.hop.port, allowHalfOpen: true, noDelay: true, keepAlive: true });
      } catch {
        return resolve(null); // a registry row no socket can reach (a bad port): this exit never answers
      }
      s.on('error', destroySelf);
      const timer = setTimeout(() => s.destroy(), this.timeoutMs);
      s.once('connect', () => {
        void (async () => {
          const hello = await readLine(s, this.timeoutMs);
          const nonce = hello?.startsWith(`${GREETING} `) ? hello.slice(GREETING.length + 1) : null;
          if (nonce === null) return null;
          s.write(`AUTH ${hopProof(this.o.secret, nonce)}\n`);
          return (await readLine(s, this.timeoutMs)) === 'OK' ? s : null;
        })().then((ok) => {
          clearTimeout(timer);
          if (!ok) s.destroy();
          resolve(ok);
        });
      });
      s.once('close', () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
  }

  /** A ready connection (`warm`: taken from the ready ones, refilled behind it), else a new one. */
  private async take(): Promise<{ s: net.Socket; warm: boolean } | null> {
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
    for (let i = this.idle.length - 1; i >= 0; i--) {
      const s = this.idle[i]!;
      if ((readySince.get(s) ?? 0) < old) {
        this.idle.splice(i, 1);
        s.destroy();
      }
    }
    this.fill();
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
  private unpark(s: net.Socket | undefined): net.Socket | null {
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
    const got = await this.take();
    if (got === null) return 'retry';
    const out = await this.dialOn(got.s, req);
    if (out !== 'retry' || !got.warm || this.down) return out;
    // The ready connection failed before the exit answered (closed as it was taken): once more on a new one.
    const fresh = await this.open();
    return fresh === null ? 'retry' : this.dialOn(fresh, req);
  }

  private async dialOn(s: net.Socket, req: DialRequest): Promise<DialOutcome | 'retry'> {
    if (!req.wanted()) {
      s.destroy();
      return null;
    }
    if (this.down) {
      s.destroy();
      return 'retry';
    }
    req.connecting(s);
    const key = req.session ? encodeURIComponent(req.session.key) : '-';
    s.write(`DIAL ${req.host} ${req.port} ${key} ${req.session?.minutes ?? 0}\n`);
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
    return { ok: false, failure: (FAILURES.has(f) ? f : 'host_unreachable') as TargetFailure };
  }

  /** Whether the exit answers on an authenticated connection within `timeoutMs`. */
  async ping(timeoutMs = 1_000): Promise<boolean> {
    const s = this.unpark(this.idle.shift()) ?? (await this.open());
    if (!s) return false;
    s.write('PING\n');
    const ok = (await readLine(s, timeoutMs)) === 'PONG';
    if (ok) this.down = false;
    if (ok && !this.closed && this.idle.length < this.warm) this.keep(s);
    else s.destroy();
    return ok;
  }

  /**
   * Back among the ready ones, read while it waits: the exit closing it (it died, or restarted) is seen at
   * once, not when a tunnel writes its DIAL into it. Dropped from them when it closes.
   */
  private keep(s: net.Socket): void {
    if (s.destroyed || s.readableEnded) return void s.destroy();
    this.idle.push(s);
    readySince.set(s, Date.now());
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
