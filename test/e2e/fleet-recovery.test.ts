// The way back after a PostgreSQL outage is bounded (docs/operations.md, "Database outage"): three nodes on one
// database, the database crashes (immediate stop) or freezes (SIGSTOP) past --stale-admission so every
// gateway refuses, then comes back. Once it answers, every node's API serves within 1 s and its gateway admits
// again within 1 s of that, with no restart. A feed call left hanging by the outage must not hold the view.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon, LIST } from '../helpers/daemon.js';
import { tcpEcho, addrOf } from '../helpers/net.js';
import { probe } from './fleet-probe.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
const STALE_S = 2;
let pg: PgCluster;
let nodes: Daemon[] = [];
let token: string;
let password: string;
let echo: net.Server;

async function listStatus(node: Daemon): Promise<number> {
  try {
    const res = await fetch(`${node.api}${LIST}?api_key=${encodeURIComponent(token)}`, {
      signal: AbortSignal.timeout(3000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Polls every 25 ms from `t0` until `probe` answers 200: the ms it took. */
async function firstOk(t0: number, probe: () => Promise<number>, limitMs = 30_000): Promise<number> {
  const limit = patient(limitMs);
  for (;;) {
    if ((await probe()) === 200) return Date.now() - t0;
    if (Date.now() - t0 > limit) throw new Error(`no 200 within ${limit} ms`);
    await sleep(25);
  }
}

/** Every node's gateway refuses (the stale window has run out). */
async function allRefusing(): Promise<void> {
  const until = Date.now() + patient(20_000);
  for (const node of nodes) {
    while ((await connectStatus(node)) !== 503) {
      if (Date.now() > until) throw new Error(`${node.api}: gateway still admitting past --stale-admission`);
      await sleep(100);
    }
  }
}

/** From the database answering again (t0): per node, ms until the API lists and until the gateway admits. */
async function wayBack(t0: number): Promise<Array<{ api: number; gateway: number }>> {
  return Promise.all(
    nodes.map(async (node) => ({
      api: await firstOk(t0, () => listStatus(node)),
      gateway: await firstOk(t0, () => connectStatus(node)),
    })),
  );
}

function assertBounded(times: Array<{ api: number; gateway: number }>): void {
  if (process.env.PROXYD_TEST_PRINT) console.log(JSON.stringify(times));
  for (const t of times) {
    // Polling every 25 ms on a loaded two-core machine: 1 s plus a quarter for the probes themselves.
    expect(t.api, JSON.stringify(times)).toBeLessThan(1250);
    expect(t.gateway, JSON.stringify(times)).toBeLessThan(1250);
  }
  for (const node of nodes) expect(node.proc.exitCode, node.logs.slice(-20).join('\n')).toBeNull();
}

/** CONNECT through a node's HTTP proxy with the proxy user's credentials: the answer's status (0: none). */
const connectStatus = (node: Daemon) => probe(node.httpProxy, addrOf(echo), { user: 'back', password });

describe.skipIf(skip !== null)(
  `recovery after a PostgreSQL outage, three nodes${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    beforeAll(async () => {
      pg = await startPostgres();
      await makeTemplate(pg.url);
      const first = await dataDirFor('postgres', pg.url);
      token = (await makeAccount(first, 'back@example.com')).token;
      const pu = await admin(first, ['proxy-user', 'create', '--email', 'back@example.com', '--username', 'back']);
      password = pu.json.password;
      echo = await tcpEcho();
      const args = [
        '--allow-private-targets',
        '--stale-admission',
        String(STALE_S),
        '--rate-limits',
        'list=100000,add=100000,delete=100000',
      ];
      nodes = [await startDaemon({ dataDir: first, args })];
      const url = nodes[0]!.databaseUrl!;
      for (let i = 1; i < 3; i++) {
        const dir = await dataDirFor('sqlite');
        nodes.push(await startDaemon({ dataDir: dir, args: [...args, '--database-url', url] }));
      }
      for (const node of nodes) await firstOk(Date.now(), () => connectStatus(node), 10_000);
    }, patient(120_000));

    afterAll(async () => {
      for (const node of nodes) await node.stop();
      pg?.destroy();
      await new Promise((r) => echo?.close(r));
    });

    it(
      'a crash and restart (immediate stop): API and gateway back within 1 s of the database',
      async () => {
        pg.stop('immediate');
        try {
          await allRefusing();
          await sleep(1000); // feed calls and reconnects pile up while it is down
        } finally {
          pg.start();
        }
        assertBounded(await wayBack(Date.now()));
      },
      patient(90_000),
    );

    it(
      'a frozen server (SIGSTOP) past the stale window, then SIGCONT: back within 1 s',
      async () => {
        pg.pause();
        try {
          await allRefusing();
          await sleep(1000);
        } finally {
          pg.resume();
        }
        assertBounded(await wayBack(Date.now()));
      },
      patient(90_000),
    );
  },
);
