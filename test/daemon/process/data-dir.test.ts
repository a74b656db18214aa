// `--data-dir` under /proc made Node's recursive mkdir spin forever at full CPU (proxyd admin and serve hung).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureDataDir } from '../../../src/daemon/process/data-dir.js';
import { admin, PROXYD, run, tempDir } from '../../helpers/daemon.js';
import { patient } from '../../helpers/patience.js';

describe('ensureDataDir', () => {
  it('creates missing parents with mode 0700 and accepts an existing dir', () => {
    const base = tempDir();
    const dir = path.join(base, 'a', 'b', 'c');
    ensureDataDir(dir);
    expect(statSync(dir).isDirectory()).toBe(true);
    expect(statSync(path.join(base, 'a')).mode & 0o777).toBe(0o700);
    ensureDataDir(dir);
    mkdirSync(path.join(base, 'x'));
    ensureDataDir(path.join(base, 'x'));
  });

  it('names the data dir and the cause: a file in the way, a place where mkdir says ENOENT', () => {
    const base = tempDir();
    writeFileSync(path.join(base, 'file'), '');
    expect(() => ensureDataDir(path.join(base, 'file'))).toThrow(
      `cannot create the data dir ${base}/file: ${base}/file is not a directory`,
    );
    expect(() => ensureDataDir(path.join(base, 'file', 'sub'))).toThrow(/is not a directory/);
    expect(() => ensureDataDir('/proc/proxyd-test/data')).toThrow(
      'cannot create the data dir /proc/proxyd-test/data: ENOENT at /proc/proxyd-test',
    );
  });
});

describe('proxyd with --data-dir under /proc', () => {
  it(
    'admin and serve stop at once with exit 1 instead of hanging',
    async () => {
      const a = await admin('/proc/proxyd-test', ['token', 'reset', '--email', 'a@example.com']);
      expect(a.code).toBe(1);
      expect(a.stderr).toBe('proxyd: cannot create the data dir /proc/proxyd-test: ENOENT at /proc/proxyd-test\n');
      const s = await run(
        PROXYD,
        [
          'serve',
          '--data-dir',
          '/proc/proxyd-test',
          '--api-listen',
          '127.0.0.1:0',
          '--http-proxy-listen',
          '127.0.0.1:0',
          '--socks-listen',
          '127.0.0.1:0',
        ],
        { timeoutMs: 20_000 },
      );
      expect(s.code).toBe(1);
      expect(s.stderr).toContain('cannot create the data dir /proc/proxyd-test: ENOENT');
    },
    patient(45_000),
  );
});

// A proxyd.db this user may not write (made by root with `proxyd admin`, then served as the service's user):
// SQLite opened it read-only without a word, the daemon printed ready and /healthz said ok, and every write
// (whitelist add, console log-in) failed later as 10500.
describe.skipIf(process.getuid?.() !== 0)('serve on a database file it may not write', () => {
  it(
    'exits 1 naming the file, while reading admin commands still work',
    async () => {
      const base = tempDir();
      chmodSync(base, 0o777);
      const dir = path.join(base, 'data');
      expect(
        (await admin(dir, ['account', 'create', '--email', 'ro@example.com', '--password', 'long enough pw'])).code,
      ).toBe(0);
      chmodSync(dir, 0o777);
      chmodSync(path.join(dir, 'proxyd.db'), 0o644);
      // root's node may sit in a directory the other user cannot enter: a copy of it where it can.
      const node = path.join(base, 'node');
      try {
        linkSync(process.execPath, node);
      } catch {
        copyFileSync(process.execPath, node);
      }
      chmodSync(node, 0o755);
      const uid = Number(execFileSync('id', ['-u', 'nobody']).toString().trim());
      const gid = Number(execFileSync('id', ['-g', 'nobody']).toString().trim());
      const asNobody = (args: string[]) =>
        spawnSync(node, [PROXYD, ...args], { uid, gid, encoding: 'utf8', timeout: 20_000, cwd: base });
      const s = asNobody([
        'serve',
        '--data-dir',
        dir,
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
      ]);
      expect(s.stdout).toBe('');
      expect(s.status).toBe(1);
      expect(s.stderr).toContain(
        `${dir}/proxyd.db: attempt to write a readonly database (run proxyd as the user that owns the data dir and its files)`,
      );
      const show = asNobody(['admin', 'plan', 'show', '--email', 'ro@example.com', '--data-dir', dir]);
      expect(show.status, show.stderr).toBe(0);
    },
    patient(60_000),
  );
});
