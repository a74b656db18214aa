// `--data-dir` under /proc made Node's recursive mkdir spin forever at full CPU (proxyd admin and serve hung).
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureDataDir } from '../../src/daemon/process/data-dir.js';
import { admin, PROXYD, run, tempDir } from '../helpers/daemon.js';

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
    expect(() => ensureDataDir(path.join(base, 'file'))).toThrow(`cannot create the data dir ${base}/file: ${base}/file is not a directory`);
    expect(() => ensureDataDir(path.join(base, 'file', 'sub'))).toThrow(/is not a directory/);
    expect(() => ensureDataDir('/proc/proxyd-test/data')).toThrow('cannot create the data dir /proc/proxyd-test/data: ENOENT at /proc/proxyd-test');
  });
});

describe('proxyd with --data-dir under /proc', () => {
  it('admin and serve stop at once with exit 1 instead of hanging', async () => {
    const a = await admin('/proc/proxyd-test', ['token', 'reset', '--email', 'a@example.com']);
    expect(a.code).toBe(1);
    expect(a.stderr).toBe('proxyd: cannot create the data dir /proc/proxyd-test: ENOENT at /proc/proxyd-test\n');
    const s = await run(PROXYD, ['serve', '--data-dir', '/proc/proxyd-test', '--api-listen', '127.0.0.1:0', '--http-proxy-listen', '127.0.0.1:0', '--socks-listen', '127.0.0.1:0'], { timeoutMs: 20_000 });
    expect(s.code).toBe(1);
    expect(s.stderr).toContain('cannot create the data dir /proc/proxyd-test: ENOENT');
  }, 45_000);
});
