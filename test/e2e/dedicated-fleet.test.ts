// Dedicated egress addresses through an entry with two exits on one PostgreSQL (docs/gateway.md, "Dedicated
// addresses"): each exit dials from its own pool on 127.0.0.x, so the target tells the exit and the address. The
// entry chooses only the exit holding the account's addresses; TCP and UDP alike; a release on the exit closes
// the open tunnel within 2 s.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { udpFrom } from '../helpers/net.js';
import { patient } from '../helpers/patience.js';
import { sleep, waitFor } from '../helpers/wait.js';

const skip = postgresSkipReason();
const PASSWORD = 'dedicated-fleet-password';
const POOL_A = ['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.24'];
const POOL_B = ['127.0.0.25', '127.0.0.26', '127.0.0.27', '127.0.0.28'];

/** Answers each connection with the address it came from, then holds it open. */
function whoAmI(): Promise<net.Server> {
  const s = net.createServer((c) => {
    c.on('error', () => {});
    c.write(`${c.remoteAddress?.replace(/^::ffff:/, '')}\n`);
  });
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(s)));
}

type Outcome = { ok: true; from: string; socket: net.Socket } | { ok: false; status: number; head: string };

/** A CONNECT through the entry: the address it left from (the socket kept open), or the refusal. */
function connect(entry: Daemon, target: string, user: string): Promise<Outcome> {
  const [host, port] = entry.httpProxy.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    s.setTimeout(10_000, () => {
      s.destroy();
      reject(new Error(`no answer as ${user}`));
    });
    s.on('error', () => {});
    s.on('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = Number(buf.slice(9, 12));
      if (status !== 200) {
        s.destroy();
        return resolve({ ok: false, status, head: buf.slice(0, end) });
      }
      const nl = buf.indexOf('\n', end + 4);
      if (nl < 0) return;
      s.setTimeout(0);
      s.removeAllListeners('data');
      resolve({ ok: true, from: buf.slice(end + 4, nl), socket: s });
    });
  });
}

async function from(entry: Daemon, target: string, user: string): Promise<string> {
  const r = await connect(entry, target, user);
  if (!r.ok) throw new Error(`${user}: ${r.status} ${r.head}`);
  r.socket.destroy();
  return r.from;
}

/** SOCKS5 CONNECT's reply code. */
function socksReply(entry: Daemon, targetPort: number, user: string): Promise<number> {
  const [host, port] = entry.socks.split(':') as [string, string];
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host);
    let buf = Buffer.alloc(0);
    s.on('error', () => resolve(-1));
    const u = Buffer.from(user);
    const p = Buffer.from(PASSWORD);
    s.on('connect', () =>
      s.write(
        Buffer.concat([
          Buffer.from([5, 1, 2, 1, u.length]),
          u,
          Buffer.from([p.length]),
          p,
          Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, targetPort >> 8, targetPort & 255]),
        ]),
      ),
    );
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 6) {
        s.destroy();
        resolve(buf[3] === 0 ? buf[5]! : -(buf[3]! + 100));
      }
    });
  });
}

describe.skipIf(skip)('dedicated addresses through an entry and two exits on one PostgreSQL', () => {
  let pg: PgCluster;
  let first: string;
  let target: net.Server;
  let entry: Daemon;
  const exits: Daemon[] = [];
  const tgt = () => `127.0.0.1:${(target.address() as net.AddressInfo).port}`;

  beforeAll(async () => {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    first = await dataDirFor('postgres', pg.url);
    for (const [email, user] of [
      ['owner@example.com', 'alice'],
      ['other@example.com', 'bob'],
    ] as const) {
      await makeAccount(first, email);
      const r = await admin(
        first,
        ['proxy-user', 'create', '--email', email, '--username', user, '--password-stdin'],
        `${PASSWORD}\n`,
      );
      expect(r.code, r.stderr).toBe(0);
    }
    target = await whoAmI();
    entry = await startDaemon({ dataDir: first, args: ['--role', 'entry', '--node-name', 'entry-1'] });
    const url = entry.databaseUrl!;
    const exit = async (name: string, location: string, pool: string[]) =>
      startDaemon({
        dataDir: await dataDirFor('sqlite'),
        args: [
          '--database-url',
          url,
          '--role',
          'exit',
          '--location',
          location,
          '--hop-listen',
          '127.0.0.1:0',
          '--node-name',
          name,
          '--egress-pool',
          `${pool[0]}-${pool.at(-1)}`,
          '--allow-private-targets',
        ],
      });
    exits.push(...(await Promise.all([exit('exit-a', 'us:nyc', POOL_A), exit('exit-b', 'de:berlin', POOL_B)])));
    // The entry sees both exits (the registry is read every second).
    await waitFor(
      'both exits take traffic',
      async () => {
        const seen = new Set<string>();
        for (let i = 0; i < 16; i++) seen.add(await from(entry, tgt(), 'bob').catch(() => ''));
        return [...seen].some((a) => POOL_A.includes(a)) && [...seen].some((a) => POOL_B.includes(a));
      },
      patient(15_000),
    );
    const r = await admin(first, [
      'ip',
      'assign',
      '--email',
      'owner@example.com',
      '--node',
      'exit-a',
      '--addresses',
      '127.0.0.22',
    ]);
    expect(r.code, r.stderr).toBe(0);
  }, patient(120_000));

  afterAll(async () => {
    await Promise.all([entry, ...exits].filter(Boolean).map((d) => d.stop()));
    target?.close();
    pg?.destroy();
  });

  it(
    'the owner leaves only from its address on its exit; nobody else ever does',
    async () => {
      // Every node reads the change within 1 s (until the entry and both exits have, a connection may be refused).
      await waitFor(
        'the assignment applies on every node',
        async () => {
          for (let i = 0; i < 8; i++)
            if ((await from(entry, tgt(), 'alice').catch(() => '')) !== '127.0.0.22') return false;
          return true;
        },
        patient(3_000),
      );
      for (let i = 0; i < 40; i++)
        expect(await from(entry, tgt(), i % 2 ? 'alice' : 'alice-session-s1')).toBe('127.0.0.22');
      const others: string[] = [];
      for (let i = 0; i < 200; i++) others.push(await from(entry, tgt(), i % 3 === 0 ? `bob-session-b${i}` : 'bob'));
      expect(others).not.toContain('127.0.0.22');
      expect(others.some((a) => POOL_A.includes(a))).toBe(true);
      expect(others.some((a) => POOL_B.includes(a))).toBe(true);
    },
    patient(120_000),
  );

  it(
    '-ip- picks the address; a foreign one is 407; asking a country no exit of its addresses is in is 502 / 0x03',
    async () => {
      expect(await from(entry, tgt(), 'alice-ip-127.0.0.22-session-z')).toBe('127.0.0.22');
      const foreign = await connect(entry, tgt(), 'alice-ip-127.0.0.25');
      expect(foreign).toMatchObject({ ok: false, status: 407 });
      const de = await connect(entry, tgt(), 'alice-country-de');
      expect(de.ok).toBe(false);
      expect(de).toMatchObject({ status: 502 });
      expect((de as { head: string }).head).toContain('details="no exit holds your dedicated addresses"');
      expect(await socksReply(entry, (target.address() as net.AddressInfo).port, 'alice-country-de')).toBe(3);
      expect(await from(entry, tgt(), 'alice-country-us')).toBe('127.0.0.22');
    },
    patient(60_000),
  );

  it(
    'UDP associations obey the same rules',
    async () => {
      const mine = await udpFrom(entry.socks, PASSWORD, 'alice', 3);
      expect(mine).toEqual(['127.0.0.22', '127.0.0.22', '127.0.0.22']);
      for (let i = 0; i < 8; i++) {
        const theirs = await udpFrom(entry.socks, PASSWORD, `bob-session-u${i}`, 1);
        expect(
          Array.isArray(theirs) && theirs.length === 1 && !theirs.includes('127.0.0.22'),
          JSON.stringify(theirs),
        ).toBe(true);
      }
      expect(await udpFrom(entry.socks, PASSWORD, 'alice-country-de', 1)).toEqual({ reply: 3 });
    },
    patient(60_000),
  );

  it(
    "a release closes the owner's open tunnel on the exit within 2 s; then it may leave from the shared pool",
    async () => {
      const open = await connect(entry, tgt(), 'alice');
      if (!open.ok) throw new Error(open.head);
      expect(open.from).toBe('127.0.0.22');
      const closed = new Promise<number>((r) => open.socket.once('close', () => r(Date.now())));
      const r = await admin(first, ['ip', 'release', '--addresses', '127.0.0.22', '--quarantine', '30']);
      const t0 = Date.now();
      expect(r.code, r.stderr).toBe(0);
      const at = await Promise.race([closed, sleep(patient(4_000)).then(() => -1)]);
      expect(at).toBeGreaterThan(0);
      expect(at - t0).toBeLessThan(patient(2_000));
      // Quarantined: nobody leaves from it; alice holds none now and shares the pools, once every node has read the
      // release (each within 1 s: until then an exit that has not may still refuse her, as holding addresses elsewhere).
      await waitFor(
        'every node has read the release',
        async () => {
          for (let i = 0; i < 6; i++)
            if (!(await connect(entry, tgt(), 'alice').then((o) => (o.ok && o.socket.destroy(), o.ok)))) return false;
          return true;
        },
        patient(3_000),
      );
      const after: string[] = [];
      for (let i = 0; i < 30; i++) after.push(await from(entry, tgt(), i % 2 ? 'alice' : 'bob'));
      expect(after).not.toContain('127.0.0.22');
      const list = await admin(first, ['ip', 'list', '--node', 'exit-a']);
      expect(list.stdout).toContain(
        '"address":"127.0.0.22","node":"exit-a","country":"us","city":"nyc","account":null,"assigned_at":null,"state":"quarantined"',
      );
    },
    patient(60_000),
  );
});
