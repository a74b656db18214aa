// Webhooks across a fleet: three daemons on one PostgreSQL all detect and all deliver, yet the receiver gets each
// event exactly once (recorded once by its key, sent by the node that claimed it).
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, waitForProxyUsers, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'fleet-hook-pass-1';
const EMAIL = 'fleet-hooks@example.com';

describe('webhooks on a fleet (PostgreSQL, three nodes)', () => {
  const nodes: Daemon[] = [];
  let receiver: http.Server;
  let target: net.Server;
  const got: Array<{ id: string; body: string }> = [];

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push({ id: String(req.headers['proxyd-event-id']), body });
        res.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    target = net.createServer((s) => {
      s.on('data', () => {});
      s.on('end', () => s.end(Buffer.alloc(70_000, 0x61)));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    const first = await dataDirFor('postgres');
    await makeAccount(first, EMAIL);
    expect(
      (
        await admin(
          first,
          ['proxy-user', 'create', '--email', EMAIL, '--username', 'fleet-user', '--password-stdin'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    expect(
      (await admin(first, ['plan', 'set', '--email', EMAIL, '--traffic-limit', '100000', '--period', 'day'])).code,
    ).toBe(0);
    const url = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`;
    expect(
      (
        await admin(first, [
          'webhook',
          'set',
          '--email',
          EMAIL,
          '--url',
          url,
          '--thresholds',
          '20,50,60',
          '--allow-private-webhooks',
        ])
      ).code,
    ).toBe(0);
    const args = ['--allow-private-targets', '--allow-private-webhooks'];
    nodes.push(await startDaemon({ dataDir: first, args }));
    for (let i = 1; i < 3; i++)
      nodes.push(
        await startDaemon({
          dataDir: await dataDirFor('sqlite'),
          args: [...args, '--database-url', nodes[0]!.databaseUrl!],
        }),
      );
    await waitForProxyUsers(nodes[0]!, 1);
  }, patient(90_000));
  afterAll(async () => {
    for (const n of nodes) await n.stop();
    receiver?.close();
    target?.close();
  });

  it(
    'each event once, whichever node detects and sends it',
    async () => {
      const c = await RawClient.connect(Number(nodes[1]!.httpProxy.split(':')[1]));
      c.write(
        `CONNECT 127.0.0.1:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('fleet-user', PASSWORD)}\r\n\r\n`,
      );
      expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
      c.socket.end();
      expect((await c.readToEnd(10_000)).length).toBe(70_000);
      await waitFor('three events', () => got.length >= 3, 10_000);
      await sleep(4_000); // every node has detected and claimed several times over
      expect(got.map((g) => JSON.parse(g.body).threshold).sort((a, b) => a - b)).toEqual([20, 50, 60]);
      expect(new Set(got.map((g) => g.id)).size).toBe(3);
      const list = await admin(nodes[0]!.dataDir, ['webhooks', '--email', EMAIL]);
      expect(
        list.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).state),
      ).toEqual(['delivered', 'delivered', 'delivered']);
    },
    patient(60_000),
  );
});
