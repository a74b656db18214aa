// Usage metering against a spawned proxyd with a ground truth (SPEC 11): a target that takes exactly U bytes
// and answers exactly D; the meter must say U and D for the right user, while the tunnel is open and after,
// through CONNECT, SOCKS5 and forwarded HTTP; a session username counts for its base user, whitelist traffic
// for the account under the entry's IP; a node killed with SIGKILL loses at most its last second.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, makeAccount, startDaemon, waitForProxyUsers, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'metering-password-1';

/** Reads exactly `up` bytes from each connection, then writes `down` bytes and closes. */
async function exactTarget(up: number, down: number): Promise<net.Server> {
  const server = net.createServer((s) => {
    let got = 0;
    s.on('data', (b) => {
      got += b.length;
      if (got === up) s.end(Buffer.alloc(down, 0x61));
    });
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

interface UsageJson {
  rows: Array<{ user: string; bytes_up: number; bytes_down: number; connections: number }>;
  total: { bytes_up: number; bytes_down: number; connections: number };
}

describe('usage metering (SQLite, one node)', () => {
  let d: Daemon;
  const servers: net.Server[] = [];
  const email = 'meter@example.com';

  async function usage(extra: string[] = []): Promise<UsageJson> {
    const r = await admin(d.dataDir, ['usage', '--email', email, ...extra]);
    expect(r.code, r.stderr).toBe(0);
    return r.json as UsageJson;
  }
  const rowOf = async (user: string) =>
    (await usage()).rows.find((r) => r.user === user) ?? { bytes_up: 0, bytes_down: 0, connections: 0 };

  beforeAll(async () => {
    d = await startDaemon({ args: ['--allow-private-targets', '--proxy-protocol-from', '127.0.0.1/32'] });
    const { token } = await makeAccount(d.dataDir, email);
    for (const u of ['tunnel-user', 'socks-user', 'http-user', 'open-user', 'sticky']) {
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', email, '--username', u, '--password-stdin'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
    }
    const add = await fetch(`${d.api}/openapi/v1/proxy/whitelist/add?api_key=${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ ip: '8.8.4.4' }] }),
    });
    expect(((await add.json()) as { code: number }).code).toBe(200);
    await sleep(300);
  }, patient(60_000));
  afterAll(async () => {
    for (const s of servers) s.close();
    await d?.stop();
  });

  const httpPort = () => Number(d.httpProxy.split(':')[1]);

  /** CONNECT through the gateway (optionally behind a PROXY header), send `up` bytes, read everything back. */
  async function connectTunnel(target: net.Server, up: number, auth: string | null, source?: string): Promise<number> {
    const c = await RawClient.connect(httpPort());
    const port = (target.address() as net.AddressInfo).port;
    c.write(
      `${source ? `PROXY TCP4 ${source} 127.0.0.1 40000 ${httpPort()}\r\n` : ''}CONNECT 127.0.0.1:${port} HTTP/1.1\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`,
    );
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    c.write(Buffer.alloc(up, 0x62));
    return (await c.readToEnd(10_000)).length;
  }

  it('a CONNECT tunnel carrying U up and D down meters exactly U and D for its user', async () => {
    const [U, D] = [1_234_567, 2_345_678];
    const t = await exactTarget(U, D);
    servers.push(t);
    expect(await connectTunnel(t, U, basic('tunnel-user', PASSWORD))).toBe(D);
    const row = await waitFor(
      'usage flushed',
      async () => {
        const r = await rowOf('tunnel-user');
        return r.bytes_down === D ? r : null;
      },
      5_000,
    );
    expect(row).toMatchObject({ bytes_up: U, bytes_down: D, connections: 1 });
  });

  it('SOCKS5 the same', async () => {
    const [U, D] = [777_777, 99_999];
    const t = await exactTarget(U, D);
    servers.push(t);
    const c = await RawClient.connect(Number(d.socks.split(':')[1]));
    c.write(Buffer.from([5, 1, 2]));
    await c.read(2);
    const user = Buffer.from('socks-user');
    const pass = Buffer.from(PASSWORD);
    c.write(Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]));
    expect([...(await c.read(2))]).toEqual([1, 0]);
    const port = (t.address() as net.AddressInfo).port;
    c.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, port >> 8, port & 255]));
    expect((await c.read(10))[1]).toBe(0);
    c.write(Buffer.alloc(U, 1));
    expect((await c.readToEnd(10_000)).length).toBe(D);
    const row = await waitFor(
      'usage flushed',
      async () => {
        const r = await rowOf('socks-user');
        return r.bytes_down === D ? r : null;
      },
      5_000,
    );
    expect(row).toMatchObject({ bytes_up: U, bytes_down: D, connections: 1 });
  });

  it('forwarded HTTP: the request and response as sent, heads included', async () => {
    const body = 'x'.repeat(10_000);
    const answer = 'y'.repeat(50_000);
    const origin = net.createServer((s) => {
      let got = '';
      s.on('data', (b) => {
        got += b.toString('latin1');
        if (got.includes('\r\n\r\n') && got.length >= got.indexOf('\r\n\r\n') + 4 + body.length) {
          s.end(`HTTP/1.1 200 OK\r\nContent-Length: ${answer.length}\r\n\r\n${answer}`);
        }
      });
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
    servers.push(origin);
    const port = (origin.address() as net.AddressInfo).port;
    const c = await RawClient.connect(httpPort());
    c.write(
      `POST http://127.0.0.1:${port}/up HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Authorization: ${basic('http-user', PASSWORD)}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    const whole = (await c.readToEnd(10_000)).toString('latin1');
    expect(whole.endsWith(answer)).toBe(true);
    const row = await waitFor(
      'usage flushed',
      async () => {
        const r = await rowOf('http-user');
        return r.bytes_down > 0 ? r : null;
      },
      5_000,
    );
    // Up: the request as sent to the origin (its rewritten head and the body); down: the response as sent to the client.
    expect(row.bytes_up).toBeGreaterThan(body.length);
    expect(row.bytes_up).toBeLessThan(body.length + 1_000);
    expect(row.bytes_down).toBe(whole.length);
  });

  it("an open tunnel's bytes show within 5 s, while it is still open", async () => {
    const echo = net.createServer((s) => s.on('error', () => {}).pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    servers.push(echo);
    const c = await RawClient.connect(httpPort());
    c.write(
      `CONNECT 127.0.0.1:${(echo.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('open-user', PASSWORD)}\r\n\r\n`,
    );
    await c.readUntil('\r\n\r\n');
    const N = 3_000_000;
    c.write(Buffer.alloc(N, 2));
    await c.read(N, 10_000);
    const t0 = Date.now();
    const row = await waitFor(
      'open tunnel metered',
      async () => {
        const r = await rowOf('open-user');
        return r.bytes_up === N && r.bytes_down === N ? r : null;
      },
      5_000,
    );
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(row.connections).toBe(1);
    expect(c.closed).toBe(false);
    c.socket.destroy();
  });

  it('a session username counts for its base user; whitelist traffic for the account under the IP', async () => {
    const t = await exactTarget(1_000, 2_000);
    servers.push(t);
    expect(await connectTunnel(t, 1_000, basic('sticky-session-abc-sesstime-5', PASSWORD))).toBe(2_000);
    expect(await connectTunnel(t, 1_000, null, '8.8.4.4')).toBe(2_000);
    const rows = await waitFor(
      'both flushed',
      async () => {
        const u = await usage();
        const s = u.rows.find((r) => r.user === 'sticky');
        const ip = u.rows.find((r) => r.user === 'ip:8.8.4.4');
        return s && ip && s.bytes_down === 2_000 && ip.bytes_down === 2_000 ? { s, ip, all: u.rows } : null;
      },
      5_000,
    );
    expect(rows.s).toMatchObject({ bytes_up: 1_000, bytes_down: 2_000, connections: 1 });
    expect(rows.ip).toMatchObject({ bytes_up: 1_000, bytes_down: 2_000, connections: 1 });
    expect(rows.all.map((r) => r.user)).not.toContain('sticky-session-abc-sesstime-5');
  });

  it('admin usage: by time, CSV and table; the total is the sum of the rows', async () => {
    const byHour = await usage(['--by', 'hour']);
    const byUser = await usage();
    expect(byHour.total).toEqual(byUser.total);
    expect(byHour.rows.length).toBeGreaterThan(0);
    expect(Object.keys(byHour.rows[0]!)).toEqual(['time', 'bytes_up', 'bytes_down', 'connections']);
    const sum = byUser.rows.reduce((a, r) => a + r.bytes_down, 0);
    expect(byUser.total.bytes_down).toBe(sum);
    const csv = await admin(d.dataDir, ['usage', '--email', email, '--format', 'csv']);
    expect(csv.stdout.split('\r\n')[0]).toBe('user,bytes_up,bytes_down,connections');
    expect(csv.stdout).toContain(
      `total,${byUser.total.bytes_up},${byUser.total.bytes_down},${byUser.total.connections}`,
    );
    const bad = await admin(d.dataDir, ['usage', '--email', email, '--from', 'yesterday']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--from: expected an ISO time/);
  });
});

describe('usage metering: a node killed with SIGKILL', () => {
  it(
    'loses at most its last second of usage',
    async () => {
      const d = await startDaemon({ args: ['--allow-private-targets'] });
      const email = 'kill@example.com';
      await makeAccount(d.dataDir, email);
      await admin(
        d.dataDir,
        ['proxy-user', 'create', '--email', email, '--username', 'streamer', '--password-stdin'],
        `${PASSWORD}\n`,
      );
      await waitForProxyUsers(d, 1);
      const sinkServer = net.createServer((s) => s.on('data', () => {}).on('error', () => {}));
      await new Promise<void>((r) => sinkServer.listen(0, '127.0.0.1', () => r()));
      try {
        const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
        c.write(
          `CONNECT 127.0.0.1:${(sinkServer.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('streamer', PASSWORD)}\r\n\r\n`,
        );
        expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
        // Send 64 KiB every 20 ms for 3.5 s, noting when each chunk was fully handed to the kernel.
        const sent: Array<{ at: number; total: number }> = [];
        let total = 0;
        const until = Date.now() + 3_500;
        while (Date.now() < until) {
          const chunk = Buffer.alloc(65_536, 3);
          await new Promise<void>((r) => c.socket.write(chunk, () => r()));
          total += chunk.length;
          sent.push({ at: Date.now(), total });
          await sleep(20);
        }
        await sleep(100); // the last chunks reach the gateway
        const killedAt = Date.now();
        d.proc.kill('SIGKILL');
        await d.exited;
        c.socket.destroy();
        const r = await admin(d.dataDir, ['usage', '--email', email]);
        const metered = (r.json as UsageJson).rows.find((x) => x.user === 'streamer')?.bytes_up ?? 0;
        // Everything sent more than a second (plus the flush's own time) before the kill was metered.
        const before = [...sent].reverse().find((s) => s.at <= killedAt - 1_300)?.total ?? 0;
        expect(before).toBeGreaterThan(0);
        expect(metered).toBeGreaterThanOrEqual(before);
        expect(metered).toBeLessThanOrEqual(total);
      } finally {
        sinkServer.close();
      }
    },
    patient(30_000),
  );
});
