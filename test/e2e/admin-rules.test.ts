// `proxyd admin` and the console share one password rule (src/contract/password.ts); a "no account" error
// names the database used; a value outside an option's choices is a usage error (exit 2), as docs/admin.md says.
import { spawnSync } from 'node:child_process';
import { existsSync, openSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS, passwordProblem } from '../../src/contract/password.js';
import { ConsoleClient } from '../console/client.js';
import {
  admin,
  makeAccount,
  PROXYD,
  run,
  startDaemon,
  tempDir,
  waitForProxyUsers,
  type Daemon,
} from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

describe('the password rule', () => {
  it('is at least 10 characters (code points) and at most 255 bytes', () => {
    expect(MIN_PASSWORD_CHARS).toBe(10);
    expect(MAX_PASSWORD_BYTES).toBe(255);
    expect(passwordProblem('123456789')).toBe('at least 10 characters long');
    expect(passwordProblem('1234567890')).toBeNull();
    expect(passwordProblem('😀'.repeat(10))).toBeNull(); // 10 characters, 40 bytes
    expect(passwordProblem('x'.repeat(255))).toBeNull();
    expect(passwordProblem('x'.repeat(256))).toBe('at most 255 bytes long');
    expect(passwordProblem('é'.repeat(128))).toBe('at most 255 bytes long'); // 128 characters, 256 bytes
  });

  it('proxyd admin applies it: 9 characters refused (exit 1), 10 accepted, over 255 bytes refused', async () => {
    const dir = tempDir();
    const short = await admin(
      dir,
      ['account', 'create', '--email', 'short@example.com', '--password-stdin'],
      '123456789\n',
    );
    expect(short.code).toBe(1);
    expect(short.stderr).toBe('proxyd: password must be at least 10 characters long\n');
    const long = await admin(
      dir,
      ['account', 'create', '--email', 'long@example.com', '--password-stdin'],
      `${'x'.repeat(256)}\n`,
    );
    expect(long.code).toBe(1);
    expect(long.stderr).toMatch(/at most 255 bytes/);
    const ok = await admin(dir, ['account', 'create', '--email', 'ok@example.com', '--password-stdin'], '1234567890\n');
    expect(ok.code, ok.stderr).toBe(0);
  });

  describe('the console applies the same rule', () => {
    let d: Daemon;
    beforeAll(async () => {
      d = await startDaemon();
    });
    afterAll(async () => {
      await d?.stop();
    });

    it('a 9-character new password is refused with the rule, a 10-character one accepted', async () => {
      const created = await admin(
        d.dataDir,
        ['account', 'create', '--email', 'pw@example.com', '--password-stdin', '--verified'],
        'first-password\n',
      );
      expect(created.code, created.stderr).toBe(0);
      const c = new ConsoleClient(d.api);
      expect((await c.login('pw@example.com', 'first-password')).status).toBe(303);
      const page = await c.get('/console/account');
      expect(page.body).toContain(`minlength="${MIN_PASSWORD_CHARS}"`);
      await c.post('/console/password', { current_password: 'first-password', new_password: '123456789' });
      expect((await c.get('/console/account')).body).toContain(
        'The new password must be at least 10 characters long. Your password was not changed.',
      );
      await c.post('/console/password', { current_password: 'first-password', new_password: '1234567890' });
      expect((await c.get('/console/account')).body).toContain('Your password has been changed');
    });
  });
});

describe('proxyd admin errors', () => {
  it('"no account" names the data dir it used, and says it is the default one when --data-dir was not given', async () => {
    const xdg = tempDir();
    const r = await run(PROXYD, ['admin', 'token', 'reset', '--email', 'nobody@example.com'], {
      env: { XDG_DATA_HOME: xdg, PROXYD_DATA_DIR: '' },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `no account with email nobody@example.com in the default data dir ${path.join(xdg, 'proxyd')}`,
    );
    expect(r.stderr).toContain('--data-dir');

    const dir = tempDir();
    const given = await admin(dir, ['account', 'set', '--email', 'nobody@example.com', '--verified', 'true']);
    expect(given.code).toBe(1);
    expect(given.stderr).toBe(`proxyd: no account with email nobody@example.com in data dir ${dir}\n`);
  });

  it("a value outside an option's choices exits 2 (usage); a value the command refuses exits 1", async () => {
    const dir = tempDir();
    expect(
      (await admin(dir, ['account', 'create', '--email', 'v@example.com', '--password-stdin'], 'long enough pw\n'))
        .code,
    ).toBe(0);
    const choice = await admin(dir, ['account', 'set', '--email', 'v@example.com', '--status', 'bogus']);
    expect(choice.code).toBe(2);
    const refused = await admin(dir, ['account', 'set', '--email', 'v@example.com', '--verified', 'maybe']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/--verified: expected true or false/);
    // A required option missing is a usage error too (it exited 1).
    const noPassword = await admin(dir, ['account', 'create', '--email', 'w@example.com']);
    expect(noPassword.code).toBe(2);
    expect(noPassword.stderr).toMatch(/a password is required/);
    expect((await admin(dir, ['account', 'set', '--email', 'v@example.com'])).code).toBe(2);
    expect((await admin(dir, ['policy', 'set', '--email', 'v@example.com'])).code).toBe(2);
  });

  it('every command names the data dir when no account matches (plan, usage, connections, policy, proxy-user)', async () => {
    const dir = tempDir();
    expect(
      (await admin(dir, ['account', 'create', '--email', 'v@example.com', '--password-stdin'], 'long enough pw\n'))
        .code,
    ).toBe(0);
    for (const args of [
      ['plan', 'show'],
      ['usage'],
      ['connections'],
      ['policy', 'show'],
      ['proxy-user', 'set', '--username', 'u', '--max-connections', '3'],
      ['webhooks'],
    ]) {
      const r = await admin(dir, [...args, '--email', 'nobody@example.com']);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(`proxyd: no account with email nobody@example.com in data dir ${dir}\n`);
    }
  });

  it('a command that only reads never creates a data dir or a database: a mistyped --data-dir is named', async () => {
    const typo = path.join(tempDir(), 'typo');
    for (const args of [
      ['usage', '--email', 'v@example.com'],
      ['plan', 'show', '--email', 'v@example.com'],
      ['connections'],
      ['policy', 'show', '--global'],
      ['webhooks', '--email', 'v@example.com'],
    ]) {
      const r = await admin(typo, args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(
        `proxyd: no database in data dir ${typo}: nothing to show (is it the daemon's data dir?)\n`,
      );
      expect(existsSync(typo), args.join(' ')).toBe(false);
    }
  });

  it('the reader of the output going away ends the command quietly (no stack trace)', async () => {
    const dir = tempDir();
    expect(
      (await admin(dir, ['account', 'create', '--email', 'v@example.com', '--password-stdin'], 'long enough pw\n'))
        .code,
    ).toBe(0);
    // `| true`: the pipe's reader exits at once; a write then fails with EPIPE. A reading command: exit 0.
    const r = spawnSync(
      'bash',
      [
        '-c',
        `set -o pipefail; "${process.execPath}" "${PROXYD}" admin usage --data-dir "${dir}" --email v@example.com --by minute --format csv | true`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.stderr).not.toMatch(/EPIPE|at .*\.js/);
    expect(r.status).toBe(0);
    // Output that cannot be written at all (a full disk): exit 1 and a line, never a silent 0. A token printed once
    // and lost so must not look like success.
    const full = spawnSync(
      process.execPath,
      [PROXYD, 'admin', 'token', 'reset', '--data-dir', dir, '--email', 'v@example.com'],
      { encoding: 'utf8', stdio: ['ignore', openSync('/dev/full', 'w'), 'pipe'] },
    );
    expect(full.status).toBe(1);
    expect(full.stderr).toBe(
      'proxyd: cannot write the output (ENOSPC): the command was carried out, its output is lost\n',
    );
    const fullRead = spawnSync(
      process.execPath,
      [PROXYD, 'admin', 'usage', '--data-dir', dir, '--email', 'v@example.com'],
      { encoding: 'utf8', stdio: ['ignore', openSync('/dev/full', 'w'), 'pipe'] },
    );
    expect(fullRead.status).toBe(1);
    expect(fullRead.stderr).toBe('proxyd: cannot write the output (ENOSPC)\n');
  });

  it(
    'connections --format table: aligned columns, numbers on the right, the account (an email) on the left, an exit column',
    async () => {
      const d = await startDaemon({ args: ['--allow-private-targets'] });
      try {
        // A refusal recorded with an account (a wrong password for an existing user): its email is text, left-aligned.
        await makeAccount(d.dataDir, 'table@example.com');
        expect(
          (
            await admin(
              d.dataDir,
              ['proxy-user', 'create', '--email', 'table@example.com', '--username', 'tabled', '--password-stdin'],
              'tabled-password-1\n',
            )
          ).code,
        ).toBe(0);
        await waitForProxyUsers(d, 1);
        await new Promise<void>((resolve) => {
          const [host, port] = d.httpProxy.split(':') as [string, string];
          const s = net.connect(Number(port), host, () =>
            s.write(
              `CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from('tabled:wrong').toString('base64')}\r\n\r\n`,
            ),
          );
          s.on('data', () => s.end());
          s.on('error', () => resolve());
          s.on('close', () => resolve());
        });
        // Two refused attempts of different lengths (a bad head from two clients) give two records.
        for (const junk of ['x\r\n\r\n', 'GET / HTTP/1.1\r\nHost: a-much-longer-host-name.example\r\n\r\n']) {
          const [host, port] = d.httpProxy.split(':') as [string, string];
          await new Promise<void>((resolve) => {
            const s = net.connect(Number(port), host, () => s.end(junk));
            s.on('error', () => resolve());
            s.on('close', () => resolve());
            s.resume();
          });
        }
        let lines: string[] = [];
        for (let i = 0; i < 40 && lines.length < 4; i++) {
          await new Promise((r) => setTimeout(r, 250));
          lines = (await admin(d.dataDir, ['connections', '--format', 'table'])).stdout.trimEnd().split('\n');
        }
        expect(lines.length).toBeGreaterThanOrEqual(4);
        expect(lines[0]!.split(/ +/)).toEqual([
          'time',
          'node',
          'request_id',
          'protocol',
          'source_ip',
          'username',
          'account',
          'target',
          'exit',
          'decision',
          'reason',
          'bytes_up',
          'bytes_down',
          'duration_ms',
        ]);
        // The account column starts where its header does (left-aligned), on the line that has one.
        const withAccount = lines.find((l) => l.includes('table@example.com'))!;
        expect(withAccount.indexOf('table@example.com')).toBe(lines[0]!.indexOf('account'));
        // Every column starts at the same offset on every line: the header's words sit above their values.
        const starts = (l: string) => [...l.matchAll(/(?:^| {2})(\S)/g)].map((m) => m.index! + (m[0].length - 1));
        const header = starts(lines[0]!);
        for (const l of lines.slice(1)) {
          const cols = l.split(/ {2,}/).filter(Boolean);
          expect(cols.length, l).toBe(header.length);
          expect(l.indexOf(cols[1]!), l).toBe(header[1]); // node
          expect(l.indexOf(cols[2]!), l).toBe(header[2]); // request_id
        }
      } finally {
        await d.stop();
      }
    },
    patient(60_000),
  );
});
