// Usage metering on PostgreSQL through an outage (SPEC 11): a tunnel keeps relaying while the database is
// paused (SIGSTOP: there but answering nothing) across several flushes; once it answers again, every byte
// is in the buckets, exactly once.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
const PASSWORD = 'pg-metering-pass-1';

describe.skipIf(skip !== null)(`usage metering with PostgreSQL paused${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let pg: PgCluster;
  let d: Daemon;
  let echo: net.Server;
  const email = 'paused@example.com';

  beforeAll(async () => {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    const dir = await dataDirFor('postgres', pg.url);
    await makeAccount(dir, email);
    await admin(
      dir,
      ['proxy-user', 'create', '--email', email, '--username', 'steady', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    echo = net.createServer((s) => s.on('error', () => {}).pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    d = await startDaemon({ dataDir: dir, args: ['--allow-private-targets'] });
  }, patient(120_000));

  afterAll(async () => {
    await d?.stop();
    echo?.close();
    pg?.destroy();
  });

  it(
    'loses no count while the database is paused for several flushes',
    async () => {
      const c = await waitFor(
        'tunnel',
        async () => {
          const x = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
          x.write(
            `CONNECT 127.0.0.1:${(echo.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('steady', PASSWORD)}\r\n\r\n`,
          );
          const head = await x.readUntil('\r\n\r\n');
          if (head.startsWith('HTTP/1.1 200 ')) return x;
          x.socket.destroy();
          return null;
        },
        10_000,
      );
      const chunk = Buffer.alloc(100_000, 5);
      let total = 0;
      const send = async (n: number) => {
        for (let i = 0; i < n; i++) {
          c.write(chunk);
          await c.read(chunk.length);
          total += chunk.length;
          await sleep(50);
        }
      };
      await send(10);
      pg.pause();
      try {
        await send(40); // ~2–3 s of flushes that cannot be written
      } finally {
        pg.resume();
      }
      await send(10);
      c.socket.destroy();
      const used = await waitFor(
        'all usage written',
        async () => {
          const r = await admin(d.dataDir, ['usage', '--email', email]);
          const row = (
            r.json as { rows: Array<{ user: string; bytes_up: number; bytes_down: number }> } | null
          )?.rows.find((x) => x.user === 'steady');
          return row && row.bytes_up === total && row.bytes_down === total ? row : null;
        },
        15_000,
      );
      expect(used).toMatchObject({ bytes_up: total, bytes_down: total });
      expect(d.proc.exitCode).toBeNull();
    },
    patient(90_000),
  );
});
