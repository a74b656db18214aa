// An entry's exit directory on real TLS hop servers and a registry in memory: selection by targeting, sessions
// by rendezvous hashing (the same from every entry; when an exit goes, only its sessions move, and the move is
// said once), health from probes (an exit that stops answering leaves selection at once and comes back), an
// exit gone from the registry leaves.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DirectDialer } from '../../../src/gateway/dial/dialer.js';
import { ExitDirectory, type ExitRow } from '../../../src/gateway/hop/directory.js';
import { rendezvousScore } from '../../../src/rules/rendezvous.js';
import { makeHopIdentity } from '../../../src/gateway/hop/identity.js';
import { startHopServer, type HopServer } from '../../../src/gateway/hop/server.js';
import { Tunnels } from '../../../src/gateway/relay/open-tunnels.js';
import { sleep, waitFor } from '../../helpers/wait.js';
import { patient } from '../../helpers/patience.js';

const SECRET = Buffer.alloc(32, 5);
const ID = makeHopIdentity(86_400_000);
const dialer = new DirectDialer({
  family: null,
  allowPrivateTargets: true,
  ownListeners: () => [],
  connectTimeoutMs: 2_000,
  countRefusal: () => {},
  countEgress: () => {},
});
const core = { tunnels: new Tunnels(60_000), limits: { idleTimeoutMs: 60_000 } };

describe('the exit directory', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function exits(
    specs: Array<[string, string, string | null]>,
  ): Promise<{ rows: ExitRow[]; servers: Map<string, HopServer> }> {
    const servers = new Map<string, HopServer>();
    const rows: ExitRow[] = [];
    for (const [node, country, city] of specs) {
      const s = await startHopServer({
        listen: { host: '127.0.0.1', port: 0 },
        identity: ID,
        secrets: () => [SECRET],
        dialer,
        core,
      });
      cleanup.push(() => s.close(0));
      servers.set(node, s);
      rows.push({
        node,
        hop: `127.0.0.1:${s.address().port}`,
        country,
        city,
        fingerprints: [ID.fingerprint],
        ageMs: 0,
      });
    }
    return { rows, servers };
  }

  async function directory(rows: () => ExitRow[]): Promise<ExitDirectory> {
    const d = new ExitDirectory({ list: async () => rows() }, { secrets: () => [SECRET], warm: 1 });
    cleanup.push(() => d.stop());
    await d.start();
    return d;
  }

  const names = (d: ExitDirectory, want: { country: string | null; city: string | null } | null) =>
    d
      .candidates(want)
      .map((e) => e.row.node)
      .sort();

  it('targeting: country, city, both, none', async () => {
    const { rows } = await exits([
      ['us-nyc', 'us', 'nyc'],
      ['us-la', 'us', 'la'],
      ['de', 'de', null],
    ]);
    const d = await directory(() => rows);
    expect(names(d, null)).toEqual(['de', 'us-la', 'us-nyc']);
    expect(names(d, { country: 'us', city: null })).toEqual(['us-la', 'us-nyc']);
    expect(names(d, { country: 'us', city: 'la' })).toEqual(['us-la']);
    expect(names(d, { country: null, city: 'nyc' })).toEqual(['us-nyc']);
    expect(names(d, { country: 'fr', city: null })).toEqual([]);
    expect(d.pick({ country: 'fr', city: null }, null, new Set())).toBeNull();
  });

  it('sessions: the same exit from every entry, spread over the exits; when one goes only its sessions move, said once', async () => {
    const { rows } = await exits([
      ['a', 'us', null],
      ['b', 'us', null],
      ['c', 'us', null],
    ]);
    let listed = rows;
    const one = await directory(() => listed);
    const two = await directory(() => listed);
    const before = new Map<string, string>();
    for (let i = 0; i < 300; i++) {
      const key = `7\0alice\0s${i}`;
      const x = one.pick(null, key, new Set())!.row.node;
      expect(two.pick(null, key, new Set())!.row.node).toBe(x);
      before.set(key, x);
    }
    const counts = ['a', 'b', 'c'].map((n) => [...before.values()].filter((v) => v === n).length);
    for (const c of counts) expect(c).toBeGreaterThan(60); // about 100 each
    // The registry drops b: it leaves both directories at their next read.
    listed = rows.filter((r) => r.node !== 'b');
    await waitFor('b left', () => !names(one, null).includes('b') && !names(two, null).includes('b'), 3_000);
    for (const [key, was] of before) {
      const now = one.pick(null, key, new Set())!.row.node;
      if (was !== 'b') expect(now).toBe(was);
      else expect(['a', 'c']).toContain(now);
    }
    // The move is said for a placed session, once.
    const key = [...before].find(([, v]) => v === 'b')![0];
    expect(one.notePlacement(key, 'b', 10)).toBeNull();
    const to = one.pick(null, key, new Set())!.row.node;
    expect(one.notePlacement(key, to, 10)).toBe('b');
    expect(one.notePlacement(key, to, 10)).toBeNull();
    // The score is a pure function of (key, exit): what makes every entry agree.
    expect(rendezvousScore('k', 'a')).toBe(rendezvousScore('k', 'a'));
    expect(rendezvousScore('k', 'a')).not.toBe(rendezvousScore('k', 'b'));
  });

  it('health: an exit that stops answering leaves selection within a second; back when it answers again', async () => {
    const { rows, servers } = await exits([
      ['a', 'us', null],
      ['b', 'us', null],
    ]);
    let listed = rows;
    const d = await directory(() => listed);
    expect(names(d, null)).toEqual(['a', 'b']);
    const t0 = Date.now();
    await servers.get('b')!.close(0); // its warm connections close: the directory probes it at once
    await waitFor('b out of selection', () => !names(d, null).includes('b'), 3_000);
    expect(Date.now() - t0).toBeLessThan(patient(1_500));
    for (let i = 0; i < 20; i++) expect(d.pick(null, null, new Set())!.row.node).toBe('a');
    expect(d.pick(null, null, new Set(['a']))).toBeNull(); // `avoid`: the exits that just failed this connection
    // b comes back (a new listener: a restarted exit registers its new address).
    const again = await startHopServer({
      listen: { host: '127.0.0.1', port: 0 },
      identity: ID,
      secrets: () => [SECRET],
      dialer,
      core,
    });
    cleanup.push(() => again.close(0));
    listed = rows.map((r) => (r.node === 'b' ? { ...r, hop: `127.0.0.1:${again.address().port}` } : r));
    await waitFor('b back', () => names(d, null).includes('b'), 3_000);
    await sleep(10);
    expect(d.view().map((e) => [e.node, e.healthy])).toEqual([
      ['a', true],
      ['b', true],
    ]);
  });

  it('the database away and back: exits that still answer stay while their heartbeats catch up; one that does not come back leaves', async () => {
    const { rows } = await exits([
      ['a', 'us', null],
      ['b', 'us', null],
    ]);
    let registry: 'up' | 'away' | 'stale' = 'up';
    const d = await directory(() => {
      if (registry === 'away') throw new Error('connect ECONNREFUSED');
      // Back, but no exit has heartbeated since: every row is older than the window (b never comes back).
      if (registry === 'stale') return [];
      return rows;
    });
    expect(names(d, null)).toEqual(['a', 'b']);
    registry = 'away';
    await sleep(3_200); // longer than a heartbeat's window: each row is stale when the database answers again
    expect(names(d, null)).toEqual(['a', 'b']); // the last view, while it is away
    registry = 'stale';
    const back = Date.now();
    let dropped: number | null = null;
    while (Date.now() - back < 1_500) {
      if (names(d, null).length < 2) dropped ??= Date.now() - back;
      await sleep(20);
    }
    expect(dropped).toBeNull(); // no "no exit" while the exits' heartbeats land again
    registry = 'up';
    await sleep(1_500);
    expect(names(d, null)).toEqual(['a', 'b']);
    // Away again; when it is back only a heartbeats: b leaves once a has had time to, not at the first read.
    registry = 'away';
    await sleep(3_200);
    rows.splice(
      rows.findIndex((r) => r.node === 'b'),
      1,
    );
    registry = 'up';
    const t0 = Date.now();
    await waitFor('b left', () => !names(d, null).includes('b'), 5_000);
    expect(Date.now() - t0).toBeGreaterThan(1_500);
    expect(names(d, null)).toEqual(['a']);
  });

  it('an exit that has never answered is never a candidate, not even between its first failed probe and its second', async () => {
    const { rows } = await exits([['a', 'us', null]]);
    // Something that accepts and never says a word: each probe fails only at its deadline.
    const silent = net.createServer((c) => c.on('error', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => silent.close());
    let listed = rows;
    const d = await directory(() => listed);
    // It registers once the entry runs (a new exit joins): the read probes it.
    listed = [
      ...rows,
      {
        node: 'silent',
        hop: `127.0.0.1:${(silent.address() as net.AddressInfo).port}`,
        country: 'us',
        city: null,
        fingerprints: [ID.fingerprint],
        ageMs: 0,
      },
    ];
    const t0 = Date.now();
    const seen = new Set<string>();
    while (Date.now() - t0 < 5_000) {
      for (const n of names(d, null)) seen.add(n);
      await sleep(5);
    }
    expect([...seen]).toEqual(['a']);
  });
});
