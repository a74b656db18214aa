// `proxyd health` (a container's HEALTHCHECK, a unit's start-up wait): exit 0 when the daemon on the API address
// `serve` would use (flag, PROXYD_API_LISTEN, default) answers GET /healthz with 200 {"status":"ok"}; 1 when it
// answers anything else (another server's 200 too) or nothing answers, saying which; 2 for a bad flag. `--wait`
// keeps asking until the daemon serves.
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { probeAddress } from '../../src/daemon/process/health-probe.js';
import { buildProgram } from '../../src/daemon/process/main.js';
import { PROXYD, run, startDaemon, type Daemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';

const hostPort = (d: Daemon) => d.api.replace(/^http:\/\//, '');

describe('proxyd health', () => {
  const daemons: Daemon[] = [];
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
  });

  it('asks a wildcard listen address on loopback, any other as given', () => {
    expect(probeAddress({ host: '0.0.0.0', port: 8080 })).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(probeAddress({ host: '::', port: 8080 })).toEqual({ host: '::1', port: 8080 });
    expect(probeAddress({ host: '0:0::0', port: 1 })).toEqual({ host: '::1', port: 1 });
    expect(probeAddress({ host: '127.0.0.2', port: 8080 })).toEqual({ host: '127.0.0.2', port: 8080 });
    expect(probeAddress({ host: 'localhost', port: 8080 })).toEqual({ host: 'localhost', port: 8080 });
  });

  it('reads the API address as serve does: the same flag, variable and default', () => {
    const option = (command: string) =>
      buildProgram()
        .commands.find((c) => c.name() === command)!
        .options.find((o) => o.long === '--api-listen')!;
    expect(option('health')).toMatchObject({ envVar: 'PROXYD_API_LISTEN', defaultValue: '127.0.0.1:8080' });
    expect([option('health').envVar, option('health').defaultValue]).toEqual([
      option('serve').envVar,
      option('serve').defaultValue,
    ]);
  });

  it('exit 0 against a serving daemon, found by --api-listen or by PROXYD_API_LISTEN as serve reads them; its answer on stdout', async () => {
    const d = await startDaemon();
    daemons.push(d);
    const byFlag = await run(PROXYD, ['health', '--api-listen', hostPort(d)]);
    expect(byFlag).toMatchObject({ code: 0, stdout: '{"status":"ok"}\n', stderr: '' });
    const byEnv = await run(PROXYD, ['health'], { env: { PROXYD_API_LISTEN: hostPort(d) } });
    expect(byEnv).toMatchObject({ code: 0, stdout: '{"status":"ok"}\n' });
    // The flag wins over the environment, as for serve.
    const flagWins = await run(PROXYD, ['health', '--api-listen', hostPort(d)], {
      env: { PROXYD_API_LISTEN: `127.0.0.1:${await freePort()}` },
    });
    expect(flagWins.code).toBe(0);
  });

  it('exit 1 when the daemon answers 503, with what it said (a configured Redis that is down)', async () => {
    const d = await startDaemon({ args: ['--redis-url', `redis://127.0.0.1:${await freePort()}`], timeoutMs: 30_000 });
    daemons.push(d);
    const r = await run(PROXYD, ['health', '--api-listen', hostPort(d)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `proxyd: health: http://${hostPort(d)}/healthz answered 503: {"status":"unavailable","down":["redis"]}\n`,
    );
  });

  it('exit 1 when another server answers 200 (not proxyd\'s {"status":"ok"}): the API address is wrong; what it said escaped', async () => {
    const other = http.createServer((_req, res) => res.end('<html>\u001b[2Jwelcome</html>'));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    try {
      const at = `127.0.0.1:${(other.address() as AddressInfo).port}`;
      const r = await run(PROXYD, ['health', '--api-listen', at]);
      expect(r).toMatchObject({ code: 1, stdout: '' });
      expect(r.stderr).toBe(
        `proxyd: health: http://${at}/healthz answered 200 but not as proxyd does ({"status":"ok"}): is it the address proxyd serves its API on (--api-listen, PROXYD_API_LISTEN)? It said: <html>\\x1b[2Jwelcome</html>\n`,
      );
    } finally {
      other.close();
    }
  });

  it('exit 1 when nothing answers, naming the address it asked; exit 2 for port 0 or a bad address', async () => {
    const port = await freePort();
    const none = await run(PROXYD, ['health', '--api-listen', `127.0.0.1:${port}`]);
    expect(none).toMatchObject({
      code: 1,
      stdout: '',
      stderr: `proxyd: health: no answer from http://127.0.0.1:${port}/healthz (ECONNREFUSED)\n`,
    });
    const zero = await run(PROXYD, ['health', '--api-listen', '0.0.0.0:0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('port 0 is picked when the daemon starts');
    const bad = await run(PROXYD, ['health', '--api-listen', 'no port']);
    expect(bad).toMatchObject({
      code: 2,
      stderr: 'proxyd: --api-listen: expected HOST:PORT (port 0 picks a free one), got "no port"\n',
    });
    // Commander's own refusals start `proxyd:` too (they started `error:`), at any depth of the command tree.
    const unknown = await run(PROXYD, ['health', '--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^proxyd: unknown option '--bogus'/);
    const choice = await run(PROXYD, ['admin', 'account', 'set', '--email', 'a@example.com', '--status', 'bogus']);
    expect(choice.code).toBe(2);
    expect(choice.stderr).toMatch(/^proxyd: option '--status <status>' argument 'bogus' is invalid/);
    const badTimeout = await run(PROXYD, ['health', '--api-listen', `127.0.0.1:${port}`, '--timeout', 'soon']);
    expect(badTimeout).toMatchObject({
      code: 2,
      stderr: 'proxyd: --timeout: expected seconds, 0.1 to 300, got "soon"\n',
    });
  });

  it("--wait, started before the daemon, exits 0 once it serves (a unit's start-up check)", async () => {
    const port = await freePort();
    const waiting = spawn(process.execPath, [PROXYD, 'health', '--api-listen', `127.0.0.1:${port}`, '--wait', '60'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    waiting.stdout.on('data', (b) => (out += b));
    const code = new Promise<number | null>((resolve) => waiting.on('exit', resolve));
    // Nothing listens yet: it is still asking.
    const early = await Promise.race([code, new Promise((r) => setTimeout(r, 1_000, 'waiting'))]);
    expect(early).toBe('waiting');
    const d = await startDaemon({ args: ['--api-listen', `127.0.0.1:${port}`] });
    daemons.push(d);
    expect(await code).toBe(0);
    expect(out).toBe('{"status":"ok"}\n');
  });

  it('--wait gives up with exit 1 when the daemon never serves', async () => {
    const port = await freePort();
    const r = await run(PROXYD, ['health', '--api-listen', `127.0.0.1:${port}`, '--wait', '1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no answer from http://127.0.0.1:${port}/healthz`);
  });
});
