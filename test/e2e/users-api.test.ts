// The customer API's proxy users on real daemons: two proxyd nodes on one PostgreSQL (API keys made in the store), and
// one node on SQLite (its key from `proxyd admin key create`).
//
// - An idempotent batch create whose client drops the connection before the answer, sent again with the same key,
//   makes its users once and gets the first answer (`Idempotent-Replayed: true`).
// - A user disabled (PATCH) or deleted mid-tunnel loses its open tunnels on both nodes within 2 s, and new ones are
//   refused; a rotated password is refused on both nodes within 1 s and the new one works.
// - A user's own deny list refuses its target (403, logged target_denied) while another user of the account goes on;
//   its own expires_at refuses it like an expired plan.
// - No proxy password (chosen or generated) appears in any log line.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXY_PATHS } from '../../src/contract/paths.js';
import { ApiKeyService } from '../../src/daemon/services/api-keys.js';
import { openStore } from '../../src/daemon/store/index.js';
import { admin, dataDirFor, databaseUrlOf, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { tcpEcho, addrOf } from '../helpers/net.js';
import { patient } from '../helpers/patience.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { probe } from './fleet-probe.js';

const skip = postgresSkipReason();
const EMAIL = 'users-api-e2e@example.com';

/** A tunnel through a node; resolves once the `200` came (with when it closes), else the refusal's status. */
function openTunnel(
  node: Daemon,
  target: string,
  user: string,
  password: string,
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
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}\r\n\r\n`,
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
      resolve({ socket: s, closedAt });
    };
    s.on('data', onData);
    s.on('close', () => resolve({ status: 0 }));
  });
}

describe.skipIf(skip !== null)(
  `proxy users over the API on two nodes on PostgreSQL${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let pg: PgCluster;
    const nodes: Daemon[] = [];
    let echo: net.Server;
    let target: string;
    let key: string;
    const passwords: string[] = [];

    async function api(
      node: Daemon,
      method: string,
      path: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) {
      const r = await fetch(`${node.api}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return {
        status: r.status,
        headers: r.headers,
        body: (await r.json()) as { code: number; message: string; data: any },
      };
    }

    /** A user made through the API (node 0), its password kept for the log scan. */
    async function user(username: string, extra: Record<string, unknown> = {}): Promise<string> {
      const r = await api(nodes[0]!, 'POST', PROXY_PATHS.users, { username, ...extra });
      expect(r.body.code, r.body.message).toBe(200);
      passwords.push(r.body.data.password);
      return r.body.data.password as string;
    }

    /** From `t0`, the ms until every node answers `user`'s CONNECT with `status`. */
    async function everyNode(
      username: string,
      password: string,
      status: number,
      t0: number,
      limitMs: number,
    ): Promise<number> {
      const times = await Promise.all(
        nodes.map(async (n) => {
          for (;;) {
            if ((await probe(n.httpProxy, target, { user: username, password })) === status)
              return performance.now() - t0;
            if (performance.now() - t0 > patient(limitMs))
              throw new Error(`${n.httpProxy}: ${username} not ${status} within ${limitMs} ms`);
            await sleep(20);
          }
        }),
      );
      return Math.max(...times);
    }

    beforeAll(async () => {
      pg = await startPostgres();
      await makeTemplate(pg.url);
      const first = await dataDirFor('postgres', pg.url);
      const { accountId } = await makeAccount(first, EMAIL);
      // The key as the console makes it, in the fleet's database.
      const store = await openStore({ dataDir: first, databaseUrl: databaseUrlOf(first) });
      try {
        const made = await new ApiKeyService(store).create(
          accountId,
          {
            name: 'e2e',
            scopes: ['users:read', 'users:write', 'rules:read', 'rules:write'],
            expiresAtMs: null,
            allowedIps: [],
          },
          { actor: { type: 'operator', id: 'test' }, sourceIp: null, requestId: null },
        );
        key = made.key;
      } finally {
        await store.close();
      }
      echo = await tcpEcho();
      target = addrOf(echo);
      const args = ['--allow-private-targets'];
      nodes.push(await startDaemon({ dataDir: first, args }));
      nodes.push(
        await startDaemon({
          dataDir: await dataDirFor('sqlite'),
          args: [...args, '--database-url', nodes[0]!.databaseUrl!],
        }),
      );
    }, patient(120_000));

    afterAll(async () => {
      for (const n of nodes) await n.stop();
      echo?.close();
      pg?.destroy();
    });

    it(
      'an idempotent create whose client gave up before the answer, sent again, makes its users once and gets the first answer',
      async () => {
        // A batch whose passwords take a while to hash: the client's timeout comes while the daemon works on it.
        const items = Array.from({ length: 40 }, (_, i) => ({
          username: `resent-${i}`,
          ...(i === 0 ? { password: 'resent-password-1' } : {}),
        }));
        passwords.push('resent-password-1');
        const body = JSON.stringify({ items });
        const [host, port] = new URL(nodes[0]!.api).host.split(':') as [string, string];
        const head = `POST ${PROXY_PATHS.usersBatch} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nIdempotency-Key: batch-resent-1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
        const answered = await new Promise<boolean>((resolve) => {
          const s = net.connect(Number(port), host, () => s.write(head + body));
          let got = false;
          s.on('data', () => (got = true));
          s.on('error', () => resolve(got));
          // The client's timeout: the connection dropped before any answer.
          setTimeout(() => {
            s.destroy();
            resolve(got);
          }, 150);
        });
        expect(answered, 'the daemon answered before the client gave up: nothing was simulated').toBe(false);
        // Sent again, to the other node (the fleet shares the key): it waits for the first one's answer, or finds it.
        const again = await api(
          nodes[1]!,
          'POST',
          PROXY_PATHS.usersBatch,
          { items },
          { 'idempotency-key': 'batch-resent-1' },
        );
        expect(again.body.code, again.body.message).toBe(200);
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(again.body.data.success_count).toBe(40);
        expect(again.body.data.created[0]).toEqual({ username: 'resent-0', password: 'resent-password-1' });
        for (const c of again.body.data.created as Array<{ password: string }>) passwords.push(c.password);
        const list = await api(nodes[1]!, 'GET', `${PROXY_PATHS.users}?q=resent-&page_size=100`);
        expect(list.body.data.total).toBe(40);
      },
      patient(30_000),
    );

    it(
      'a single create dropped right after it was sent, then sent again with its key: one user, the answer of the one that ran',
      async () => {
        const body = JSON.stringify({ username: 'resent-one', password: 'resent-one-password' });
        passwords.push('resent-one-password');
        const [host, port] = new URL(nodes[0]!.api).host.split(':') as [string, string];
        const head = `POST ${PROXY_PATHS.users} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nIdempotency-Key: create-resent-one\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
        for (const dropAfterMs of [0, 30]) {
          await new Promise<void>((resolve) => {
            const s = net.connect(Number(port), host, () =>
              s.write(head + body, () => setTimeout(() => (s.destroy(), resolve()), dropAfterMs)),
            );
            s.on('error', () => resolve());
          });
        }
        for (const n of nodes) {
          const again = await api(
            n,
            'POST',
            PROXY_PATHS.users,
            { username: 'resent-one', password: 'resent-one-password' },
            { 'idempotency-key': 'create-resent-one' },
          );
          expect(again.body.code, again.body.message).toBe(200);
          expect(again.body.data).toMatchObject({ username: 'resent-one', password: 'resent-one-password' });
        }
        expect((await api(nodes[1]!, 'GET', `${PROXY_PATHS.users}?q=resent-one`)).body.data.total).toBe(1);
      },
      patient(30_000),
    );

    it(
      'a user disabled mid-tunnel loses its tunnels on both nodes within 2 s; deleted, the same',
      async () => {
        const password = await user('tunneler');
        await everyNode('tunneler', password, 200, performance.now(), 10_000);
        for (const [change, path, body] of [
          ['disable', `${PROXY_PATHS.users}/tunneler`, { status: 'disabled' }],
          ['delete', `${PROXY_PATHS.users}/tunneler`, undefined],
        ] as const) {
          if (change === 'delete') {
            expect((await api(nodes[1]!, 'PATCH', path, { status: 'active' })).body.code).toBe(200);
            await everyNode('tunneler', password, 200, performance.now(), 5_000);
          }
          const tunnels = await Promise.all(nodes.map((n) => openTunnel(n, target, 'tunneler', password)));
          for (const t of tunnels) expect('socket' in t, JSON.stringify(t)).toBe(true);
          const t0 = performance.now();
          const r =
            change === 'disable' ? await api(nodes[0]!, 'PATCH', path, body) : await api(nodes[0]!, 'DELETE', path);
          expect(r.body.code, r.body.message).toBe(200);
          const closed = await Promise.all(tunnels.map((t) => (t as { closedAt: Promise<number> }).closedAt));
          const ms = Math.max(...closed) - t0;
          if (process.env.PROXYD_TEST_PRINT)
            console.log(JSON.stringify({ what: `tunnels closed after ${change}`, ms: Math.round(ms) }));
          expect(ms, change).toBeLessThan(2_000);
          // New ones are refused on both (407, as for wrong credentials).
          for (const n of nodes) expect(await probe(n.httpProxy, target, { user: 'tunneler', password })).toBe(407);
        }
      },
      patient(60_000),
    );

    it(
      'a rotated password is refused on both nodes within 1 s; the new one works',
      async () => {
        const old = await user('rotator');
        await everyNode('rotator', old, 200, performance.now(), 10_000);
        const t0 = performance.now();
        const r = await api(nodes[1]!, 'POST', `${PROXY_PATHS.users}/rotator/password`);
        expect(r.body.code).toBe(200);
        const fresh = r.body.data.password as string;
        passwords.push(fresh);
        const ms = await everyNode('rotator', old, 407, t0, 3_000);
        if (process.env.PROXYD_TEST_PRINT)
          console.log(JSON.stringify({ what: 'old password refused everywhere', ms: Math.round(ms) }));
        expect(ms).toBeLessThan(1_250); // 1 s, and a probe's own time
        for (const n of nodes) expect(await probe(n.httpProxy, target, { user: 'rotator', password: fresh })).toBe(200);
      },
      patient(30_000),
    );

    it(
      "a user's own deny list refuses its target (403, target_denied) while the account's other users go on; its own expiry refuses it",
      async () => {
        const denied = await user('denied', { deny: ['127.0.0.0/8'] });
        const free = await user('free');
        await everyNode('free', free, 200, performance.now(), 10_000);
        await everyNode('denied', denied, 403, performance.now(), 10_000);
        const logged = await admin(nodes[0]!.dataDir, ['connections', '--email', EMAIL, '--reason', 'target_denied']);
        expect(logged.stdout).toContain('"denied"');
        // Lifted: admitted again; an expiry in the past: refused like an expired plan, its open tunnel closed.
        expect((await api(nodes[0]!, 'PATCH', `${PROXY_PATHS.users}/denied`, { deny: [] })).body.code).toBe(200);
        await everyNode('denied', denied, 200, performance.now(), 3_000);
        const open = await openTunnel(nodes[1]!, target, 'denied', denied);
        expect('socket' in open).toBe(true);
        const t0 = performance.now();
        expect(
          (await api(nodes[0]!, 'PATCH', `${PROXY_PATHS.users}/denied`, { expires_at: '2026-01-01T00:00:00Z' })).body
            .code,
        ).toBe(200);
        await everyNode('denied', denied, 403, t0, 3_000);
        expect((await (open as { closedAt: Promise<number> }).closedAt) - t0).toBeLessThan(2_000);
        expect(await probe(nodes[1]!.httpProxy, target, { user: 'free', password: free })).toBe(200);
      },
      patient(60_000),
    );

    it('no proxy password in any log line', async () => {
      const logs = nodes.flatMap((n) => n.logs).join('\n');
      expect(logs.length).toBeGreaterThan(0);
      for (const p of passwords) expect(logs).not.toContain(p);
      expect(logs).not.toContain(key);
    });
  },
);

describe('proxy users over the API on one node on SQLite', () => {
  let node: Daemon;
  let echo: net.Server;
  let key: string;

  beforeAll(async () => {
    node = await startDaemon({
      args: ['--allow-private-targets', '--public-host', 'proxy.example.com', '--location', 'us:nyc'],
    });
    const { accountId } = await makeAccount(node.dataDir, 'users-api-sqlite@example.com');
    const made = await admin(node.dataDir, [
      'key',
      'create',
      '--email',
      'users-api-sqlite@example.com',
      '--name',
      'e2e',
      '--scopes',
      'users:read,users:write',
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(accountId).toBeGreaterThan(0);
    key = made.json.key;
    echo = await tcpEcho();
  }, patient(60_000));

  afterAll(async () => {
    await node?.stop();
    echo?.close();
  });

  it(
    'a disabled user loses its tunnel within 2 s; a rotated password is refused within 1 s; no password in the log',
    async () => {
      const call = async (method: string, path: string, body?: unknown) =>
        (
          await fetch(`${node.api}${path}`, {
            method,
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          })
        ).json() as Promise<{ code: number; data: any }>;
      const made = await call('POST', PROXY_PATHS.users, { username: 'solo' });
      expect(made.code).toBe(200);
      const password = made.data.password as string;
      const target = addrOf(echo);
      const t = await openTunnel(node, target, 'solo', password);
      expect('socket' in t, JSON.stringify(t)).toBe(true);
      const t0 = performance.now();
      expect((await call('PATCH', `${PROXY_PATHS.users}/solo`, { status: 'disabled' })).code).toBe(200);
      expect((await (t as { closedAt: Promise<number> }).closedAt) - t0).toBeLessThan(2_000);
      expect((await call('PATCH', `${PROXY_PATHS.users}/solo`, { status: 'active' })).code).toBe(200);
      const rotated = await call('POST', `${PROXY_PATHS.users}/solo/password`, {});
      const t1 = performance.now();
      for (;;) {
        if ((await probe(node.httpProxy, target, { user: 'solo', password })) === 407) break;
        expect(performance.now() - t1).toBeLessThan(patient(1_250));
        await sleep(20);
      }
      expect(await probe(node.httpProxy, target, { user: 'solo', password: rotated.data.password })).toBe(200);
      const logs = node.logs.join('\n');
      for (const p of [password, rotated.data.password, key]) expect(logs).not.toContain(p);
    },
    patient(30_000),
  );

  it("GET /proxy/gateway: the listeners as customers reach them (--public-host with the bound ports), UDP, the node's location", async () => {
    const r = (await (
      await fetch(`${node.api}${PROXY_PATHS.gateway}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { code: number; data: unknown };
    const port = (hp: string) => hp.split(':')[1];
    expect(r).toMatchObject({
      code: 200,
      data: {
        http: `proxy.example.com:${port(node.httpProxy)}`,
        socks5: `proxy.example.com:${port(node.socks)}`,
        udp: true,
        locations: [{ country: 'us', cities: ['nyc'], exits: 1 }],
      },
    });
  });

  it('the operator sets the same expiry and rules (proxyd admin proxy-user set); the API shows them; a bad item exits 1, nothing changed', async () => {
    const email = 'users-api-sqlite@example.com';
    expect(
      (
        await fetch(`${node.api}${PROXY_PATHS.users}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: '{"username":"operated"}',
        })
      ).status,
    ).toBe(200);
    const set = await admin(node.dataDir, [
      'proxy-user',
      'set',
      '--email',
      email,
      '--username',
      'operated',
      '--expires',
      '2027-01-01T00:00:00Z',
      '--deny',
      'Ads.Example,10.0.0.0/8',
      '--max-connections',
      '3',
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.json).toEqual({
      username: 'operated',
      traffic_limit: null,
      max_connections: 3,
      rate_limit: null,
      expires_at: '2027-01-01T00:00:00Z',
      allow: [],
      deny: ['ads.example', '10.0.0.0/8'],
    });
    const bad = await admin(node.dataDir, [
      'proxy-user',
      'set',
      '--email',
      email,
      '--username',
      'operated',
      '--allow',
      'ok.example,not a name',
      '--expires',
      'never',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--allow');
    expect(bad.stderr).toContain('not a name');
    const shown = (await (
      await fetch(`${node.api}${PROXY_PATHS.users}/operated`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { data: Record<string, unknown> };
    expect(shown.data).toMatchObject({
      max_connections: 3,
      expires_at: '2027-01-01T00:00:00Z',
      allow: [],
      deny: ['ads.example', '10.0.0.0/8'],
    });
  });
});
