// The connection log as JSON lines (`--connection-log-sink jsonl:PATH|stdout`) against a spawned proxyd: one
// line per attempt in the shape `proxyd admin connections` prints, within 2 s; the file is reopened on SIGHUP
// (logrotate moved it); `off` writes nothing, not even to the database; a bad value of either connection-log
// flag is exit 2 naming the flag.
import { renameSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, PROXYD, run, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic, startTcpEcho } from '../gateway/helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';

const PASSWORD = 'sinks-password-123';
const EMAIL = 'sinks@example.com';
const KEYS = [
  'time',
  'node',
  'request_id',
  'protocol',
  'source_ip',
  'username',
  'account',
  'target',
  'decision',
  'reason',
  'bytes_up',
  'bytes_down',
  'duration_ms',
];

/** One CONNECT through the gateway with these credentials; its request id. */
async function attempt(d: Daemon, target: string, user: string, password: string): Promise<string> {
  const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
  c.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${basic(user, password)}\r\n\r\n`);
  const head = await c.readUntil('\r\n\r\n', 5000);
  c.socket.end('bye');
  await c.readToEnd(5000).catch(() => null);
  c.socket.destroy();
  return /X-Request-Id: ([^\r]+)/.exec(head)![1]!;
}

const linesOf = (file: string) =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    : [];

describe('connection-log sinks', () => {
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  const daemons: Daemon[] = [];
  beforeAll(async () => {
    echo = await startTcpEcho();
  });
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
    echo?.server.close();
  });

  async function node(sink: string): Promise<Daemon> {
    const dataDir = await dataDirFor('sqlite');
    await makeAccount(dataDir, EMAIL);
    const made = await admin(
      dataDir,
      ['proxy-user', 'create', '--email', EMAIL, '--username', 'alice', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    expect(made.code, made.stderr).toBe(0);
    const d = await startDaemon({ dataDir, args: ['--allow-private-targets', '--connection-log-sink', sink] });
    daemons.push(d);
    return d;
  }

  it("jsonl:PATH: a line per attempt, in the records' shape, within 2 s; reopened on SIGHUP", async () => {
    const dir = tempDir('proxyd-sink-');
    const file = path.join(dir, 'connections.jsonl');
    const d = await node(`jsonl:${file}`);
    const target = `127.0.0.1:${echo.port}`;
    const admitted = await attempt(d, target, 'alice', PASSWORD);
    const refused = await attempt(d, target, 'alice', 'wrong password 1');
    const t0 = Date.now();
    const lines = await waitFor('two lines', () => (linesOf(file).length >= 2 ? linesOf(file) : undefined), 4_000);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(lines).toHaveLength(2);
    for (const l of lines) expect(Object.keys(l)).toEqual(KEYS);
    expect(lines.find((l) => l.request_id === admitted)).toMatchObject({
      protocol: 'connect',
      username: 'alice',
      account: EMAIL,
      target,
      decision: 'admitted',
      reason: null,
      bytes_up: 3,
    });
    expect(lines.find((l) => l.request_id === refused)).toMatchObject({
      decision: 'refused',
      reason: 'wrong_password',
      account: EMAIL,
    });
    expect(JSON.stringify(lines)).not.toContain('wrong password 1');
    // Nothing in the database: the log went to the file instead.
    expect((await admin(d.dataDir, ['connections'])).stdout).toBe('');

    // logrotate: the file is moved away, then SIGHUP; the next record goes to a new file at the path.
    renameSync(file, `${file}.1`);
    d.proc.kill('SIGHUP');
    await waitFor('reopened', () => d.logs.some((l) => l.includes('"event":"reopen"')), 3_000);
    const after = await attempt(d, target, 'alice', PASSWORD);
    const fresh = await waitFor(
      'a line in the new file',
      () => (linesOf(file).length >= 1 ? linesOf(file) : undefined),
      4_000,
    );
    expect(fresh.map((l) => l.request_id)).toEqual([after]);
    expect(linesOf(`${file}.1`)).toHaveLength(2);
    expect(d.proc.exitCode).toBeNull();
  });

  it('stdout: the lines follow the ready line', async () => {
    const d = await node('stdout');
    const got: string[] = [];
    createInterface({ input: d.proc.stdout! }).on('line', (l) => got.push(l));
    const id = await attempt(d, `127.0.0.1:${echo.port}`, 'alice', PASSWORD);
    const line = await waitFor('a record on stdout', () => got.find((l) => l.includes(id)), 4_000);
    expect(JSON.parse(line)).toMatchObject({ request_id: id, decision: 'admitted', account: EMAIL });
  });

  it('off: no record anywhere', async () => {
    const d = await node('off');
    await attempt(d, `127.0.0.1:${echo.port}`, 'alice', 'wrong password 2');
    await sleep(1_000);
    expect((await admin(d.dataDir, ['connections'])).stdout).toBe('');
    const metrics = await (await fetch(`${d.api}/metrics`)).text();
    expect(metrics).not.toMatch(/^proxyd_connection_log_written_total [1-9]/m);
  });

  it.each([
    ['--connection-log-sink', 'bogus'],
    ['--connection-log-sink', 'jsonl:'],
    ['--connection-log-sink', 'file:/tmp/x'],
    ['--connection-log-sink', 'DB'],
    ['--connection-log-max-size', '10'],
    ['--connection-log-max-size', '-5GiB'],
    ['--connection-log-max-size', '3 parsecs'],
  ])('a bad value (%s %s) is exit 2 naming the flag', async (flag, v) => {
    const r = await run(PROXYD, ['serve', '--data-dir', tempDir('proxyd-sink-bad-'), flag, v]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(flag);
  });
});
