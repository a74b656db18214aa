// "No keychain answers": a session bus that does not exist makes the OS keychain unavailable and the
// token goes to the fallback file. Its own file because the keyring library settles on a store once per process.
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KEYCHAIN_SERVICE, KeychainUnavailable, TokenStore, osKeychain } from '../../src/cli/token-store.js';
import { TOKEN, tempConfigDir } from './helpers/fakes.js';

const BASE = 'http://127.0.0.1:8080';

describe('keychain unavailable', () => {
  it('a session bus that does not exist means "no keychain answers": KeychainUnavailable, then the file', async () => {
    const saved = { ...process.env };
    process.env.DBUS_SESSION_BUS_ADDRESS = `unix:path=${path.join(tmpdir(), 'no-such-bus-' + process.pid)}`;
    try {
      const kc = osKeychain(3000);
      await expect(kc.get(KEYCHAIN_SERVICE, BASE)).rejects.toBeInstanceOf(KeychainUnavailable);
      const warnings: string[] = [];
      const store = new TokenStore({
        env: {},
        keychain: kc,
        dir: path.join(tempConfigDir(), 'proxyctl'),
        warn: (m) => warnings.push(m),
      });
      expect(await store.save(BASE, TOKEN)).toMatchObject({ where: 'file' });
      expect(warnings[0]).toContain('credentials.json');
    } finally {
      process.env = saved;
    }
  });
});
