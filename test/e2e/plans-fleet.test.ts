// Plans enforced across a fleet (SPEC 11): three proxyd nodes on one PostgreSQL.
//
// - A traffic limit with all three nodes streaming at once stops within the overshoot bound (at most 4 MiB
//   per node past the limit, counted at the target: the bytes that actually got through), idle tunnels of the
//   account on every node are closed within 2 s, new ones get 403 `traffic_limit` everywhere, and a raised
//   limit admits again within 1 s. The same for a proxy user's own limit and for an expired plan.
// - A connection cap holds fleet-wide: 30 tunnels asked for at once through three nodes, at most
//   `max + nodes − 1` open (the leases give at most `max`); a slot freed on one node serves another.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { probe } from './fleet-probe.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
const MiB = 2 ** 20;
const NODES = 3;
const OVERSHOOT_PER_NODE = 4 * MiB;
const PASSWORD = 'fleet-plan-password-1';
const EMAIL = 'fleet-plan@example.com';

/** A target that reads and discards, counting what reached it per proxy user (the first line names it). */
class Sink {
  readonly server: net.Server;
  readonly bytes = new Map<string, number>();
  /** When each user's bytes first reached a mark (performance.now()). */
  readonly reached = new Map<string, number>();
  marks = new Map<string, number>();

  constructor() {
    this.server = net.createServer((s) => {
      s.on('error', () => {});
      let who: string | null = null;
      let head = '';
      s.on('data', (d: Buffer) => {
        if (who === null) {
          head += d.toString('latin1');
          const nl = head.indexOf('\n');
          if (nl < 0) return;
          who = head.slice(0, nl);
          this.add(who, Buffer.byteLength(head.slice(nl + 1), 'latin1'));
          return;
        }
        this.add(who, d.length);
      });
    });
  }

  private add(who: string, n: number): void {
    const total = (this.bytes.get(who) ?? 0) + n;
    this.bytes.set(who, total);
    const mark = this.marks.get(who);
    if (mark !== undefined && total >= mark && !this.reached.has(who)) this.reached.set(who, performance.now());
  }

  listen(): Promise<void> {
    return new Promise((r) => this.server.listen(0, '127.0.0.1', () => r()));
  }

  get addr(): string {
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }
}

/** A tunnel through a node with credentials; resolves once the `200` came (null: refused, with the status). */
function openTunnel(
  node: Daemon,
  target: string,
  user: string,
): Promise<{ socket: net.Socket; closedAt: Promise<number> } | { status: number }> {
  const [host, port] = node.httpProxy.split(':') as [string, string];
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    s.setTimeout(10_000, () => s.destroy());
    s.on('error', () => {});
    const closedAt = new Promise<number>((r) => s.on('close', () => r(performance.now())));
    s.on('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    const onData = (d: Buffer) => {
      buf += d.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      s.removeListener('data', onData);
      const status = Number(buf.slice(9, 12));
      if (status !== 200) {
        s.destroy();
        resolve({ status });
        return;
      }
      s.setTimeout(0);
      s.on('data', () => {});
      s.write(`${user}\n`);
      resolve({ socket: s, closedAt });
    };
    s.on('data', onData);
    s.on('close', () => resolve({ status: 0 }));
  });
}

/** Writes as fast as the tunnel takes until the proxy closes it (or `maxMs`). */
async function stream(s: net.Socket, maxMs: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 7);
  const until = performance.now() + maxMs;
  while (!s.destroyed && performance.now() < until) {
    if (!s.write(chunk)) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, 200);
        const done = () => {
          clearTimeout(t);
          s.removeListener('drain', done);
          s.removeListener('close', done);
          r();
        };
        s.once('drain', done);
        s.once('close', done);
      });
    }
  }
  s.destroy();
}

describe.skipIf(skip !== null)(`plans across three nodes on PostgreSQL${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let pg: PgCluster;
  const nodes: Daemon[] = [];
  const sink = new Sink();
  let first: string;

  const plan = async (...args: string[]) => {
    const r = await admin(first, ['plan', 'set', '--email', EMAIL, ...args]);
    expect(r.code, r.stderr).toBe(0);
  };

  /** From `t0`, the ms until every node answers `user`'s CONNECT with `status`. */
  async function everyNode(user: string, status: number, t0 = performance.now(), limitMs = 5_000): Promise<number> {
    const times = await Promise.all(
      nodes.map(async (n) => {
        for (;;) {
          if ((await probe(n.httpProxy, sink.addr, { user, password: PASSWORD })) === status)
            return performance.now() - t0;
          if (performance.now() - t0 > limitMs)
            throw new Error(`${n.httpProxy}: ${user} not ${status} within ${limitMs} ms`);
          await sleep(20);
        }
      }),
    );
    return Math.max(...times);
  }

  /**
   * Three nodes stream for `user` at once (one tunnel each) while one idle tunnel per node waits; returns what
   * reached the target and how long after the limit was crossed the last idle tunnel was closed.
   */
  async function runToLimit(user: string, limit: number): Promise<{ delivered: number; idleClosedMs: number }> {
    const idle = await Promise.all(nodes.map((n) => openTunnel(n, sink.addr, user)));
    const streams = await Promise.all(nodes.map((n) => openTunnel(n, sink.addr, user)));
    for (const t of [...idle, ...streams]) expect('socket' in t, JSON.stringify(t)).toBe(true);
    sink.marks.set(user, limit);
    await Promise.all(streams.map((t) => stream((t as { socket: net.Socket }).socket, 30_000)));
    const closed = await Promise.all(idle.map((t) => (t as { closedAt: Promise<number> }).closedAt));
    await sleep(300); // the last bytes in flight reach the sink
    const crossed = sink.reached.get(user);
    expect(crossed, 'the limit was reached at the target').toBeDefined();
    return { delivered: sink.bytes.get(user) ?? 0, idleClosedMs: Math.max(...closed) - crossed! };
  }

  beforeAll(async () => {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    first = await dataDirFor('postgres', pg.url);
    await makeAccount(first, EMAIL);
    for (const u of ['alpha', 'beta', 'gamma', 'delta']) {
      const r = await admin(
        first,
        ['proxy-user', 'create', '--email', EMAIL, '--username', u, '--password-stdin'],
        `${PASSWORD}\n`,
      );
      expect(r.code, r.stderr).toBe(0);
    }
    await sink.listen();
    const args = ['--allow-private-targets'];
    nodes.push(await startDaemon({ dataDir: first, args }));
    for (let i = 1; i < NODES; i++)
      nodes.push(
        await startDaemon({
          dataDir: await dataDirFor('sqlite'),
          args: [...args, '--database-url', nodes[0]!.databaseUrl!],
        }),
      );
    await everyNode('alpha', 200, performance.now(), 15_000);
  }, patient(120_000));

  afterAll(async () => {
    for (const n of nodes) await n.stop();
    sink.server.close();
    pg?.destroy();
  });

  it(
    'an account traffic limit: three nodes streaming stop within 4 MiB per node, idle tunnels closed within 2 s, 403, raised → admitted within 1 s',
    async () => {
      const limit = 24 * MiB;
      await plan('--traffic-limit', String(limit), '--period', 'month');
      await sleep(700);
      const r = await runToLimit('alpha', limit);
      if (process.env.PROXYD_TEST_PRINT)
        console.log(
          JSON.stringify({
            what: 'account limit',
            limit,
            delivered: r.delivered,
            over: r.delivered - limit,
            idleClosedMs: Math.round(r.idleClosedMs),
          }),
        );
      expect(r.delivered).toBeGreaterThanOrEqual(limit - 64 * 1024);
      expect(r.delivered).toBeLessThanOrEqual(limit + NODES * OVERSHOOT_PER_NODE);
      expect(r.idleClosedMs).toBeLessThan(2_000);
      await everyNode('beta', 403, performance.now(), 1_000); // the whole account: every user
      await plan('--traffic-limit', '1GiB'); // committed when the command returns
      expect(await everyNode('alpha', 200, performance.now(), 3_000)).toBeLessThan(1_250); // 1 s, and a probe's own time
      await plan('--traffic-limit', 'none');
    },
    patient(90_000),
  );

  it(
    "a proxy user's own limit: that user stops within the bound on three nodes, the others go on",
    async () => {
      const limit = 8 * MiB;
      const set = await admin(first, [
        'proxy-user',
        'set',
        '--email',
        EMAIL,
        '--username',
        'gamma',
        '--traffic-limit',
        String(limit),
      ]);
      expect(set.code, set.stderr).toBe(0);
      await sleep(700);
      const r = await runToLimit('gamma', limit);
      if (process.env.PROXYD_TEST_PRINT)
        console.log(
          JSON.stringify({
            what: 'user limit',
            limit,
            delivered: r.delivered,
            over: r.delivered - limit,
            idleClosedMs: Math.round(r.idleClosedMs),
          }),
        );
      expect(r.delivered).toBeLessThanOrEqual(limit + NODES * OVERSHOOT_PER_NODE);
      expect(r.idleClosedMs).toBeLessThan(2_000);
      await everyNode('gamma', 403, performance.now(), 1_000);
      await everyNode('beta', 200, performance.now(), 1_000);
      await admin(first, ['proxy-user', 'set', '--email', EMAIL, '--username', 'gamma', '--traffic-limit', 'none']);
      expect(await everyNode('gamma', 200, performance.now(), 3_000)).toBeLessThan(1_250);
    },
    patient(90_000),
  );

  it(
    'an expired plan: idle tunnels closed within 2 s on every node, 403 everywhere; renewed → admitted within 1 s',
    async () => {
      const idle = await Promise.all(nodes.map((n) => openTunnel(n, sink.addr, 'delta')));
      for (const t of idle) expect('socket' in t).toBe(true);
      const t0 = performance.now();
      await plan('--expires', new Date(Date.now() - 1000).toISOString());
      const closed = await Promise.all(idle.map((t) => (t as { closedAt: Promise<number> }).closedAt));
      expect(Math.max(...closed) - t0).toBeLessThan(2_500); // the command's own start-up included
      await everyNode('delta', 403, performance.now(), 1_000);
      await plan('--expires', 'never');
      expect(await everyNode('delta', 200, performance.now(), 3_000)).toBeLessThan(1_250);
    },
    patient(60_000),
  );

  it(
    'a connection cap holds fleet-wide: 30 at once through three nodes, at most max + nodes − 1 open; 429 for the rest',
    async () => {
      const max = 5;
      await plan('--max-connections', String(max));
      await sleep(700);
      const asks = await Promise.all(
        nodes.flatMap((n) => Array.from({ length: 10 }, () => openTunnel(n, sink.addr, 'beta'))),
      );
      const open = asks.filter((a): a is { socket: net.Socket; closedAt: Promise<number> } => 'socket' in a);
      const statuses = asks.filter((a): a is { status: number } => 'status' in a).map((a) => a.status);
      if (process.env.PROXYD_TEST_PRINT)
        console.log(JSON.stringify({ what: 'connection cap', max, open: open.length }));
      expect(open.length).toBeLessThanOrEqual(max + NODES - 1);
      expect(open.length).toBe(max); // the leases give exactly the cap: no node keeps a slot another needs
      expect(
        statuses.every((s) => s === 429),
        JSON.stringify(statuses),
      ).toBe(true);
      // Freed slots serve any node: close them all, then every node admits again (within the lease renewal).
      for (const o of open) o.socket.destroy();
      await everyNode('beta', 200, performance.now(), 3_000);
      // One held open on each node: the fleet counts them all.
      const held = await Promise.all(nodes.map((n) => openTunnel(n, sink.addr, 'beta')));
      const more = await Promise.all([0, 1].map(() => openTunnel(nodes[0]!, sink.addr, 'beta')));
      const more2 = await Promise.all([0, 1, 2].map(() => openTunnel(nodes[1]!, sink.addr, 'beta')));
      const all = [...held, ...more, ...more2];
      const nOpen = all.filter((a) => 'socket' in a).length;
      expect(nOpen).toBeLessThanOrEqual(max + NODES - 1);
      for (const a of all) if ('socket' in a) a.socket.destroy();
      await plan('--max-connections', 'none');
      for (const n of nodes) expect(n.proc.exitCode, n.logs.slice(-20).join('\n')).toBeNull();
    },
    patient(60_000),
  );
});
