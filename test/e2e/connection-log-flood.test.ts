// The connection log under a flood of refused attempts with its database unable to take writes (another
// connection holds SQLite's write lock): the buffer stays at its bound, what does not fit is counted in
// /metrics, admitted connections go on being admitted, and once the database takes writes again everything
// still buffered is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, inspectDb, makeAccount, startDaemon, waitForProxyUsers, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic, startTcpEcho } from '../gateway/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const BOUND = 500;
const FLOOD = 3_000;
const PASSWORD = 'flood-test-password-1';

async function metric(d: Daemon, name: string): Promise<number> {
  const text = await (await fetch(`${d.api}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
}

describe('connection log: bounded buffer under a flood, database locked', () => {
  let d: Daemon;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;

  beforeAll(async () => {
    echo = await startTcpEcho();
    d = await startDaemon({ args: ['--allow-private-targets'], env: { PROXYD_CONNECTION_LOG_BUFFER: String(BOUND) } });
    await makeAccount(d.dataDir, 'flood@example.com');
    await admin(
      d.dataDir,
      ['proxy-user', 'create', '--email', 'flood@example.com', '--username', 'alice', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    await waitForProxyUsers(d, 1);
  }, patient(30_000));
  afterAll(async () => {
    await d?.stop();
    echo?.server.close();
  });

  it(
    'keeps at most its bound, counts the drops, admits meanwhile, and writes the rest once the lock is gone',
    async () => {
      const port = Number(d.httpProxy.split(':')[1]);
      const target = `127.0.0.1:${echo.port}`;
      // alice logs in once first: her password is then known good (a flood spends the node's budget for
      // checking new passwords, docs/security.md), so her tunnel below depends only on the log's behaviour.
      const warm = await RawClient.connect(port);
      warm.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', PASSWORD)}\r\n\r\n`);
      expect(await warm.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
      warm.socket.destroy();
      await waitFor(
        'first record written',
        async () => (await metric(d, 'proxyd_connection_log_records_total')) === 1,
        5_000,
      );
      const db = await inspectDb(d.dataDir, { write: true });
      try {
        db.run('BEGIN IMMEDIATE'); // nobody else can write until COMMIT
        let sent = 0;
        const worker = async () => {
          while (sent < FLOOD) {
            sent++;
            const c = await RawClient.connect(port);
            c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${basic(`nobody-${sent}`, 'x')}\r\n\r\n`);
            expect((await c.readUntil('\r\n\r\n')).startsWith('HTTP/1.1 407 ')).toBe(true);
            c.socket.destroy();
          }
        };
        const flood = Promise.all(Array.from({ length: 32 }, worker));
        // An admitted tunnel in the middle of the flood still opens and relays.
        const c = await RawClient.connect(port);
        c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', PASSWORD)}\r\n\r\n`);
        expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
        c.write('ping');
        expect((await c.read(4)).toString()).toBe('ping');
        c.socket.destroy();
        await flood;

        const buffered = await metric(d, 'proxyd_connection_log_buffered');
        const dropped = await metric(d, 'proxyd_connection_log_dropped_total');
        expect(buffered).toBeLessThanOrEqual(BOUND);
        expect(buffered).toBeGreaterThan(BOUND / 2);
        expect(dropped).toBeGreaterThanOrEqual(FLOOD - BOUND);
        expect(await metric(d, 'proxyd_connection_log_records_total')).toBe(1); // the warm-up's, before the lock
      } finally {
        db.run('COMMIT');
      }
      // The lock gone: what the buffer held is written (nothing beyond the bound was kept).
      await waitFor('buffer written', async () => (await metric(d, 'proxyd_connection_log_buffered')) === 0, 5_000);
      const written = await metric(d, 'proxyd_connection_log_records_total');
      const rows = db.get<{ n: number }>('SELECT count(*) AS n FROM connection_log').n;
      expect(rows).toBe(written);
      expect(written).toBeLessThanOrEqual(BOUND + 2);
      db.close();
    },
    patient(60_000),
  );
});
