// `proxyd admin` and the console share one password rule (src/contract/password.ts); a "no account" error
// names the database used; a value outside an option's choices is a usage error (exit 2), as docs/admin.md says.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PASSWORD_BYTES, MIN_PASSWORD_CHARS, passwordProblem } from '../../src/contract/password.js';
import { ConsoleClient } from '../console/client.js';
import { admin, PROXYD, run, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';

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
    const short = await admin(dir, ['account', 'create', '--email', 'short@example.com', '--password-stdin'], '123456789\n');
    expect(short.code).toBe(1);
    expect(short.stderr).toBe('proxyd: password must be at least 10 characters long\n');
    const long = await admin(dir, ['account', 'create', '--email', 'long@example.com', '--password-stdin'], `${'x'.repeat(256)}\n`);
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
      const created = await admin(d.dataDir, ['account', 'create', '--email', 'pw@example.com', '--password-stdin', '--verified'], 'first-password\n');
      expect(created.code, created.stderr).toBe(0);
      const c = new ConsoleClient(d.api);
      expect((await c.login('pw@example.com', 'first-password')).status).toBe(303);
      const page = await c.get('/console/account');
      expect(page.body).toContain(`minlength="${MIN_PASSWORD_CHARS}"`);
      await c.post('/console/password', { current_password: 'first-password', new_password: '123456789' });
      expect((await c.get('/console/account')).body).toContain('The new password must be at least 10 characters long. Your password was not changed.');
      await c.post('/console/password', { current_password: 'first-password', new_password: '1234567890' });
      expect((await c.get('/console/account')).body).toContain('Your password has been changed');
    });
  });
});

describe('proxyd admin errors', () => {
  it('"no account" names the data dir it used, and says it is the default one when --data-dir was not given', async () => {
    const xdg = tempDir();
    const r = await run(PROXYD, ['admin', 'token', 'reset', '--email', 'nobody@example.com'], { env: { XDG_DATA_HOME: xdg, PROXYD_DATA_DIR: '' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no account with email nobody@example.com in the default data dir ${path.join(xdg, 'proxyd')}`);
    expect(r.stderr).toContain('--data-dir');

    const dir = tempDir();
    const given = await admin(dir, ['account', 'set', '--email', 'nobody@example.com', '--verified', 'true']);
    expect(given.code).toBe(1);
    expect(given.stderr).toBe(`proxyd: no account with email nobody@example.com in data dir ${dir}\n`);
  });

  it('a value outside an option\'s choices exits 2 (usage); a value the command refuses exits 1', async () => {
    const dir = tempDir();
    expect((await admin(dir, ['account', 'create', '--email', 'v@example.com', '--password-stdin'], 'long enough pw\n')).code).toBe(0);
    const choice = await admin(dir, ['account', 'set', '--email', 'v@example.com', '--status', 'bogus']);
    expect(choice.code).toBe(2);
    const refused = await admin(dir, ['account', 'set', '--email', 'v@example.com', '--verified', 'maybe']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/--verified: expected true or false/);
  });
});
