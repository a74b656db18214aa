// SOCKS5 UDP with real programs: Debian's socksify (dante-client) running drill (ldnsutils; dig sends with
// sendmmsg, which socksify does not catch) against dnsmasq on loopback, through a spawned proxyd. The answer
// comes back, the gateway counted the datagrams (so they did cross it), and the association's record says
// socks5-udp with its datagrams. Skipped, saying which, when one of the three programs is not installed.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { freeUdpPort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0 || spawnSync('sh', ['-c', `test -x /usr/sbin/${cmd}`]).status === 0;
const missing = ['socksify', 'drill', 'dnsmasq'].filter((c) => !has(c));
const PASSWORD = 'udp-socksify-pass-1';

/** One DNS query for example.test straight to the server (no proxy): true when it answers within 500 ms. */
async function askDirect(port: number): Promise<true | undefined> {
  const { default: dgram } = await import('node:dgram');
  const s = dgram.createSocket('udp4');
  const q = Buffer.from('123401000001000000000000076578616d706c65047465737400000' + '10001', 'hex');
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

describe.skipIf(missing.length > 0)(`socksify + drill + dnsmasq through the gateway${missing.length ? ` (skipped: ${missing.join(', ')} not installed)` : ''}`, () => {
  let d: Daemon;
  let dns: ChildProcess;
  let dnsPort: number;
  beforeAll(async () => {
    const dataDir = await dataDirFor('sqlite');
    await makeAccount(dataDir, 'udp@example.com');
    const made = await admin(dataDir, ['proxy-user', 'create', '--email', 'udp@example.com', '--username', 'udpuser', '--password-stdin'], `${PASSWORD}\n`);
    expect(made.code, made.stderr).toBe(0);
    d = await startDaemon({ dataDir, args: ['--allow-private-targets'] });
    dnsPort = await freeUdpPort();
    const dnsmasq = spawnSync('sh', ['-c', 'command -v dnsmasq']).status === 0 ? 'dnsmasq' : '/usr/sbin/dnsmasq';
    dns = spawn(dnsmasq, ['--no-daemon', `--port=${dnsPort}`, '--listen-address=127.0.0.1', '--bind-interfaces', '--no-resolv', '--no-hosts', '--address=/example.test/192.0.2.7', '--user=root', '--pid-file='], { stdio: 'ignore' });
    // Ready when it answers a query sent straight to it.
    await waitFor('dnsmasq answers', () => askDirect(dnsPort), 10_000);
  });
  afterAll(async () => {
    dns?.kill();
    await d?.stop();
  });

  it('drill gets its answer over UDP ASSOCIATE; the gateway relayed it and recorded the association', async () => {
    const conf = path.join(tempDir('proxyd-socksify-'), 'socks.conf');
    writeFileSync(conf, `route {\n  from: 0.0.0.0/0 to: 0.0.0.0/0 via: 127.0.0.1 port = ${d.socks.split(':')[1]}\n  proxyprotocol: socks_v5\n  method: username\n  command: udpassociate connect\n}\n`);
    const drill = () =>
      new Promise<string>((resolve) =>
        execFile('socksify', ['drill', '-p', String(dnsPort), '@127.0.0.1', 'example.test', 'A'], {
          // No automatic direct routes for loopback and local networks: the query must go through the gateway.
          env: { ...process.env, SOCKS_CONF: conf, SOCKS_USERNAME: 'udpuser', SOCKS_PASSWORD: PASSWORD, SOCKS_AUTOADD_LANROUTES: 'no' },
          timeout: 20_000,
        }, (_e, stdout, stderr) => resolve(`${stdout}${stderr}`)),
      );
    // UDP may lose a datagram on a loaded machine (drill gives up after its own timeout): asked up to 3 times.
    let out = '';
    for (let i = 0; i < 3 && !/192\.0\.2\.7/.test(out); i++) out = await drill();
    expect(out).toMatch(/example\.test\.\s+\d+\s+IN\s+A\s+192\.0\.2\.7/);
    const metrics = await (await fetch(`${d.api}/metrics`)).text();
    expect(Number(/^proxyd_udp_datagrams_total\{direction="up"\} (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(/^proxyd_udp_datagrams_total\{direction="down"\} (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    const rec = await waitFor('the association\'s record', async () => {
      const r = await admin(d.dataDir, ['connections', '--user', 'udpuser']);
      const rows = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      return rows.find((x) => x.protocol === 'socks5-udp');
    }, 10_000);
    expect(rec).toMatchObject({ protocol: 'socks5-udp', decision: 'admitted', account: 'udp@example.com' });
    expect(rec.datagrams_up).toBeGreaterThanOrEqual(1);
    expect(rec.datagrams_down).toBeGreaterThanOrEqual(1);
    expect(rec.bytes_up).toBeGreaterThan(0);
  });
});
