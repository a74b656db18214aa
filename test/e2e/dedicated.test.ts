// Dedicated egress addresses (docs/gateway.md, "Dedicated addresses") through a spawned proxyd on loopback: the pool
// 127.0.0.2-127.0.0.9 binds (every 127.x address is local), an echo target reports the peer address each
// connection left from, and `proxyd admin ip …` assigns and releases addresses while the daemon runs.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../gateway/helpers.js';
import { hostPort, pool } from '../hostile/net.js';
import { admin, inspectDb, makeAccount, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';
import { waitFor } from '../helpers/wait.js';
import { udpFrom } from '../helpers/net.js';

const PASS = 'dedicated-user-password';

function readAll(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (data += d));
    socket.on('error', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.setTimeout(10_000, () => socket.destroy());
  });
}

/** The address the echo target saw, or the proxy's status. */
async function via(proxy: string, target: number, user: string): Promise<{ ip: string } | { status: number }> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.write(
    `GET http://127.0.0.1:${target}/ HTTP/1.1\r\nHost: 127.0.0.1:${target}\r\nProxy-Authorization: ${basic(user, PASS)}\r\nConnection: close\r\n\r\n`,
  );
  const text = await readAll(socket);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  if (status !== 200) return { status };
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { ip: string };
}

const ipOf = (v: { ip: string } | { status: number }): string => {
  if (!('ip' in v)) throw new Error(`refused: ${JSON.stringify(v)}`);
  return v.ip;
};

/** A CONNECT tunnel to the hold target: resolves with the socket once established. */
async function tunnel(proxy: string, target: number, user: string): Promise<net.Socket> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.on('error', () => {});
  socket.write(
    `CONNECT 127.0.0.1:${target} HTTP/1.1\r\nHost: 127.0.0.1:${target}\r\nProxy-Authorization: ${basic(user, PASS)}\r\n\r\n`,
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('data', (d: Buffer) =>
      d.toString('latin1').startsWith('HTTP/1.1 200') ? resolve() : reject(new Error(d.toString('latin1'))),
    );
  });
  return socket;
}

describe('dedicated egress addresses (SQLite, one node)', () => {
  let d: Daemon;
  let dataDir: string;
  let echo: http.Server;
  let echoPort = 0;
  let hold: net.Server;
  let holdPort = 0;
  /** Where each held connection came from. */
  const heldFrom: string[] = [];

  beforeAll(async () => {
    echo = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ip: req.socket.remoteAddress?.replace(/^::ffff:/, '') }));
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as net.AddressInfo).port;
    hold = net.createServer((s) => {
      heldFrom.push(s.remoteAddress ?? '');
      s.on('error', () => {});
    });
    await new Promise<void>((r) => hold.listen(0, '127.0.0.1', r));
    holdPort = (hold.address() as net.AddressInfo).port;
    dataDir = tempDir();
    await makeAccount(dataDir, 'owner@example.com');
    await makeAccount(dataDir, 'other@example.com');
    await makeAccount(dataDir, 'third@example.com');
    for (const [email, username] of [
      ['owner@example.com', 'alice'],
      ['other@example.com', 'bob'],
      ['third@example.com', 'carol'],
    ]) {
      const r = await admin(
        dataDir,
        ['proxy-user', 'create', '--email', email!, '--username', username!, '--password-stdin'],
        `${PASS}\n`,
      );
      expect(r.code, r.stderr).toBe(0);
    }
    d = await startDaemon({
      dataDir,
      args: ['--egress-pool', '127.0.0.2-127.0.0.9', '--node-name', 'n1', '--allow-private-targets'],
      timeoutMs: 30_000,
    });
  }, patient(60_000));

  afterAll(async () => {
    await d?.stop();
    await new Promise<void>((r) => echo.close(() => r()));
    await new Promise<void>((r) => hold.close(() => r()));
  });

  it(
    'refuses bad input naming it, and changes nothing',
    async () => {
      const cases: Array<[string[], RegExp]> = [
        [
          ['--email', 'owner@example.com', '--node', 'n1', '--addresses', '127.0.0.02'],
          /"127\.0\.0\.02" is not an IPv4 address/,
        ],
        [
          ['--email', 'owner@example.com', '--node', 'n1', '--addresses', '127.0.0.5-127.0.0.3'],
          /ends before it starts/,
        ],
        [['--email', 'owner@example.com', '--node', 'n1', '--addresses', '127.0.0.2,,127.0.0.3'], /empty item/],
        [['--email', 'owner@example.com', '--node', 'n1', '--addresses', '::1'], /"::1" is not an IPv4/],
        [
          ['--email', 'owner@example.com', '--node', 'no such!', '--addresses', '127.0.0.2'],
          /--node: "no such!" is not a node name/,
        ],
        [['--email', 'owner@example.com', '--node', 'n2', '--addresses', '127.0.0.2'], /no node "n2"/],
        [
          ['--email', 'owner@example.com', '--node', 'n1', '--addresses', '127.0.0.2,127.0.0.50'],
          /127\.0\.0\.50 is not an egress address of node n1/,
        ],
        [
          ['--email', 'nobody@example.com', '--node', 'n1', '--addresses', '127.0.0.2'],
          /no account with email nobody@example\.com/,
        ],
      ];
      for (const [args, why] of cases) {
        const r = await admin(dataDir, ['ip', 'assign', ...args]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toMatch(why);
      }
      const rel = await admin(dataDir, ['ip', 'release', '--addresses', '127.0.0.2,10.9.9.9']);
      expect(rel.code).toBe(1);
      expect(rel.stderr).toMatch(/10\.9\.9\.9 is not an egress address of any node/);
      for (const [args, why] of [
        [['--node', 'n2'], /--node: no node "n2" has registered egress addresses/],
        [['--node', 'no such!'], /--node: "no such!" is not a node name/],
        [['--email', 'nobody@example.com'], /no account with email nobody@example\.com/],
      ] as Array<[string[], RegExp]>) {
        const r = await admin(dataDir, ['ip', 'list', ...args]);
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toMatch(why);
        expect(r.stdout).toBe('');
      }
      const list = await admin(dataDir, ['ip', 'list', '--node', 'n1']);
      expect(list.code, list.stderr).toBe(0);
      const rows = list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(rows).toHaveLength(8);
      expect(
        rows.every((r: { state: string; account: string | null }) => r.state === 'free' && r.account === null),
      ).toBe(true);
    },
    patient(60_000),
  );

  it(
    'an assigned address serves its owner only: 1,000 connections of another account never leave from it',
    async () => {
      const r = await admin(dataDir, [
        'ip',
        'assign',
        '--email',
        'owner@example.com',
        '--node',
        'n1',
        '--addresses',
        '127.0.0.2-127.0.0.3',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toEqual({ account: 'owner@example.com', node: 'n1', addresses: ['127.0.0.2', '127.0.0.3'] });
      const held = await admin(dataDir, [
        'ip',
        'assign',
        '--email',
        'other@example.com',
        '--node',
        'n1',
        '--addresses',
        '127.0.0.4,127.0.0.3',
      ]);
      expect(held.code).toBe(1);
      expect(held.stderr).toMatch(/127\.0\.0\.3 is held by another account; nothing changed/);
      const list = await admin(dataDir, ['ip', 'list', '--email', 'owner@example.com']);
      const rows = list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(rows.map((x: { address: string; state: string; node: string }) => [x.address, x.state, x.node])).toEqual([
        ['127.0.0.2', 'assigned', 'n1'],
        ['127.0.0.3', 'assigned', 'n1'],
      ]);
      // Within 1 s the daemon leaves from them for their owner only.
      await waitFor(
        'the owner leaves from its own addresses',
        async () => ['127.0.0.2', '127.0.0.3'].includes(ipOf(await via(d.httpProxy, echoPort, 'alice'))),
        patient(2_000),
      );
      const others = await pool(Array.from({ length: 1000 }), 16, () => via(d.httpProxy, echoPort, 'bob').then(ipOf));
      const seen = new Set(others);
      expect(seen.has('127.0.0.2')).toBe(false);
      expect(seen.has('127.0.0.3')).toBe(false);
      expect(seen.size).toBe(6);
      const mine = await pool(Array.from({ length: 100 }), 8, () => via(d.httpProxy, echoPort, 'alice').then(ipOf));
      expect(new Set(mine)).toEqual(new Set(['127.0.0.2', '127.0.0.3']));
    },
    patient(180_000),
  );

  it(
    "sticky sessions stay within the owner's addresses; -ip- picks one; a foreign -ip- is a 407 logged bad_ip_parameter",
    async () => {
      const sticky = await pool(Array.from({ length: 30 }), 6, () =>
        via(d.httpProxy, echoPort, 'alice-session-s1-sesstime-30').then(ipOf),
      );
      expect(new Set(sticky).size).toBe(1);
      expect(['127.0.0.2', '127.0.0.3']).toContain(sticky[0]);
      const pinned = await pool(Array.from({ length: 20 }), 5, () =>
        via(d.httpProxy, echoPort, 'alice-ip-127.0.0.3').then(ipOf),
      );
      expect(new Set(pinned)).toEqual(new Set(['127.0.0.3']));
      const pinnedSession = await via(d.httpProxy, echoPort, 'alice-ip-127.0.0.2-session-x1');
      expect(ipOf(pinnedSession)).toBe('127.0.0.2');
      // Not the account's: a shared address, the other account's way in, or none of the pool.
      expect(await via(d.httpProxy, echoPort, 'alice-ip-127.0.0.5')).toEqual({ status: 407 });
      expect(await via(d.httpProxy, echoPort, 'bob-ip-127.0.0.2')).toEqual({ status: 407 });
      // SOCKS5: RFC 1929 status 0x01, as wrong credentials.
      const { host, port } = hostPort(d.socks);
      const s = net.connect(port, host);
      s.on('error', () => {});
      const u = Buffer.from('alice-ip-127.0.0.5');
      const p = Buffer.from(PASS);
      s.write(Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p]));
      const got = await new Promise<Buffer>((resolve) => {
        let buf = Buffer.alloc(0);
        s.on('data', (x: Buffer) => {
          buf = Buffer.concat([buf, x]);
          if (buf.length >= 4) resolve(buf);
        });
        s.on('close', () => resolve(buf));
      });
      s.destroy();
      expect([...got.subarray(0, 4)]).toEqual([5, 2, 1, 1]);
      await waitFor(
        'the refusal is in the connection log',
        async () => {
          const r = await admin(dataDir, [
            'connections',
            '--reason',
            'bad_ip_parameter',
            '--email',
            'owner@example.com',
          ]);
          return (
            r.stdout.includes('"username":"alice-ip-127.0.0.5"') && r.stdout.includes('"reason":"bad_ip_parameter"')
          );
        },
        patient(5_000),
      );
    },
    patient(60_000),
  );

  it(
    'release ends open tunnels from the address within 2 s, and frees it for the shared rotation',
    async () => {
      const before = heldFrom.length;
      const t = await tunnel(d.httpProxy, holdPort, 'alice-ip-127.0.0.2');
      await waitFor('the held connection arrived', () => heldFrom.length > before, patient(2_000));
      expect(heldFrom.at(-1)).toBe('127.0.0.2');
      const closed = new Promise<number>((r) => t.once('close', () => r(Date.now())));
      const t0 = Date.now();
      const r = await admin(dataDir, ['ip', 'release', '--addresses', '127.0.0.2']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ released: 1, addresses: ['127.0.0.2'] });
      const at = await Promise.race([closed, new Promise<number>((res) => setTimeout(() => res(-1), patient(4_000)))]);
      expect(at).toBeGreaterThan(0);
      expect(at - t0).toBeLessThan(patient(2_000) + 1_000); // the admin command's own start-up counted in
      // Now the owner leaves from 127.0.0.3 only, and the others may get 127.0.0.2 again.
      const mine = await pool(Array.from({ length: 20 }), 5, () => via(d.httpProxy, echoPort, 'alice').then(ipOf));
      expect(new Set(mine)).toEqual(new Set(['127.0.0.3']));
      const others = await pool(Array.from({ length: 40 }), 8, () => via(d.httpProxy, echoPort, 'bob').then(ipOf));
      expect(new Set(others).has('127.0.0.2')).toBe(true);
      expect(new Set(others).has('127.0.0.3')).toBe(false);
    },
    patient(60_000),
  );

  it(
    'an account that now holds addresses loses its open tunnels from shared ones',
    async () => {
      const t = await tunnel(d.httpProxy, holdPort, 'bob');
      const closed = new Promise<void>((r) => t.once('close', () => r()));
      const r = await admin(dataDir, [
        'ip',
        'assign',
        '--email',
        'other@example.com',
        '--node',
        'n1',
        '--addresses',
        '127.0.0.9',
      ]);
      expect(r.code, r.stderr).toBe(0);
      // Its tunnel left from a shared address (not 127.0.0.9, unless rotation put it there): either way it now
      // leaves from 127.0.0.9 only.
      const from = heldFrom.at(-1);
      if (from !== '127.0.0.9')
        await expect(
          Promise.race([closed.then(() => true), new Promise((res) => setTimeout(() => res(false), patient(3_000)))]),
        ).resolves.toBe(true);
      else t.destroy();
      const ips = await pool(Array.from({ length: 10 }), 5, () => via(d.httpProxy, echoPort, 'bob').then(ipOf));
      expect(new Set(ips)).toEqual(new Set(['127.0.0.9']));
    },
    patient(60_000),
  );

  it(
    'UDP associations obey the same rules',
    async () => {
      // Now alice holds 127.0.0.3, bob 127.0.0.9; carol none.
      expect(await udpFrom(d.socks, PASS, 'alice', 3)).toEqual(['127.0.0.3', '127.0.0.3', '127.0.0.3']);
      expect(await udpFrom(d.socks, PASS, 'bob-session-u1', 2)).toEqual(['127.0.0.9', '127.0.0.9']);
      expect(await udpFrom(d.socks, PASS, 'alice-ip-127.0.0.3', 1)).toEqual(['127.0.0.3']);
      const seen = new Set<string>();
      for (let i = 0; i < 12; i++) {
        const r = await udpFrom(d.socks, PASS, i % 2 ? 'carol' : `carol-session-c${i}`, 1);
        if (!Array.isArray(r)) throw new Error(JSON.stringify(r));
        for (const a of r) seen.add(a);
      }
      expect(seen.has('127.0.0.3')).toBe(false);
      expect(seen.has('127.0.0.9')).toBe(false);
      expect(seen.size).toBeGreaterThan(1);
    },
    patient(60_000),
  );

  it(
    'a replacement through the API ends open tunnels from the old address within 2 s; the new one serves its owner',
    async () => {
      const made = await admin(dataDir, [
        'key',
        'create',
        '--email',
        'owner@example.com',
        '--name',
        'ips',
        '--scopes',
        'users:read,users:write',
      ]);
      expect(made.code, made.stderr).toBe(0);
      const key = made.json.key as string;
      const before = heldFrom.length;
      const t = await tunnel(d.httpProxy, holdPort, 'alice-ip-127.0.0.3');
      await waitFor('the held connection arrived', () => heldFrom.length > before, patient(2_000));
      expect(heldFrom.at(-1)).toBe('127.0.0.3');
      const closed = new Promise<number>((r) => t.once('close', () => r(Date.now())));
      const res = await fetch(`${d.api}/openapi/v1/proxy/ips/replace`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ address: '127.0.0.3' }),
      });
      const t0 = Date.now();
      const body = (await res.json()) as { code: number; data: { old: string; new: string } };
      expect(body.code).toBe(200);
      expect(body.data).toEqual({ old: '127.0.0.3', new: '127.0.0.2' }); // the lowest free address of the node
      const at = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), patient(4_000)))]);
      expect(at).toBeGreaterThan(0);
      expect(at - t0).toBeLessThan(patient(2_000));
      await waitFor(
        'the owner leaves from its new address',
        async () => ipOf(await via(d.httpProxy, echoPort, 'alice')) === '127.0.0.2',
        patient(2_000),
      );
      expect(await via(d.httpProxy, echoPort, 'alice-ip-127.0.0.3')).toEqual({ status: 407 });
      const list = await fetch(`${d.api}/openapi/v1/proxy/ips`, { headers: { authorization: `Bearer ${key}` } });
      const listed = (await list.json()) as {
        data: { items: Array<{ address: string; bytes_up: number; bytes_down: number }> };
      };
      expect(listed.data.items.map((i) => i.address)).toEqual(['127.0.0.2']);
      // Nobody else leaves from the quarantined one.
      const others = await pool(Array.from({ length: 30 }), 6, () => via(d.httpProxy, echoPort, 'carol').then(ipOf));
      expect(others).not.toContain('127.0.0.3');
      expect(others).not.toContain('127.0.0.2');
    },
    patient(60_000),
  );

  it(
    'usage by address reaches the summary\'s "ips"',
    async () => {
      const made = await admin(dataDir, [
        'key',
        'create',
        '--email',
        'owner@example.com',
        '--name',
        'usage',
        '--scopes',
        'usage:read',
      ]);
      const key = made.json.key as string;
      await waitFor(
        'bytes by address',
        async () => {
          const r = (await (
            await fetch(`${d.api}/openapi/v1/usage/summary`, { headers: { authorization: `Bearer ${key}` } })
          ).json()) as { data: { ips?: Array<{ address: string; bytes_down: number; connections: number }> } };
          const two = r.data.ips?.find((i) => i.address === '127.0.0.2');
          const three = r.data.ips?.find((i) => i.address === '127.0.0.3');
          return two !== undefined && two.bytes_down > 0 && three !== undefined && three.connections > 0;
        },
        patient(15_000),
      ); // written every 5 s
    },
    patient(30_000),
  );

  it("/metrics counts this node's addresses by state", async () => {
    const text = await (await fetch(`${d.api}/metrics`)).text();
    expect(text).toMatch(/proxyd_egress_addresses\{state="assigned"\} 2/);
    expect(text).toMatch(/proxyd_egress_addresses\{state="quarantined"\} 1/);
    expect(text).toMatch(/proxyd_egress_addresses\{state="free"\} 5/);
  });

  it(
    'an account whose addresses are all on another node never leaves from the shared pool here, TCP or UDP',
    async () => {
      // Another node's registration as it would write it (one SQLite file serves one daemon: no second node can start).
      const db = await inspectDb(dataDir, { write: true });
      db.run(
        "INSERT INTO egress_addresses (address, node, country, city, registered_at) VALUES ('192.0.2.77', 'n9', 'de', NULL, 0)",
      );
      db.close();
      const r = await admin(dataDir, [
        'ip',
        'assign',
        '--email',
        'third@example.com',
        '--node',
        'n9',
        '--addresses',
        '192.0.2.77',
      ]);
      expect(r.code, r.stderr).toBe(0);
      await waitFor(
        'carol is refused here',
        async () => 'status' in (await via(d.httpProxy, echoPort, 'carol')),
        patient(2_000),
      );
      expect(await via(d.httpProxy, echoPort, 'carol')).toEqual({ status: 502 });
      expect(await udpFrom(d.socks, PASS, 'carol', 1)).toEqual({ reply: 3 });
      expect(await udpFrom(d.socks, PASS, 'carol-session-u9', 1)).toEqual({ reply: 3 });
      expect(await udpFrom(d.socks, PASS, 'carol-ip-192.0.2.77', 1)).toEqual({ reply: 3 });
    },
    patient(30_000),
  );

  it(
    "every assignment, release and replacement is one audit record with its actor; GET /openapi/v1/audit shows the key's account's only; the chains verify",
    async () => {
      const made = await admin(dataDir, [
        'key',
        'create',
        '--email',
        'owner@example.com',
        '--name',
        'audit',
        '--scopes',
        'audit:read',
      ]);
      expect(made.code, made.stderr).toBe(0);
      const res = await fetch(`${d.api}/openapi/v1/audit?action=ip&page_size=100`, {
        headers: { authorization: `Bearer ${made.json.key as string}` },
      });
      const body = (await res.json()) as {
        code: number;
        data: {
          items: Array<{
            account: string;
            action: string;
            actor: { type: string };
            target: string | null;
            details: Record<string, unknown>;
            request_id: string | null;
          }>;
        };
      };
      expect(body.code).toBe(200);
      expect(body.data.items.every((i) => i.account === 'owner@example.com')).toBe(true);
      // Newest first: the replacement over the API (actor key), the release and the assignment by the operator.
      expect(body.data.items.map((i) => [i.action, i.actor.type, i.target, i.details])).toEqual([
        ['ip.replaced', 'key', '127.0.0.3', { old: '127.0.0.3', new: '127.0.0.2' }],
        ['ip.released', 'operator', null, { addresses: ['127.0.0.2'] }],
        ['ip.assigned', 'operator', 'n1', { addresses: ['127.0.0.2', '127.0.0.3'] }],
      ]);
      expect(body.data.items[0]!.request_id).toMatch(/./);
      const verify = await admin(dataDir, ['audit', 'verify']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    },
    patient(30_000),
  );
});
