// The hop between entry and exit (SPEC 13) at the socket level: an exit's hop server with a real dialer, an
// entry's HopLink. A failed dial leaves no socket behind on the exit; a ready connection the exit closed as
// it was taken is replaced by a new one; a tunnel waiting on an exit that stopped answering goes elsewhere
// when the entry gives up on it; a wrong secret is refused.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DirectDialer } from '../../src/gateway/dialer.js';
import { HopLink, hopProof, startHopServer, type HopServer } from '../../src/gateway/hop.js';
import { Tunnels } from '../../src/gateway/open-tunnels.js';
import { sleep, waitFor } from '../helpers/wait.js';

const SECRET = Buffer.alloc(32, 7);
const dialer = new DirectDialer({ family: null, allowPrivateTargets: true, ownListeners: () => [], connectTimeoutMs: 2_000, countRefusal: () => {}, countEgress: () => {} });
const core = { tunnels: new Tunnels(60_000), limits: { idleTimeoutMs: 60_000 } };

/** A dial as the gateway asks it: wanted while its client is there (here: always), told each socket it tries. */
function request(host: string, port: number): Parameters<HopLink['dial']>[0] {
  return { host, port, session: null, wanted: () => true, connecting: () => {} };
}

async function refusedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('the hop', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  async function exit(): Promise<{ server: HopServer; link: HopLink }> {
    const server = await startHopServer({ listen: { host: '127.0.0.1', port: 0 }, secret: SECRET, dialer, core });
    const link = new HopLink(server.address(), { secret: SECRET, warm: 2 });
    cleanup.push(() => link.close(), () => server.close(0));
    return { server, link };
  }

  it('a failed dial leaves no socket behind on the exit, even when the entry keeps its end open', async () => {
    const { server, link } = await exit();
    const port = await refusedPort();
    for (let i = 0; i < 4; i++) expect(await link.dial(request('127.0.0.1', port))).toEqual({ ok: false, failure: 'refused' });
    // By hand, an entry that says nothing more after the ERR and keeps its socket open.
    const raw = net.connect({ port: server.address().port, host: '127.0.0.1', allowHalfOpen: true });
    raw.on('error', () => {});
    let said = '';
    raw.on('data', (d: Buffer) => {
      said += d.toString();
      const m = /^PROXYD-HOP\/1 (\S+)\n/.exec(said);
      if (m && !said.includes('OK\n')) raw.write(`AUTH ${hopProof(SECRET, m[1]!)}\n`);
      if (said.endsWith('OK\n')) raw.write(`DIAL 127.0.0.1 ${port} - 0\n`);
    });
    await waitFor('ERR', () => said.includes('ERR refused'), 5_000);
    link.close(); // the warm ones go too
    await waitFor('the exit holds nothing', () => server.open() === 0, 5_000);
    expect(raw.destroyed || raw.readableEnded).toBe(true);
    raw.destroy();
  });

  it('relays a tunnel after OK, bytes both ways', async () => {
    const { link } = await exit();
    const echo = net.createServer((c) => c.on('error', () => {}).pipe(c));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => echo.close());
    const out = await link.dial(request('127.0.0.1', (echo.address() as net.AddressInfo).port));
    if (out === null || out === 'retry' || !out.ok) throw new Error(`no tunnel: ${JSON.stringify(out)}`);
    const s = out.socket;
    const got = new Promise<string>((r) => s.once('data', (d: Buffer) => r(d.toString())));
    s.resume();
    s.write('ping through the hop');
    expect(await got).toBe('ping through the hop');
    s.destroy();
  });

  it('a wrong secret gets the greeting and nothing else', async () => {
    const { server } = await exit();
    const bad = new HopLink(server.address(), { secret: Buffer.alloc(32, 8) });
    cleanup.push(() => bad.close());
    expect(await bad.open()).toBeNull();
    expect(await bad.ping()).toBe(false);
    // By hand: a proof for another nonce is refused too.
    const s = net.connect(server.address().port, '127.0.0.1');
    const said: string[] = [];
    s.on('data', (d: Buffer) => said.push(d.toString()));
    await waitFor('greeting', () => said.length > 0, 2_000);
    s.write(`AUTH ${hopProof(SECRET, 'another-nonce')}\n`);
    await new Promise<void>((r) => s.on('close', () => r()));
    expect(said.join('')).toMatch(/^PROXYD-HOP\/1 \S+\n$/);
  });

  it('a ready connection the exit closed as it was taken is replaced by a new one', async () => {
    // An exit that answers its first connection's DIAL by closing it, and dials properly on the next ones.
    let n = 0;
    const fake = net.createServer((c) => {
      c.on('error', () => {});
      const nonce = `n${n}`;
      const mine = n++;
      c.write(`PROXYD-HOP/1 ${nonce}\n`);
      let buf = '';
      c.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes(`AUTH ${hopProof(SECRET, nonce)}\n`) && !buf.includes('DIAL')) {
          buf = buf.replace(/^AUTH [^\n]*\n/, '');
          c.write('OK\n');
        }
        if (buf.includes('DIAL')) {
          if (mine === 0) c.destroy();
          else c.write('OK 127.0.0.1\n');
        }
      });
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => fake.close());
    const link = new HopLink({ host: '127.0.0.1', port: (fake.address() as net.AddressInfo).port }, { secret: SECRET, warm: 1 });
    cleanup.push(() => link.close());
    link.fill();
    await sleep(200); // the first (doomed) connection is ready
    const out = await link.dial(request('127.0.0.1', 9));
    expect(out !== null && out !== 'retry' && out.ok).toBe(true);
    if (out && out !== 'retry' && out.ok) out.socket.destroy();
  });

  it('a tunnel waiting on an exit that stopped answering goes elsewhere when the entry gives up on it', async () => {
    // An exit that authenticates and then never answers a DIAL (a hung process).
    const fake = net.createServer((c) => {
      c.on('error', () => {});
      c.write('PROXYD-HOP/1 x\n');
      c.once('data', () => c.write('OK\n'));
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => fake.close());
    const link = new HopLink({ host: '127.0.0.1', port: (fake.address() as net.AddressInfo).port }, { secret: SECRET, warm: 3 });
    cleanup.push(() => link.close());
    link.fill();
    await sleep(300); // ready connections to it (authenticated: it answers that much)
    const pending = link.dial(request('127.0.0.1', 9));
    await sleep(300);
    const t0 = Date.now();
    link.abortWaiting(); // what the directory does when the exit fails its probes
    // Not tried again on another of its ready connections (that wait would have no end but the 30 s cap).
    expect(await pending).toBe('retry');
    expect(Date.now() - t0).toBeLessThan(1_000);
    // Nor by the next tunnel, until a probe answers.
    const t1 = Date.now();
    expect(await link.dial(request('127.0.0.1', 9))).toBe('retry');
    expect(Date.now() - t1).toBeLessThan(500);

    // An exit that leaves the registry (its heartbeat went stale first) releases its waiting tunnels too.
    const other = new HopLink({ host: '127.0.0.1', port: (fake.address() as net.AddressInfo).port }, { secret: SECRET, warm: 1 });
    const waiting = other.dial(request('127.0.0.1', 9));
    await sleep(300);
    const t2 = Date.now();
    other.close();
    expect(await waiting).toBe('retry');
    expect(Date.now() - t2).toBeLessThan(1_000);
  });
});
