// The OS keychain path through @napi-rs/keyring against a real Secret Service: a private D-Bus session
// bus with gnome-keyring-daemon on it, both started for this test (Debian packages: gnome-keyring,
// dbus, libsecret-tools). Skipped with a message when they are absent.
// The keyring library picks its store once per process, so the "no keychain" case lives in its own
// file (keychain-unavailable.test.ts): vitest runs each file in its own process.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEYCHAIN_SERVICE, TokenStore, osKeychain } from '../../src/cli/token-store.js';
import { OTHER_TOKEN, TOKEN, tempConfigDir } from './helpers/fakes.js';
import { startScriptedServer } from './helpers/scripted-server.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BUILT = existsSync(path.join(ROOT, 'dist/cli/main.js'));

const has = (bin: string) => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;
const missing = ['dbus-daemon', 'dbus-send', 'gnome-keyring-daemon', 'secret-tool'].filter((b) => !has(b));
const SKIP_REASON = missing.length
  ? `keychain test skipped: ${missing.join(', ')} not installed (apt-get install -y gnome-keyring dbus libsecret-tools)`
  : '';
if (SKIP_REASON) console.warn(SKIP_REASON);

const BASE = 'http://127.0.0.1:8080';

describe.skipIf(SKIP_REASON !== '')('keychain: real Secret Service (gnome-keyring-daemon on a private D-Bus)', () => {
  let bus: ChildProcess | undefined;
  let keyring: ChildProcess | undefined;
  let keyringEnv: NodeJS.ProcessEnv = {};
  const savedEnv = { ...process.env };

  beforeAll(async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'proxyctl-keyring-'));
    const runtime = path.join(home, 'run');
    mkdirSync(runtime, { mode: 0o700 });
    keyringEnv = {
      ...process.env,
      HOME: home,
      XDG_DATA_HOME: path.join(home, 'data'),
      XDG_RUNTIME_DIR: runtime,
      XDG_CONFIG_HOME: path.join(home, 'config'),
    };
    delete keyringEnv.DISPLAY;
    bus = spawn('dbus-daemon', ['--session', '--nofork', '--print-address=1'], {
      env: keyringEnv,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const address = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('dbus-daemon gave no address')), 10_000);
      createInterface({ input: bus!.stdout! }).once('line', (l) => {
        clearTimeout(t);
        resolve(l.trim());
      });
    });
    keyringEnv.DBUS_SESSION_BUS_ADDRESS = address;
    // In the foreground so the test owns its pid; --unlock reads the login keyring password from stdin and creates that keyring.
    keyring = spawn('gnome-keyring-daemon', ['--foreground', '--unlock', '--components=secrets'], {
      env: keyringEnv,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    keyring.stdin!.end('test-password');
    const deadline = Date.now() + 10_000;
    for (;;) {
      const q = spawnSync(
        'dbus-send',
        [
          '--session',
          '--print-reply',
          '--dest=org.freedesktop.DBus',
          '/org/freedesktop/DBus',
          'org.freedesktop.DBus.NameHasOwner',
          'string:org.freedesktop.secrets',
        ],
        { env: keyringEnv, encoding: 'utf8' },
      );
      if (/boolean true/.test(q.stdout)) break;
      if (Date.now() > deadline) throw new Error('gnome-keyring-daemon did not register org.freedesktop.secrets');
      await sleep(100);
    }
    process.env.DBUS_SESSION_BUS_ADDRESS = address;
    process.env.HOME = home;
    process.env.XDG_RUNTIME_DIR = runtime;
  }, patient(30_000));

  afterAll(() => {
    process.env = savedEnv;
    keyring?.kill('SIGTERM');
    bus?.kill('SIGTERM');
  });

  const lookup = (account: string) =>
    spawnSync('secret-tool', ['lookup', 'service', KEYCHAIN_SERVICE, 'username', account], {
      env: keyringEnv,
      encoding: 'utf8',
      timeout: 10_000,
    });

  it('stores under service "proxyctl", account = base URL, and reads it back', async () => {
    const kc = osKeychain(5000);
    const store = new TokenStore({
      env: {},
      keychain: kc,
      dir: path.join(tempConfigDir(), 'proxyctl'),
      warn: (m) => expect.fail(`unexpected warning: ${m}`),
    });
    expect(await store.save(BASE, TOKEN)).toEqual({ where: 'keychain' });
    expect(await store.resolve(BASE)).toEqual({ token: TOKEN, source: 'keychain' });
    // Seen by another Secret Service client, under the documented attributes.
    expect(lookup(BASE).stdout).toBe(TOKEN);
    // One entry per base URL.
    await store.save('https://api.example.test', OTHER_TOKEN);
    expect((await store.resolve(BASE))?.token).toBe(TOKEN);
    expect((await store.resolve('https://api.example.test'))?.token).toBe(OTHER_TOKEN);
  });

  it('logout removes the entry', async () => {
    const kc = osKeychain(5000);
    const store = new TokenStore({
      env: {},
      keychain: kc,
      dir: path.join(tempConfigDir(), 'proxyctl'),
      warn: () => {},
    });
    await store.save(BASE, TOKEN);
    expect(await store.remove(BASE)).toEqual({ keychain: true, file: false });
    expect(await store.resolve(BASE)).toBeNull();
    expect(lookup(BASE).status).not.toBe(0);
  });

  it.skipIf(!BUILT)(
    'the built proxyctl: login stores in the keychain, auth status reads it, logout removes it',
    async () => {
      const server = await startScriptedServer(() => ({
        code: 200,
        data: { items: [], page: 1, page_size: 1, total: 0 },
      }));
      try {
        const config = mkdtempSync(path.join(tmpdir(), 'proxyctl-kc-config-'));
        const env = {
          ...keyringEnv,
          XDG_CONFIG_HOME: config,
          PROXYCTL_BASE_URL: server.url,
          PROXYCTL_API_KEY: '',
          PROXYCTL_CONFIG_DIR: '',
        };
        const cli = (args: string[], input = '') =>
          new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
            const p = spawn(process.execPath, [path.join(ROOT, 'bin/proxyctl'), ...args], {
              env,
              stdio: ['pipe', 'pipe', 'pipe'],
            });
            let out = '';
            let err = '';
            p.stdout.on('data', (d) => (out += d));
            p.stderr.on('data', (d) => (err += d));
            p.on('exit', (code) => resolve({ code, out, err }));
            p.stdin.end(input);
          });
        const login = await cli(['login', '--json'], `${TOKEN}\n`);
        expect(login.code, login.err).toBe(0);
        expect(JSON.parse(login.out)).toMatchObject({ stored: 'keychain' });
        expect(login.err).toBe('');
        expect(existsSync(path.join(config, 'proxyctl', 'credentials.json'))).toBe(false);
        expect(lookup(server.url).stdout).toBe(TOKEN);
        const status = await cli(['auth', 'status', '--json']);
        expect(JSON.parse(status.out)).toMatchObject({ source: 'keychain', valid: true });
        expect((await cli(['logout'])).code).toBe(0);
        expect(lookup(server.url).status).not.toBe(0);
        for (const r of [login, status]) expect(r.out + r.err).not.toContain(TOKEN.split('.')[1]);
      } finally {
        await server.close();
      }
    },
  );

  it.skipIf(!BUILT)(
    'the built proxyctl: key set stores the API key beside the token (account api-key:<base URL>), key status reads it, key forget removes it',
    async () => {
      const KEY = 'pxk_kc1_' + 'K'.repeat(30);
      const server = await startScriptedServer((req) =>
        req.headers.authorization === `Bearer ${KEY}`
          ? { code: 200, data: { http: '127.0.0.1:3128', socks5: '127.0.0.1:1080', udp: false, locations: [] } }
          : { status: 401, code: 10401, message: 'invalid api key' },
      );
      try {
        const config = mkdtempSync(path.join(tmpdir(), 'proxyctl-kc-config-'));
        const env = {
          ...keyringEnv,
          XDG_CONFIG_HOME: config,
          PROXYCTL_BASE_URL: server.url,
          PROXYCTL_API_KEY: '',
          PROXYCTL_CONFIG_DIR: '',
        };
        const cli = (args: string[], input = '') =>
          new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
            const p = spawn(process.execPath, [path.join(ROOT, 'bin/proxyctl'), ...args], {
              env,
              stdio: ['pipe', 'pipe', 'pipe'],
            });
            let out = '';
            let err = '';
            p.stdout.on('data', (d) => (out += d));
            p.stderr.on('data', (d) => (err += d));
            p.on('exit', (code) => resolve({ code, out, err }));
            p.stdin.end(input);
          });
        const set = await cli(['key', 'set', '--json'], `${KEY}\n`);
        expect(set.code, set.err).toBe(0);
        expect(JSON.parse(set.out)).toEqual({ base_url: server.url, key_id: 'kc1', stored: 'keychain' });
        expect(set.err).toBe('');
        expect(existsSync(path.join(config, 'proxyctl', 'credentials.json'))).toBe(false);
        expect(lookup(`api-key:${server.url}`).stdout).toBe(KEY);
        // The token's entry (account = base URL) is another one.
        expect(lookup(server.url).status).not.toBe(0);
        const status = await cli(['key', 'status', '--json']);
        expect(JSON.parse(status.out)).toEqual({
          source: 'keychain',
          key_id: 'kc1',
          base_url: server.url,
          valid: true,
        });
        expect((await cli(['key', 'forget'])).code).toBe(0);
        expect(lookup(`api-key:${server.url}`).status).not.toBe(0);
        for (const r of [set, status]) expect(r.out + r.err).not.toContain('K'.repeat(30));
      } finally {
        await server.close();
      }
    },
  );
});
