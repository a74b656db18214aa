// The admission view with 100,000 proxy users (SQLite): the daemon starts with them all in view, and full
// reloads on SIGHUP swap a new view in while tunnels are being admitted: none is refused or lost, the reloads
// are counted in /metrics, and a user added behind the view's back (no change-log row) is seen after one.
// Speed is measured by bench/admission-scale.mjs, not here.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import Database from 'better-sqlite3';
import { pin, stmt } from '../../src/daemon/store/sqlite/statements.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic, startTcpEcho } from '../gateway/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const USERS = 100_000;
const PASSWORD = 'scale-password-123';

describe('admission view with 100,000 proxy users', () => {
  let d: Daemon;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  let dataDir: string;
  let writer: Database.Database;

  beforeAll(async () => {
    dataDir = await dataDirFor('sqlite');
    await makeAccount(dataDir, 'scale@example.com');
    const made = await admin(
      dataDir,
      ['proxy-user', 'create', '--email', 'scale@example.com', '--username', 'alice', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    expect(made.code, made.stderr).toBe(0);
    // Written straight into the database (scrypt for each would take minutes); the statement cache, pinned (statements.ts says why).
    const db = pin(new Database(path.join(dataDir, 'proxyd.db')));
    const account = stmt<[], { id: number }>(db, 'SELECT id FROM accounts LIMIT 1').get()!.id;
    const ins = stmt(
      db,
      "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', 0, 0)",
    );
    db.transaction(() => {
      for (let i = 0; i < USERS; i++)
        ins.run(
          account,
          `bulk${i}`,
          `scrypt$16384$8$1$${randomBytes(16).toString('base64url')}$${randomBytes(32).toString('base64url')}`,
        );
    })();
    writer = db;
    echo = await startTcpEcho();
    d = await startDaemon({ dataDir, args: ['--allow-private-targets'], timeoutMs: 60_000 });
  }, patient(120_000));

  afterAll(async () => {
    await d?.stop();
    echo?.server.close();
  });

  async function tunnel(): Promise<string> {
    const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', PASSWORD)}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n', 10_000);
    c.socket.destroy();
    return head.slice(0, 12);
  }

  it(
    'every user is in view; reloads on SIGHUP admit throughout and are counted',
    async () => {
      const metric = async (name: string) =>
        Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${d.api}/metrics`)).text())?.[1] ?? NaN);
      expect(await metric('proxyd_admission_view_proxy_users')).toBe(USERS + 1);
      expect(await metric('proxyd_admission_reloads_total')).toBe(0);
      // A user the change log does not know of (written behind its back): only a full reload finds it.
      writer.exec('DROP TRIGGER IF EXISTS change_log_proxy_user_insert');
      stmt(
        writer,
        "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (1, 'hidden', 'x', 'active', 0, 0)",
      ).run();
      const heads: string[] = [];
      for (let round = 0; round < 3; round++) {
        d.proc.kill('SIGHUP');
        for (let i = 0; i < 20; i++) heads.push(await tunnel());
        await waitFor(
          `reload ${round + 1} counted`,
          async () => ((await metric('proxyd_admission_reloads_total')) >= round + 1 ? true : undefined),
          20_000,
        );
      }
      expect(heads.filter((h) => h !== 'HTTP/1.1 200')).toEqual([]);
      expect(await metric('proxyd_admission_view_proxy_users')).toBe(USERS + 2);
    },
    patient(90_000),
  );
});
