// Where the API token lives (docs/cli.md Where the token comes from): env PROXYCTL_API_KEY, then the OS keychain (service `proxyctl`,
// account = base URL), then a 0600 file in the config dir used only when no keychain answers. An API key (`pxk_…`, docs/cli.md
// "API keys") lives beside it the same way: PROXYCTL_API_KEY when it holds a key, the keychain's account
// `api-key:<base URL>`, the same file's `keys`. The env variable serves both: a value starting with `pxk_` is a key,
// anything else a token (docs/decisions.md#d-059).
import { chmod, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isApiKeyShaped } from './key-format.js';

export const KEYCHAIN_SERVICE = 'proxyctl';
const TOKEN_FILE_NAME = 'credentials.json';

export type TokenSource = 'env' | 'keychain' | 'file';

export interface ResolvedToken {
  token: string;
  source: TokenSource;
  /** The fallback file, when source is `file`. */
  file?: string;
}

/** The OS keychain. Every method throws KeychainUnavailable when no keychain answers. */
export interface Keychain {
  get(service: string, account: string): Promise<string | null>;
  set(service: string, account: string, secret: string): Promise<void>;
  delete(service: string, account: string): Promise<boolean>;
}

export class KeychainUnavailable extends Error {
  constructor(reason: string) {
    super(`no keychain available: ${reason}`);
    this.name = 'KeychainUnavailable';
  }
}

/**
 * The OS keychain through @napi-rs/keyring. On Linux it is pinned to the Secret Service: the kernel
 * keyring (the library's fallback) forgets everything at logout or reboot, so it is no place to keep a token.
 */
export function osKeychain(timeoutMs = 5000): Keychain {
  const entry = async (service: string, account: string) => {
    let mod: typeof import('@napi-rs/keyring');
    try {
      mod = await import('@napi-rs/keyring');
    } catch (err) {
      throw new KeychainUnavailable(`keyring module not loadable (${(err as Error).message})`);
    }
    try {
      return new mod.AsyncEntry(
        service,
        account,
        process.platform === 'linux' ? { linux: { store: 'secret-service' } } : undefined,
      );
    } catch (err) {
      throw new KeychainUnavailable(firstLine(err));
    }
  };
  const guard = async <T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      return await fn(signal);
    } catch (err) {
      throw new KeychainUnavailable(signal.aborted ? `no answer within ${timeoutMs} ms` : firstLine(err));
    }
  };
  return {
    async get(service, account) {
      const e = await entry(service, account);
      return guard((signal) => e.getPassword(signal));
    },
    async set(service, account, secret) {
      const e = await entry(service, account);
      await guard((signal) => e.setPassword(secret, signal));
    },
    async delete(service, account) {
      const e = await entry(service, account);
      return guard((signal) => e.deleteCredential(signal));
    },
  };
}

function firstLine(err: unknown): string {
  return String((err as Error)?.message ?? err).split('\n')[0] ?? 'unknown error';
}

interface TokenFile {
  version: 1;
  tokens: Record<string, string>;
  /** Base URLs whose stored token has been announced once ("using the token stored in …"). */
  noticed?: string[];
  /** API keys by base URL, and those announced once. */
  keys?: Record<string, string>;
  noticed_keys?: string[];
}

/** What a store holds: the account token (whitelist) or an API key (every other endpoint). */
export type CredentialKind = 'token' | 'key';

interface TokenStoreOptions {
  env: NodeJS.ProcessEnv;
  keychain: Keychain;
  /** Config dir that holds the fallback file. */
  dir: string;
  /** One-line warnings (stderr). */
  warn: (msg: string) => void;
  /** --quiet: the one-time fallback-file notice is not shown (and stays due). */
  quiet?: boolean;
  /** Default `token`. */
  kind?: CredentialKind;
}

type SaveResult = { where: 'keychain' } | { where: 'file'; file: string; reason: string };

export class TokenStore {
  readonly #opts: TokenStoreOptions;
  readonly #kind: CredentialKind;
  constructor(opts: TokenStoreOptions) {
    this.#opts = opts;
    this.#kind = opts.kind ?? 'token';
  }

  /** The keychain's account name for this base URL. */
  #account(baseUrl: string): string {
    return this.#kind === 'key' ? `api-key:${baseUrl}` : baseUrl;
  }

  /** This kind's map in the file, and its notice list (created when absent). */
  #map(data: TokenFile): Record<string, string> {
    if (this.#kind === 'token') return data.tokens;
    return (data.keys ??= {});
  }
  #noticed(data: TokenFile): string[] | undefined {
    return this.#kind === 'token' ? data.noticed : data.noticed_keys;
  }
  #setNoticed(data: TokenFile, list: string[] | undefined): void {
    if (this.#kind === 'token') data.noticed = list;
    else data.noticed_keys = list;
  }
  get #what(): string {
    return this.#kind === 'token' ? 'API token' : 'API key';
  }

  get file(): string {
    return path.join(this.#opts.dir, TOKEN_FILE_NAME);
  }

  /** First hit wins: env, keychain, fallback file. Null when none holds a token. */
  async resolve(baseUrl: string): Promise<ResolvedToken | null> {
    const fromEnv = this.#opts.env.PROXYCTL_API_KEY?.trim();
    // One variable for both: a `pxk_` value is a key, anything else a token.
    if (fromEnv && isApiKeyShaped(fromEnv) === (this.#kind === 'key')) return { token: fromEnv, source: 'env' };
    try {
      const t = await this.#opts.keychain.get(KEYCHAIN_SERVICE, this.#account(baseUrl));
      if (t) return { token: t, source: 'keychain' };
    } catch (err) {
      if (!(err instanceof KeychainUnavailable)) throw err;
    }
    const data = await this.#readFile();
    const t = this.#map(data)[baseUrl];
    if (!t) return null;
    // Once per stored token, not on every command: after that the user knows where it lives.
    const noticed = this.#noticed(data);
    if (!this.#opts.quiet && !noticed?.includes(baseUrl)) {
      this.#opts.warn(
        `using the ${this.#what} stored in ${this.file} (no keychain available); this notice is shown once`,
      );
      this.#setNoticed(data, [...(noticed ?? []), baseUrl]);
      await this.#writeAll(data).catch(() => {});
    }
    return { token: t, source: 'file', file: this.file };
  }

  /** Stores in the keychain when one answers, else in the 0600 file (with a warning naming it). */
  async save(baseUrl: string, token: string): Promise<SaveResult> {
    try {
      await this.#opts.keychain.set(KEYCHAIN_SERVICE, this.#account(baseUrl), token);
      // A stale file copy would shadow nothing, but must not linger with an old secret.
      await this.#removeFileToken(baseUrl);
      return { where: 'keychain' };
    } catch (err) {
      if (!(err instanceof KeychainUnavailable)) throw err;
      await this.#writeFileToken(baseUrl, token);
      this.#opts.warn(`no keychain available; the ${this.#what} is stored in ${this.file} (mode 0600)`);
      return { where: 'file', file: this.file, reason: err.message };
    }
  }

  /** Removes the token for this base URL from the keychain and the file. */
  async remove(baseUrl: string): Promise<{ keychain: boolean; file: boolean }> {
    let keychain = false;
    try {
      keychain = await this.#opts.keychain.delete(KEYCHAIN_SERVICE, this.#account(baseUrl));
    } catch (err) {
      if (!(err instanceof KeychainUnavailable)) throw err;
    }
    const file = await this.#removeFileToken(baseUrl);
    return { keychain, file };
  }

  async #readFile(): Promise<TokenFile> {
    let text: string;
    try {
      const st = await stat(this.file);
      if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
        await chmod(this.file, 0o600);
        this.#opts.warn(`${this.file} was readable by others; its mode is now 0600`);
      }
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, tokens: {} };
      throw err;
    }
    try {
      const parsed = JSON.parse(text) as Partial<TokenFile>;
      const strings = (m: unknown): Record<string, string> => {
        const out: Record<string, string> = {};
        if (m && typeof m === 'object') for (const [k, v] of Object.entries(m)) if (typeof v === 'string') out[k] = v;
        return out;
      };
      const tokens = strings(parsed?.tokens);
      const keys = strings(parsed?.keys);
      const urls = (l: unknown, of: Record<string, string>) =>
        Array.isArray(l) ? l.filter((u): u is string => typeof u === 'string' && u in of) : [];
      return {
        version: 1,
        tokens,
        noticed: urls(parsed?.noticed, tokens),
        keys,
        noticed_keys: urls(parsed?.noticed_keys, keys),
      };
    } catch {
      this.#opts.warn(`${this.file} is not valid JSON; ignoring it`);
      return { version: 1, tokens: {} };
    }
  }

  async #writeFileToken(baseUrl: string, token: string): Promise<void> {
    const data = await this.#readFile();
    this.#map(data)[baseUrl] = token;
    this.#setNoticed(
      data,
      this.#noticed(data)?.filter((u) => u !== baseUrl),
    );
    await this.#writeAll(data);
  }

  async #removeFileToken(baseUrl: string): Promise<boolean> {
    const data = await this.#readFile();
    const map = this.#map(data);
    if (!(baseUrl in map)) return false;
    delete map[baseUrl];
    this.#setNoticed(
      data,
      this.#noticed(data)?.filter((u) => u !== baseUrl),
    );
    if (Object.keys(data.tokens).length === 0 && Object.keys(data.keys ?? {}).length === 0)
      await unlink(this.file).catch(() => {});
    else await this.#writeAll(data);
    return true;
  }

  async #writeAll(data: TokenFile): Promise<void> {
    await mkdir(this.#opts.dir, { recursive: true, mode: 0o700 });
    // Written under a temp name created 0600, then renamed: never a moment with wider permissions.
    const tmp = `${this.file}.${process.pid}.tmp`;
    // A file of tokens only keeps its old shape: `keys` appears once a key is stored.
    const { keys, noticed_keys, ...rest } = data;
    const doc =
      keys && Object.keys(keys).length > 0
        ? { ...rest, keys, ...(noticed_keys?.length ? { noticed_keys } : {}) }
        : rest;
    await writeFile(tmp, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600, flag: 'w' });
    await chmod(tmp, 0o600);
    await rename(tmp, this.file);
  }
}
