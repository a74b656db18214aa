// The fleet on PostgreSQL (docs/operations.md, Fleet): three `proxyd serve` processes, each with its own ports and
// data dir, on one PostgreSQL database (a throwaway cluster of this file's own, so stopping it disturbs no
// other file) and one spawned redis-server. A change made through node 1 reaches the other gateways within
// 1 s; ownership and limits hold across nodes; the gateways ride out a PostgreSQL outage for the stale
// window and catch up by themselves, a node frozen meanwhile included; a node killed mid-batch loses nothing
// committed. Propagation is measured (p50/p99 in a log line); only generous bounds are asserted.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADD,
  admin,
  databaseUrlOf,
  dataDirFor,
  DEL,
  inspectData,
  LIST,
  makeAccount,
  startDaemon,
  tempDir,
  type Daemon,
} from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { api, pub, startRedis, type RedisServer } from '../ops/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { ConsoleClient } from '../console/client.js';
import { tcpEcho } from '../helpers/net.js';
import { percentile, probe as probeVia, report as reportAs, until } from './fleet-probe.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
const STALE_SEC = 4;
// Lists limited to 30 per token per window: the exactness check below; the rest out of the way.
const GW = [
  '--allow-private-targets',
  '--proxy-protocol-from',
  '127.0.0.1/32',
  '--stale-admission',
  String(STALE_SEC),
  '--rate-limits',
  'list=30,add=100000,delete=100000,invalid=100000',
];

let pg: PgCluster;
let redis: RedisServer;
let echo: net.Server;
let target: string;
let nodes: Daemon[] = [];
/** node 1's data dir: `proxyd admin` runs against the same database through it. */
let adminDir: string;

/** One CONNECT through a node's HTTP gateway to the echo target. */
const probe = (gateway: string, as: Parameters<typeof probeVia>[2]) => probeVia(gateway, target, as);
/**
 * Every source IP admitted by the gateway, probed 32 at a time: all at once, hundreds of one account's
 * connections could overlap past its connection cap (256) on a loaded machine and be refused for that.
 */
async function admitsAll(gateway: string, ips: Iterable<string>): Promise<boolean> {
  const list = [...ips];
  for (let i = 0; i < list.length; i += 32) {
    const codes = await Promise.all(list.slice(i, i + 32).map((ip) => probe(gateway, { source: ip })));
    if (!codes.every((c) => c === 200)) return false;
  }
  return true;
}
const report = (what: string, ms: number[]) => reportAs(what, ms, { backend: 'postgres' });

/** SOCKS5 username/password sub-negotiation: the status byte (0x00 admitted, 0x01 refused), or -1 when none came. */
function socksAuth(gateway: string, user: string, password: string): Promise<number> {
  const [host, port] = gateway.split(':') as [string, string];
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host);
    let buf = Buffer.alloc(0);
    const done = (v: number) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(5000, () => done(-1));
    s.on('error', () => done(-1));
    s.on('close', () => done(-1));
    s.on('connect', () => s.write(Buffer.from([5, 1, 2])));
    s.on('data', (d) => {
      const first = buf.length < 2;
      buf = Buffer.concat([buf, d]);
      if (first && buf.length >= 2) {
        if (buf[1] !== 2) return done(-1);
        s.write(
          Buffer.concat([
            Buffer.from([1, user.length]),
            Buffer.from(user),
            Buffer.from([password.length]),
            Buffer.from(password),
          ]),
        );
      }
      if (buf.length >= 4) done(buf[3]!);
    });
  });
}

/** An API call that reports a dead node as status 0 rather than throwing. */
async function call(base: string, path: string, token: string, body?: unknown) {
  return api(base, path, token, body).catch(() => ({ status: 0, json: { code: 0 } as any, ms: 0 }));
}

const metric = async (d: Daemon, name: string): Promise<number> => {
  const text = await (await fetch(`${d.api}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
};

const others = () => nodes.slice(1);
/** The error with each node's last log lines, naming any node that is no longer running (it must not crash). */
const fail = (e: unknown, ...ds: Daemon[]) => {
  const dead = ds
    .map((d, i) =>
      d.proc.exitCode !== null || d.proc.signalCode !== null
        ? `node ${i + 1} exited (${d.proc.exitCode ?? d.proc.signalCode}); `
        : '',
    )
    .join('');
  return new Error(`${dead}${(e as Error).message}\n${ds.map((d) => d.logs.slice(-15).join('\n')).join('\n---\n')}`);
};

describe.skipIf(skip !== null)(
  `three proxyd nodes on one PostgreSQL and one Redis${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let tokA: string;
    let tokB: string;
    let tokC: string;
    let tokK: string;

    beforeAll(async () => {
      // One after the other: two free-port look-ups at once can name the same port.
      redis = await startRedis();
      pg = await startPostgres();
      echo = await tcpEcho();
      target = `127.0.0.1:${(echo.address() as net.AddressInfo).port}`;
      await makeTemplate(pg.url);
      adminDir = await dataDirFor('postgres', pg.url);
      const url = databaseUrlOf(adminDir)!;
      const shared = [...GW, '--redis-url', redis.url];
      // Node 1 first (it migrates nothing: the database is a copy of the migrated template), then 2 and 3.
      nodes = [await startDaemon({ dataDir: adminDir, args: shared })];
      nodes.push(
        ...(await Promise.all(
          [1, 2].map(() => startDaemon({ dataDir: tempDir(), args: [...shared, '--database-url', url] })),
        )),
      );
      const toks = await Promise.all(
        ['a@example.com', 'b@example.com', 'c@example.com', 'k@example.com'].map(
          async (e) => (await makeAccount(adminDir, e)).token,
        ),
      );
      [tokA, tokB, tokC, tokK] = toks as [string, string, string, string];
    }, patient(120_000));

    afterAll(async () => {
      for (const d of nodes) d.proc.kill('SIGCONT');
      await Promise.all(nodes.map((d) => d.stop()));
      await redis?.kill();
      pg?.destroy();
      echo?.close();
    });

    it(
      'an API add/delete through node 1 admits/refuses on nodes 2 and 3 within 1 s (200 changes)',
      async () => {
        const ip = '8.8.4.4';
        const ms: number[] = [];
        for (let i = 0; i < 200; i++) {
          const adding = i % 2 === 0;
          const t0 = performance.now();
          const r = await api(nodes[0]!.api, adding ? ADD : DEL, tokA, adding ? { items: [{ ip }] } : { ips: [ip] });
          expect(r.json.code).toBe(200);
          const want = adding ? 200 : 407;
          ms.push(
            ...(await Promise.all(
              others().map((n) => until(t0, async () => (await probe(n.httpProxy, { source: ip })) === want)),
            )),
          );
        }
        report('api add/delete on node 1 -> gateways of nodes 2 and 3', ms);
        expect(Math.max(...ms)).toBeLessThan(patient(3000));
        expect(percentile(ms, 50)).toBeLessThan(patient(1000));
      },
      patient(120_000),
    );

    it(
      'proxyd admin changes (proxy user, account status, token reset) apply on every node',
      async () => {
        const ms: number[] = [];
        const everywhere = (check: (n: Daemon) => Promise<boolean>) =>
          Promise.all(nodes.map((n) => until(performance.now(), () => check(n))));
        const created = await admin(adminDir, [
          'proxy-user',
          'create',
          '--email',
          'a@example.com',
          '--username',
          'fleetuser',
        ]);
        expect(created.code, created.stderr).toBe(0);
        const cred = { user: 'fleetuser', password: created.json.password as string };
        ms.push(
          ...(await everywhere(
            async (n) =>
              (await probe(n.httpProxy, cred)) === 200 && (await socksAuth(n.socks, cred.user, cred.password)) === 0,
          )),
        );
        for (const [status, want] of [
          ['suspended', 407],
          ['active', 200],
        ] as const) {
          const r = await admin(adminDir, ['account', 'set', '--email', 'a@example.com', '--status', status]);
          expect(r.code, r.stderr).toBe(0);
          ms.push(...(await everywhere(async (n) => (await probe(n.httpProxy, cred)) === want)));
        }
        report('proxyd admin -> gateways of nodes 1..3', ms);
        expect(Math.max(...ms)).toBeLessThan(patient(3000));
        // A token reset: the old token is refused and the new one accepted on every node's API (read from the database).
        const reset = await admin(adminDir, ['token', 'reset', '--email', 'a@example.com']);
        expect(reset.code, reset.stderr).toBe(0);
        for (const n of nodes) {
          expect((await api(n.api, LIST, tokA)).status).toBe(401);
          expect((await api(n.api, LIST, reset.json.token)).status).toBe(200);
        }
        tokA = reset.json.token;
      },
      patient(60_000),
    );

    it(
      'a console add / disable / delete through node 1 admits/refuses on nodes 2 and 3',
      async () => {
        const c = new ConsoleClient(nodes[0]!.api);
        expect((await c.login('a@example.com', 'correct horse battery')).location).toMatch(/^\/console/);
        await c.get('/console/whitelist');
        const ip = '8.8.5.5';
        const ms: number[] = [];
        for (const [path, form, want] of [
          ['/console/whitelist/add', { ip, remark: '' }, 200],
          ['/console/whitelist/status', { ip, status: 'disabled' }, 407],
          ['/console/whitelist/status', { ip, status: 'active' }, 200],
          ['/console/whitelist/delete', { ip }, 407],
        ] as const) {
          const t0 = performance.now();
          expect((await c.post(path, form)).status).toBe(303);
          ms.push(
            ...(await Promise.all(
              others().map((n) => until(t0, async () => (await probe(n.httpProxy, { source: ip })) === want)),
            )),
          );
        }
        report('console on node 1 -> gateways of nodes 2 and 3', ms);
        expect(Math.max(...ms)).toBeLessThan(patient(3000));
      },
      patient(30_000),
    );

    it(
      'two nodes racing for the same 200 IPs: one winner each, seen by the third',
      async () => {
        const ips = Array.from({ length: 200 }, (_, i) => pub(2000 + i));
        const batches = (tok: string, node: Daemon) =>
          Array.from({ length: 20 }, (_, b) =>
            api(node.api, ADD, tok, { items: ips.slice(b * 10, b * 10 + 10).map((ip) => ({ ip })) }),
          );
        const [byB, byC] = await Promise.all([
          Promise.all(batches(tokB, nodes[0]!)),
          Promise.all(batches(tokC, nodes[1]!)),
        ]);
        const won = (rs: typeof byB, b: number) => {
          const r = rs[b]!;
          expect([200, 10431]).toContain(r.json.code);
          const failed = new Set<string>((r.json.data?.failed_items ?? []).map((f: { ip: string }) => f.ip));
          return ips.slice(b * 10, b * 10 + 10).filter((ip) => !failed.has(ip));
        };
        const winB = new Set(byB.flatMap((_, b) => won(byB, b)));
        const winC = new Set(byC.flatMap((_, b) => won(byC, b)));
        expect([...winB].filter((ip) => winC.has(ip))).toEqual([]);
        expect(winB.size + winC.size).toBe(200);
        const db = await inspectData(adminDir);
        try {
          const held = await db.all<{ ip: string; email: string }>(
            "SELECT c.ip, a.email FROM ip_claims c JOIN accounts a ON a.id = c.account_id WHERE c.state = 'held' AND a.email IN ('b@example.com', 'c@example.com')",
          );
          expect(held).toHaveLength(200);
          for (const h of held) expect(h.email).toBe(winB.has(h.ip) ? 'b@example.com' : 'c@example.com');
        } finally {
          await db.close();
        }
        // Node 3 took part in nothing: its gateway admits every one of the 200.
        const n3 = nodes[2]!;
        await waitFor('node 3 to hold all 200', () => admitsAll(n3.httpProxy, ips), 10_000);
      },
      patient(60_000),
    );

    it(
      'rate limits are exact across nodes (Redis): 90 parallel lists with one token over 3 nodes, exactly 30 pass',
      async () => {
        const rs = await Promise.all(Array.from({ length: 90 }, (_, i) => api(nodes[i % 3]!.api, LIST, tokC)));
        expect(rs.filter((r) => r.status === 200)).toHaveLength(30);
        expect(rs.filter((r) => r.status === 429)).toHaveLength(60);
      },
      patient(30_000),
    );

    it(
      'PostgreSQL stopped: 503/10503 everywhere, gateways admit for the stale window then refuse; back: every node catches up, a frozen one too',
      async () => {
        const cred = { source: '8.8.4.4' };
        // An account of the race that won at least one IP (which one won how many is the race's business).
        const owner = (await heldBy('b@example.com')) ?? (await heldBy('c@example.com'))!;
        expect((await api(nodes[0]!.api, ADD, tokA, { items: [{ ip: '8.8.4.4' }] })).json.code).toBe(200);
        for (const n of nodes)
          expect(await until(performance.now(), async () => (await probe(n.httpProxy, cred)) === 200)).toBeLessThan(
            patient(3000),
          );
        // Timed from when the stop begins: the server refuses queries from then on, and `pg_ctl stop` itself can take
        // most of a second on a loaded machine (the view's last good read is just before the stop began).
        const stoppedAt = performance.now();
        pg.stop();
        let restarted = false;
        try {
          // Known clients are admitted from the last view while it lasts (probed at once: the window is 4 s).
          for (const n of nodes) expect(await probe(n.httpProxy, cred)).toBe(200);
          for (const n of nodes) {
            const r = await api(n.api, LIST, tokB);
            expect([r.status, r.json.code]).toEqual([503, 10503]);
          }
          // Then refused, cleanly: HTTP 503 and SOCKS 0x01, on every node.
          for (const n of nodes)
            expect(
              await until(performance.now(), async () => (await probe(n.httpProxy, cred)) === 503, 15_000),
            ).toBeLessThan(patient(15_000));
          expect(performance.now() - stoppedAt).toBeGreaterThan((STALE_SEC - 1) * 1000);
          const health = await (await fetch(`${nodes[1]!.api}/healthz`)).json();
          expect(health).toMatchObject({ status: 'down' });
          expect(await metric(nodes[2]!, 'proxyd_admission_view_stale')).toBe(2);
          // Node 3 is frozen across the restart and the change below: it must catch up by itself on waking.
          nodes[2]!.proc.kill('SIGSTOP');
          pg.start();
          restarted = true;
          // A change right after the restart, through `proxyd admin`: nodes 1 and 2 catch up and apply it.
          const r = await admin(adminDir, ['account', 'set', '--email', owner.email, '--status', 'suspended']);
          expect(r.code, r.stderr).toBe(0);
          await waitFor('the API back', async () => (await call(nodes[0]!.api, LIST, tokK)).status === 200, 15_000);
          for (const n of nodes.slice(0, 2)) {
            expect(
              await until(performance.now(), async () => (await probe(n.httpProxy, cred)) === 200, 15_000),
            ).toBeLessThan(patient(15_000));
            expect(
              await until(
                performance.now(),
                async () => (await probe(n.httpProxy, { source: owner.ip })) === 407,
                5000,
              ),
            ).toBeLessThan(5000);
          }
          nodes[2]!.proc.kill('SIGCONT');
          const n3 = nodes[2]!;
          expect(
            await until(
              performance.now(),
              async () => (await probe(n3.httpProxy, { source: owner.ip })) === 407,
              15_000,
            ),
          ).toBeLessThan(patient(15_000));
          expect(await probe(n3.httpProxy, cred)).toBe(200);
          for (const n of nodes)
            await waitFor('a current view', async () => (await metric(n, 'proxyd_admission_view_stale')) === 0, 10_000);
          const r2 = await admin(adminDir, ['account', 'set', '--email', owner.email, '--status', 'active']);
          expect(r2.code, r2.stderr).toBe(0);
          for (const n of nodes)
            expect(
              await until(performance.now(), async () => (await probe(n.httpProxy, { source: owner.ip })) === 200),
            ).toBeLessThan(5000);
          // The same processes served throughout: the outage crashed no node.
          for (const n of nodes) expect(n.proc.exitCode ?? n.proc.signalCode).toBeNull();
        } catch (e) {
          throw fail(e, ...nodes);
        } finally {
          nodes[2]!.proc.kill('SIGCONT');
          if (!restarted) pg.start();
        }
      },
      patient(90_000),
    );

    it(
      'a node SIGKILLed mid-batch loses nothing committed; the others go on and see every committed IP',
      async () => {
        const acked = new Set<string>();
        let next = 20_000;
        let answers = 0;
        const n1 = nodes[0]!;
        const loop = (async () => {
          for (;;) {
            const items = Array.from({ length: 100 }, () => ({ ip: pub(next++ % 65536) }));
            const r = await call(n1.api, ADD, tokK, { items });
            if (r.status === 0) return; // the node is gone
            answers++;
            const failed = new Set<string>((r.json.data?.failed_items ?? []).map((f: { ip: string }) => f.ip));
            if (r.json.code === 200 || r.json.code === 10431)
              for (const i of items) if (!failed.has(i.ip)) acked.add(i.ip);
          }
        })();
        await waitFor('300 acknowledged adds', () => acked.size >= 300, 30_000);
        n1.proc.kill('SIGKILL');
        await loop;
        await n1.exited;
        expect(answers).toBeGreaterThan(0);
        const db = await inspectData(adminDir);
        let live: Set<string>;
        try {
          live = new Set(
            (
              await db.all<{ ip: string }>(
                "SELECT e.ip FROM whitelist_entries e JOIN accounts a ON a.id = e.account_id WHERE a.email = 'k@example.com' AND e.deleted_at IS NULL",
              )
            ).map((r) => r.ip),
          );
        } finally {
          await db.close();
        }
        expect([...acked].filter((ip) => !live.has(ip))).toEqual([]);
        // Nodes 2 and 3 serve on: the API answers, and each gateway admits every committed IP.
        for (const n of others()) {
          await waitFor('the API answering', async () => (await call(n.api, LIST, tokK)).status === 200, 10_000);
          await waitFor(`node's view to hold all ${live.size}`, () => admitsAll(n.httpProxy, live), 15_000);
        }
      },
      patient(60_000),
    );
  },
);

async function heldBy(email: string): Promise<{ email: string; ip: string } | null> {
  const db = await inspectData(adminDir);
  try {
    const r = await db.get<{ ip: string } | undefined>(
      "SELECT c.ip FROM ip_claims c JOIN accounts a ON a.id = c.account_id WHERE a.email = ? AND c.state = 'held' ORDER BY c.ip LIMIT 1",
      email,
    );
    return r ? { email, ip: r.ip } : null;
  } finally {
    await db.close();
  }
}
