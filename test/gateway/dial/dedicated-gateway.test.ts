// Dedicated addresses inside the gateway (in process, the daemon's real view over a real SQLite store): whitelist
// admission obeys them like credentials (an owner's whitelisted source leaves from its own addresses only, another
// account's never from them), a shared session whose address becomes reserved moves to a free one and stays there,
// a quarantine that ends puts its address back in the rotation without any write, and changing hands closes
// connections from the address.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionTable } from '../../../src/gateway/dial/sticky-sessions.js';
import { DedicatedView } from '../../../src/daemon/admission/dedicated.js';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { basic, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';
import { tempDir } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/wait.js';

const POOL = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.7'];

function once(socket: net.Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= n) {
        socket.off('data', onData);
        resolve(buf);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

describe('dedicated addresses in the gateway', () => {
  let g: TestGateway;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  let store: Store;
  let view: DedicatedView;
  let owner = 0;
  let other = 0;
  const clock = { t: Date.now() };

  beforeAll(async () => {
    echo = await startTcpEcho();
    store = await openStore({ dataDir: tempDir() });
    for (const who of ['owner', 'other']) {
      const a = await store.accounts.create(`${who}@example.com`, 'x', true);
      if (a === 'exists') throw new Error('exists');
      if (who === 'owner') owner = a.id;
      else other = a.id;
    }
    await store.egress.register('gw', POOL, { country: null, city: null });
    let gateway: TestGateway['gw'] | null = null;
    view = new DedicatedView(store, {
      node: 'gw',
      close: (m) => gateway?.closeEgressWhere(m) ?? 0,
      now: () => clock.t,
    });
    await view.refresh();
    g = await startTestGateway({
      egressPool: { addresses: POOL, sessions: new SessionTable(POOL.length) },
      dedicated: view,
    });
    gateway = g.gw;
    g.admission.users.set('alice', { password: 's3cret:pw', accountId: other });
    g.admission.whitelist.set('127.0.0.1', owner);
  });
  afterAll(async () => {
    await g.gw.close(0);
    echo.server.close();
    await store.close();
  });

  /** One SOCKS5 CONNECT without credentials (whitelist admission of 127.0.0.1): the peer the echo saw. */
  async function viaWhitelist(): Promise<string> {
    const s = net.connect(g.socksPort, '127.0.0.1');
    s.write(Buffer.from([5, 1, 0]));
    expect([...(await once(s, 2))]).toEqual([5, 0]);
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, echo.port >> 8, echo.port & 255]));
    expect((await once(s, 10))[1]).toBe(0);
    s.destroy();
    return echo.peers.at(-1)!;
  }

  /** One CONNECT as `user`: the peer the echo saw, and the socket (open). */
  async function viaUser(user: string): Promise<{ from: string; socket: net.Socket }> {
    const s = net.connect(g.httpPort, '127.0.0.1');
    s.on('error', () => {});
    s.write(
      `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic(user, 's3cret:pw')}\r\n\r\n`,
    );
    expect((await once(s, 12)).toString('latin1')).toMatch(/^HTTP\/1\.1 200/);
    s.write('x');
    await once(s, 1);
    return { from: echo.peers.at(-1)!, socket: s };
  }

  it('whitelist admission: the owner leaves from its own addresses only, another account never from them', async () => {
    await store.egress.assign(owner, 'gw', ['127.0.0.2', '127.0.0.3']);
    await view.refresh();
    const mine = new Set<string>();
    for (let i = 0; i < 12; i++) mine.add(await viaWhitelist());
    expect(mine).toEqual(new Set(['127.0.0.2', '127.0.0.3']));
    const theirs = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const c = await viaUser('alice');
      c.socket.destroy();
      theirs.add(c.from);
    }
    expect(theirs).toEqual(new Set(['127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.7']));
  });

  it('a shared session whose address becomes reserved moves to a free one and stays there; its open tunnel is closed', async () => {
    // Sessions until one holds 127.0.0.4 (the table gives each new session the least-used address).
    let key = '';
    let open: net.Socket | null = null;
    for (let i = 0; i < 8 && !key; i++) {
      const c = await viaUser(`alice-session-s${i}`);
      if (c.from === '127.0.0.4') [key, open] = [`alice-session-s${i}`, c.socket];
      else c.socket.destroy();
    }
    expect(key).not.toBe('');
    const closed = new Promise<void>((r) => open!.once('close', () => r()));
    await store.egress.assign(owner, 'gw', ['127.0.0.4']);
    await view.refresh();
    await closed; // it left from an address that is now another account's
    const again = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const c = await viaUser(key);
      c.socket.destroy();
      again.add(c.from);
    }
    expect(again.size).toBe(1);
    expect(['127.0.0.5', '127.0.0.6', '127.0.0.7']).toContain([...again][0]);
  });

  it('a quarantine that ends puts the address back in the rotation, with no write to the database', async () => {
    const until = Math.floor(clock.t / 1000) + 60;
    await store.egress.release(['127.0.0.4'], until);
    await view.refresh();
    const during = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const c = await viaUser('alice');
      c.socket.destroy();
      during.add(c.from);
    }
    expect(during.has('127.0.0.4')).toBe(false);
    const v = await store.egress.version();
    clock.t += 61_000;
    const after = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const c = await viaUser('alice');
      c.socket.destroy();
      after.add(c.from);
    }
    expect(after.has('127.0.0.4')).toBe(true);
    expect(await store.egress.version()).toBe(v);
  });

  it("the whitelisted owner's open tunnel from a released address is closed; then it holds the rest", async () => {
    const s = net.connect(g.socksPort, '127.0.0.1');
    s.on('error', () => {});
    s.write(Buffer.from([5, 1, 0]));
    await once(s, 2);
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, echo.port >> 8, echo.port & 255]));
    expect((await once(s, 10))[1]).toBe(0);
    const from = echo.peers.at(-1)!;
    const closed = new Promise<void>((r) => s.once('close', () => r()));
    await store.egress.release([from], null);
    await view.refresh();
    await closed;
    await waitFor('the rest serve it', async () => (await viaWhitelist()) !== from, 2_000);
  });
});
