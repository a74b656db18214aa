// Target rules on real daemons: `proxyd admin policy` (lists replaced, kept, emptied; a bad item exits 1 naming
// it and nothing changes), the refusal and its connection-log record, and a change made through one database
// reaching a second node on the same PostgreSQL within 1 s.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'rules-user-password-1';

/** CONNECT through a daemon: the status line's code and the head. */
function connect(d: Daemon, target: string, user: string): Promise<{ status: number; head: string }> {
  const [host, port] = d.httpProxy.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    s.setTimeout(5_000, () => {
      s.destroy();
      reject(new Error(`no answer: ${buf}`));
    });
    s.on('error', reject);
    s.on('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    s.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.destroy();
      resolve({ status: Number(buf.slice(9, 12)), head: buf.slice(0, end) });
    });
  });
}

async function echoTarget(): Promise<net.Server> {
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}
const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;

describe('target rules with proxyd admin policy (SQLite)', () => {
  let dir: string;
  let d: Daemon;
  let target: net.Server;

  beforeAll(async () => {
    dir = await dataDirFor('sqlite');
    await makeAccount(dir, 'rules-a@example.com');
    await makeAccount(dir, 'rules-b@example.com');
    for (const [email, user] of [
      ['rules-a@example.com', 'rua'],
      ['rules-b@example.com', 'rub'],
    ]) {
      const r = await admin(
        dir,
        ['proxy-user', 'create', '--email', email!, '--username', user!, '--password-stdin'],
        `${PASSWORD}\n`,
      );
      expect(r.code, r.stderr).toBe(0);
    }
    target = await echoTarget();
    d = await startDaemon({ dataDir: dir, args: ['--allow-private-targets'] });
  });
  afterAll(async () => {
    await d?.stop();
    target?.close();
  });

  it('set, keep, empty; a bad item exits 1 naming it and nothing changes', async () => {
    const set = await admin(dir, [
      'policy',
      'set',
      '--email',
      'rules-a@example.com',
      '--deny',
      'Blocked.Example.,10.0.0.0/8',
      '--allow',
      'none',
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.json).toEqual({
      scope: 'account',
      email: 'rules-a@example.com',
      deny: ['blocked.example', '10.0.0.0/8'],
      allow: [],
    });
    // --allow given alone keeps --deny.
    expect(
      (await admin(dir, ['policy', 'set', '--email', 'rules-a@example.com', '--allow', '*.ok.example'])).json.deny,
    ).toEqual(['blocked.example', '10.0.0.0/8']);
    const bad = await admin(dir, [
      'policy',
      'set',
      '--email',
      'rules-a@example.com',
      '--deny',
      'fine.example,bad..example,10.1.2.3/8',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('"bad..example": not a domain name');
    expect(bad.stderr).toContain('"10.1.2.3/8": host bits set (the network is 10.0.0.0/8)');
    expect(bad.stderr).toContain('nothing changed');
    expect((await admin(dir, ['policy', 'show', '--email', 'rules-a@example.com'])).json).toEqual({
      scope: 'account',
      email: 'rules-a@example.com',
      deny: ['blocked.example', '10.0.0.0/8'],
      allow: ['*.ok.example'],
    });
    const global = await admin(dir, ['policy', 'set', '--global', '--allow', 'x.example']);
    expect(global.code).toBe(1);
    expect(global.stderr).toContain('deny list only');
    expect(
      (await admin(dir, ['policy', 'set', '--email', 'rules-a@example.com', '--deny', 'none', '--allow', 'none'])).json,
    ).toEqual({
      scope: 'account',
      email: 'rules-a@example.com',
      deny: [],
      allow: [],
    });
    expect((await admin(dir, ['policy', 'show', '--global'])).json).toEqual({ scope: 'service', deny: [] });
    expect((await admin(dir, ['policy', 'set', '--email', 'nobody@example.com', '--deny', 'x.example'])).code).toBe(1);
  });

  it("refused with 403 and the account text, logged target_denied; the service's rule first; another account unaffected", async () => {
    const addr = `127.0.0.1:${portOf(target)}`;
    expect((await connect(d, addr, 'rua')).status).toBe(200);
    expect((await admin(dir, ['policy', 'set', '--email', 'rules-a@example.com', '--deny', '127.0.0.0/8'])).code).toBe(
      0,
    );
    let r = { status: 0, head: '' };
    for (let i = 0; i < 40 && r.status !== 403; i++) {
      r = await connect(d, addr, 'rua');
      if (r.status !== 403) await sleep(50);
    }
    expect(r.head).toContain(
      'Proxy-Status: proxyd; error=http_request_denied; details="target denied by account policy"',
    );
    // A name resolving into the network (localhost, from /etc/hosts) is refused before it is dialled.
    expect((await connect(d, `localhost:${portOf(target)}`, 'rua')).status).toBe(403);
    expect((await connect(d, addr, 'rub')).status).toBe(200);
    expect((await admin(dir, ['policy', 'set', '--global', '--deny', '127.0.0.1'])).code).toBe(0);
    await sleep(500);
    const svc = await connect(d, addr, 'rua');
    expect(svc.head).toContain('details="target denied by service policy"');
    expect((await connect(d, addr, 'rub')).status).toBe(403);
    await sleep(1_500); // the connection log is written in batches
    const logged = await admin(dir, ['connections', '--email', 'rules-a@example.com', '--reason', 'target_denied']);
    expect(logged.code, logged.stderr).toBe(0);
    expect(
      logged.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).reason),
    ).toContain('target_denied');
    const service = await admin(dir, ['connections', '--reason', 'target_denied_service']);
    expect(service.stdout).toContain('"target_denied_service"');
    expect((await admin(dir, ['policy', 'set', '--global', '--deny', 'none'])).code).toBe(0);
  });
});

const skip = postgresSkipReason();

describe.skipIf(skip !== null)(
  `target rules across two nodes on one PostgreSQL${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let pg: PgCluster;
    let first: string;
    const nodes: Daemon[] = [];
    let target: net.Server;

    beforeAll(async () => {
      pg = await startPostgres();
      await makeTemplate(pg.url);
      first = await dataDirFor('postgres', pg.url);
      await makeAccount(first, 'fleet-rules@example.com');
      expect(
        (
          await admin(
            first,
            ['proxy-user', 'create', '--email', 'fleet-rules@example.com', '--username', 'fru', '--password-stdin'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      target = await echoTarget();
      nodes.push(await startDaemon({ dataDir: first, args: ['--allow-private-targets'] }));
      nodes.push(
        await startDaemon({
          dataDir: await dataDirFor('sqlite'),
          args: ['--allow-private-targets', '--database-url', nodes[0]!.databaseUrl!],
        }),
      );
    }, patient(60_000));
    afterAll(async () => {
      for (const n of nodes) await n.stop();
      target?.close();
      await pg?.stop();
    });

    it('a rule set through the database applies on the second node within 1 s, and its removal too', async () => {
      const addr = `127.0.0.1:${portOf(target)}`;
      const second = nodes[1]!;
      expect((await connect(second, addr, 'fru')).status).toBe(200);
      for (const [deny, want] of [
        ['127.0.0.0/8', 403],
        ['none', 200],
      ] as const) {
        const r = await admin(first, ['policy', 'set', '--email', 'fleet-rules@example.com', '--deny', deny]);
        expect(r.code, r.stderr).toBe(0);
        const t0 = performance.now();
        let status = 0;
        while (status !== want && performance.now() - t0 < 3_000) {
          status = (await connect(second, addr, 'fru')).status;
          if (status !== want) await sleep(20);
        }
        expect(status).toBe(want);
        expect(performance.now() - t0).toBeLessThan(patient(1_000));
      }
    });
  },
);
