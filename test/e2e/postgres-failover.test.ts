// High availability (docs/operations.md, "PostgreSQL high availability"): a real primary with a synchronous
// streaming standby (pg_basebackup -R, synchronous_standby_names), two proxyd nodes on the two-host URL with
// target_session_attrs=read-write. Whitelist writes run on both nodes up to the moment the primary crashes
// (immediate stop); the standby is promoted. Both nodes find the new primary by themselves and serve again
// (API and gateway) within 5 s of the promotion, every addition a client saw acknowledged is there, and
// writes work after.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, startDaemon, type Daemon, ADD, LIST } from '../helpers/daemon.js';
import { addrOf, tcpEcho } from '../helpers/net.js';
import { probe } from './fleet-probe.js';
import { postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { pub } from '../ops/helpers.js';
import postgres from '#postgres';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
let primary: PgCluster;
let standby: PgCluster;
const nodes: Daemon[] = [];
let url: string;
let token: string;
let password: string;
let echo: net.Server;
let next = 0;

async function call(
  node: Daemon,
  path: string,
  body?: unknown,
): Promise<{ status: number; code: number; failed: string[] }> {
  try {
    const res = await fetch(`${node.api}${path}?api_key=${encodeURIComponent(token)}`, {
      ...(body === undefined
        ? {}
        : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(5000),
    });
    const j = (await res.json()) as { code: number; data?: { failed_items?: Array<{ ip: string }> } };
    return { status: res.status, code: j.code, failed: j.data?.failed_items?.map((f) => f.ip) ?? [] };
  } catch {
    return { status: 0, code: 0, failed: [] };
  }
}

async function firstOk(t0: number, probe: () => Promise<boolean>, limitMs = 20_000): Promise<number> {
  for (;;) {
    if (await probe()) return Date.now() - t0;
    if (Date.now() - t0 > limitMs) throw new Error(`not serving within ${limitMs} ms`);
    await sleep(25);
  }
}

/** CONNECT through a node's HTTP proxy with the proxy user's credentials: the answer's status (0: none). */
const connectStatus = (node: Daemon) => probe(node.httpProxy, addrOf(echo), { user: 'hauser', password });

describe.skipIf(skip !== null)(`failover to a promoted synchronous standby${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    primary = await startPostgres({
      settings: {
        synchronous_commit: 'on',
        synchronous_standby_names: "'standby1'",
        fsync: 'on',
        wal_level: 'replica',
        max_wal_senders: '4',
      },
    });
    standby = await startPostgres({
      standbyOf: primary,
      name: 'standby1',
      settings: { synchronous_commit: 'on', fsync: 'on' },
    });
    const admin0 = postgres(primary.url, { max: 1, onnotice: () => {} });
    try {
      for (let i = 0; ; i++) {
        const [r] = await admin0`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`;
        if (r?.sync_state === 'sync') break;
        if (i > 200) throw new Error('the standby never became synchronous');
        await sleep(50);
      }
      await admin0.unsafe('CREATE DATABASE proxyd');
    } finally {
      await admin0.end();
    }
    url = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/proxyd?target_session_attrs=read-write`;
    echo = await tcpEcho();
    const args = [
      '--database-url',
      url,
      '--allow-private-targets',
      '--stale-admission',
      '60',
      '--rate-limits',
      'list=100000,add=100000,delete=100000',
    ];
    for (let i = 0; i < 2; i++) nodes.push(await startDaemon({ dataDir: await dataDirFor('sqlite'), args }));
    const dir = nodes[0]!.dataDir;
    const withUrl = (a: string[]) => [...a, '--database-url', url];
    expect(
      (
        await admin(
          dir,
          withUrl(['account', 'create', '--email', 'ha@example.com', '--password-stdin', '--verified']),
          'console password 1\n',
        )
      ).code,
    ).toBe(0);
    token = (await admin(dir, withUrl(['token', 'reset', '--email', 'ha@example.com']))).json.token;
    const pu = await admin(dir, withUrl(['proxy-user', 'create', '--email', 'ha@example.com', '--username', 'hauser']));
    password = pu.json.password;
    for (const node of nodes) await firstOk(Date.now(), async () => (await connectStatus(node)) === 200);
  }, patient(120_000));

  afterAll(async () => {
    for (const node of nodes) await node.stop();
    primary?.destroy();
    standby?.destroy();
    await new Promise((r) => echo?.close(r));
  });

  it(
    'both nodes serve within 5 s of the promotion; nothing acknowledged is lost; writes work after',
    async () => {
      // Writers on both nodes until the primary dies under them.
      const acked = new Set<string>();
      let writing = true;
      const writers = nodes.map(async (node) => {
        while (writing) {
          const items = Array.from({ length: 5 }, () => ({ ip: pub(next++) }));
          const r = await call(node, ADD, { items });
          if (r.code === 200 || r.code === 10431) for (const i of items) if (!r.failed.includes(i.ip)) acked.add(i.ip);
          if (r.status !== 200) await sleep(20);
        }
      });
      while (acked.size < 100) await sleep(20);
      primary.stop('immediate');
      await sleep(500); // the nodes notice: 503 / 10503 while there is no primary
      standby.promote();
      const promotedAt = Date.now();
      const times = await Promise.all(
        nodes.map(async (node) => ({
          api: await firstOk(promotedAt, async () => (await call(node, LIST)).status === 200),
          gateway: await firstOk(promotedAt, async () => (await connectStatus(node)) === 200),
        })),
      );
      writing = false;
      await Promise.all(writers);
      if (process.env.PROXYD_TEST_PRINT) console.log(JSON.stringify({ times, acked: acked.size }));
      for (const t of times) {
        expect(t.api, JSON.stringify(times)).toBeLessThan(5000);
        expect(t.gateway, JSON.stringify(times)).toBeLessThan(5000);
      }
      // Every acknowledged addition is on the new primary.
      const sql = postgres(`postgres://postgres@127.0.0.1:${standby.port}/proxyd`, { max: 1, onnotice: () => {} });
      try {
        const rows = await sql<{ ip: string }[]>`SELECT ip FROM whitelist_entries WHERE deleted_at IS NULL`;
        const present = new Set(rows.map((r) => r.ip));
        expect([...acked].filter((ip) => !present.has(ip))).toEqual([]);
      } finally {
        await sql.end();
      }
      // Writes work after, through either node.
      for (const node of nodes)
        expect(await call(node, ADD, { items: [{ ip: pub(next++) }] })).toMatchObject({ status: 200, code: 200 });
      for (const node of nodes) expect(node.proc.exitCode, node.logs.slice(-20).join('\n')).toBeNull();
    },
    patient(120_000),
  );
});
