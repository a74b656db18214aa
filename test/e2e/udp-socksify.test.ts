// SOCKS5 UDP with real programs, as docs/gateway.md's recipe has a user run them: Debian's socksify (dante-client)
// running drill (ldnsutils) against dnsmasq on loopback, through a spawned proxyd with an egress address of its
// own. The recipe's block is run as written, with only its placeholders filled (this gateway's address and port,
// the user and password, a resolver on 127.0.0.1 and its port), and it must provably go through the gateway, as the
// docs say to tell: the association's socks5-udp record with its datagrams, and the resolver seeing the query
// from the gateway's egress address (127.0.0.2), not from the client's (socksify routes loopback directly unless
// told not to: the recipe once answered correctly without ever touching the gateway). Skipped, saying which, when
// one of the three programs is not installed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, admin, dataDirFor, makeAccount, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { freeUdpPort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const has = (cmd: string) =>
  spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0 ||
  spawnSync('sh', ['-c', `test -x /usr/sbin/${cmd}`]).status === 0;
const missing = ['socksify', 'drill', 'dnsmasq'].filter((c) => !has(c));
const PASSWORD = 'udp-socksify-pass-1';
const EGRESS = '127.0.0.2';

/** docs/gateway.md's socksify recipe, the block as written. */
function recipe(): string {
  const doc = readFileSync(path.join(ROOT, 'docs/gateway.md'), 'utf8');
  const block = /<!-- socksify-recipe:[^>]*-->\n```sh\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('docs/gateway.md has no socksify-recipe block');
  return block;
}

/** One DNS query for ready.test (not the recipe's name) straight to the server: true when it answers within 500 ms. */
async function askDirect(port: number): Promise<true | undefined> {
  const { default: dgram } = await import('node:dgram');
  const s = dgram.createSocket('udp4');
  const q = Buffer.from(
    '12340100000100000000000005' +
      Buffer.from('ready').toString('hex') +
      '04' +
      Buffer.from('test').toString('hex') +
      '0000010001',
    'hex',
  );
  try {
    return await new Promise<true | undefined>((resolve) => {
      s.once('message', () => resolve(true));
      s.send(q, port, '127.0.0.1');
      setTimeout(() => resolve(undefined), 500);
    });
  } finally {
    s.close();
  }
}

describe.skipIf(missing.length > 0)(
  `docs/gateway.md's socksify + drill recipe through the gateway${missing.length ? ` (skipped: ${missing.join(', ')} not installed)` : ''}`,
  () => {
    let d: Daemon;
    let dns: ChildProcess;
    let dnsPort: number;
    let dnsLog: string;
    beforeAll(async () => {
      const dataDir = await dataDirFor('sqlite');
      await makeAccount(dataDir, 'udp@example.com');
      // The recipe's user.
      const made = await admin(
        dataDir,
        ['proxy-user', 'create', '--email', 'udp@example.com', '--username', 'alice', '--password-stdin'],
        `${PASSWORD}\n`,
      );
      expect(made.code, made.stderr).toBe(0);
      d = await startDaemon({ dataDir, args: ['--allow-private-targets', '--egress-address', EGRESS] });
      dnsPort = await freeUdpPort();
      dnsLog = path.join(tempDir('proxyd-dnsmasq-'), 'queries.log');
      const dnsmasq = spawnSync('sh', ['-c', 'command -v dnsmasq']).status === 0 ? 'dnsmasq' : '/usr/sbin/dnsmasq';
      dns = spawn(
        dnsmasq,
        [
          '--no-daemon',
          `--port=${dnsPort}`,
          '--listen-address=127.0.0.1',
          '--bind-interfaces',
          '--no-resolv',
          '--no-hosts',
          '--address=/example.com/192.0.2.7',
          '--user=root',
          '--pid-file=',
          '--log-queries',
          `--log-facility=${dnsLog}`,
        ],
        { stdio: 'ignore' },
      );
      // Ready when it answers a query sent straight to it.
      await waitFor('dnsmasq answers', () => askDirect(dnsPort), 10_000);
    });
    afterAll(async () => {
      dns?.kill();
      await d?.stop();
    });

    it('the recipe as written gets its answer through the gateway: a socks5-udp record, and the query comes from the egress address', async () => {
      const script = recipe()
        .replace('gw.example.net', '127.0.0.1')
        .replace('port = 1080', `port = ${d.socks.split(':')[1]}`)
        .replace('<PASSWORD>', PASSWORD)
        // The one change to the command: a resolver on this host (the case that once went around the gateway).
        .replace('@9.9.9.9', `-p ${dnsPort} @127.0.0.1`);
      expect(script).toContain('SOCKS_AUTOADD_LANROUTES=no');
      const cwd = tempDir('proxyd-socksify-');
      const drill = () => {
        const r = spawnSync('sh', ['-c', script], { cwd, encoding: 'utf8', timeout: 20_000 });
        return `${r.stdout}${r.stderr}`;
      };
      // UDP may lose a datagram on a loaded machine (drill gives up after its own timeout): asked up to 3 times.
      let out = '';
      for (let i = 0; i < 3 && !/192\.0\.2\.7/.test(out); i++) out = drill();
      expect(out).toMatch(/example\.com\.\s+\d+\s+IN\s+A\s+192\.0\.2\.7/);

      // How the docs say to tell: the record, the resolver's view of the source, the metrics.
      const rec = await waitFor(
        "the association's record",
        async () => {
          const r = await admin(d.dataDir, ['connections', '--user', 'alice', '--since', '5m']);
          const rows = r.stdout
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Record<string, unknown>);
          return rows.find((x) => x.protocol === 'socks5-udp');
        },
        10_000,
      );
      expect(rec).toMatchObject({ protocol: 'socks5-udp', decision: 'admitted', account: 'udp@example.com' });
      expect(rec.datagrams_up).toBeGreaterThanOrEqual(1);
      expect(rec.datagrams_down).toBeGreaterThanOrEqual(1);
      expect(rec.bytes_up).toBeGreaterThan(0);
      const queries = await waitFor(
        "the resolver's log",
        () => readFileSync(dnsLog, 'utf8').match(/query\[A\] example\.com from \S+/g),
        5_000,
      );
      expect(new Set(queries)).toEqual(new Set([`query[A] example.com from ${EGRESS}`]));
      const metrics = await (await fetch(`${d.api}/metrics`)).text();
      expect(Number(/^proxyd_udp_datagrams_total\{direction="up"\} (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(
        1,
      );
      expect(
        Number(/^proxyd_udp_datagrams_total\{direction="down"\} (\d+)/m.exec(metrics)?.[1]),
      ).toBeGreaterThanOrEqual(1);
    });
  },
);
