// Token resolution order (env, keychain, file), the 0600 fallback file and its warning.
import { statSync, writeFileSync, chmodSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenStore, KEYCHAIN_SERVICE } from '../../src/cli/token-store.js';
import { MemoryKeychain, OTHER_TOKEN, TOKEN, tempConfigDir } from './helpers/fakes.js';

const BASE = 'http://127.0.0.1:8080';

function store(opts: { env?: NodeJS.ProcessEnv; available?: boolean } = {}) {
  const keychain = new MemoryKeychain();
  keychain.available = opts.available ?? true;
  const warnings: string[] = [];
  const dir = path.join(tempConfigDir(), 'proxyctl');
  const s = new TokenStore({ env: opts.env ?? {}, keychain, dir, warn: (m) => warnings.push(m) });
  return { s, keychain, warnings, dir };
}

describe('TokenStore', () => {
  it('env wins over keychain', async () => {
    const { s, keychain } = store({ env: { PROXYCTL_API_KEY: ` ${OTHER_TOKEN}\n` } });
    await keychain.set(KEYCHAIN_SERVICE, BASE, TOKEN);
    expect(await s.resolve(BASE)).toEqual({ token: OTHER_TOKEN, source: 'env' });
  });

  it('stores in the keychain (service proxyctl, account = base URL) when one answers; no file is written', async () => {
    const { s, keychain, warnings } = store();
    expect(await s.save(BASE, TOKEN)).toEqual({ where: 'keychain' });
    expect(keychain.entries.get(`proxyctl|${BASE}`)).toBe(TOKEN);
    expect(existsSync(s.file)).toBe(false);
    expect(await s.resolve(BASE)).toEqual({ token: TOKEN, source: 'keychain' });
    expect(await s.resolve('http://127.0.0.1:9')).toBeNull();
    expect(warnings).toEqual([]);
  });

  it('falls back to a 0600 file only when no keychain answers, with a one-line warning naming it', async () => {
    const { s, warnings, dir } = store({ available: false });
    const saved = await s.save(BASE, TOKEN);
    expect(saved).toMatchObject({ where: 'file', file: path.join(dir, 'credentials.json') });
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o077).toBe(0);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(s.file);
    expect(warnings[0]).not.toContain('\n');
    expect(warnings.join()).not.toContain(TOKEN);
    expect(await s.resolve(BASE)).toEqual({ token: TOKEN, source: 'file', file: s.file });
    expect(warnings[1]).toContain(s.file);
  });

  it('keeps tokens of several base URLs in the file and removes one at a time', async () => {
    const { s } = store({ available: false });
    await s.save(BASE, TOKEN);
    await s.save('https://api.example.test', OTHER_TOKEN);
    expect(await s.remove(BASE)).toEqual({ keychain: false, file: true });
    expect((await s.resolve('https://api.example.test'))?.token).toBe(OTHER_TOKEN);
    expect(await s.resolve(BASE)).toBeNull();
    await s.remove('https://api.example.test');
    expect(existsSync(s.file)).toBe(false);
  });

  it('a keychain save removes an older file copy', async () => {
    const { s, keychain } = store({ available: false });
    await s.save(BASE, OTHER_TOKEN);
    keychain.available = true;
    await s.save(BASE, TOKEN);
    expect(existsSync(s.file)).toBe(false);
  });

  it('tightens a file readable by others', async () => {
    const { s, warnings } = store({ available: false });
    await s.save(BASE, TOKEN);
    chmodSync(s.file, 0o644);
    expect((await s.resolve(BASE))?.token).toBe(TOKEN);
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
    expect(warnings.some((w) => w.includes('0600'))).toBe(true);
  });

  it('ignores a corrupt file with a warning', async () => {
    const { s, warnings, dir } = store({ available: false });
    await s.save(BASE, TOKEN);
    writeFileSync(s.file, '{not json', { mode: 0o600 });
    expect(await s.resolve(BASE)).toBeNull();
    expect(warnings.at(-1)).toContain('not valid JSON');
    expect(readFileSync(path.join(dir, 'credentials.json'), 'utf8')).toBe('{not json');
  });
});
