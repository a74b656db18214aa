// Where the API token lives (docs/cli.md Where the token comes from): env PROXYCTL_API_KEY, then the OS keychain (service `proxyctl`,
// account = base URL), then a 0600 file in the config dir used only when no keychain answers.
import { chmod, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';

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
      return new mod.AsyncEntry(service, account, process.platform === 'linux' ? { linux: { store: 'secret-service' } } : undefined);
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
}

interface TokenStoreOptions {
  env: NodeJS.ProcessEnv;
  keychain: Keychain;
  /** Config dir that holds the fallback file. */
  dir: string;
  /** One-line warnings (stderr). */
  warn: (msg: string) => void;
  /** --quiet: the one-time fallback-file notice is not shown (and stays due). */
  quiet?: boolean;
}

type SaveResult = { where: 'keychain' } | { where: 'file'; file: string; reason: string };

export class TokenStore {
  readonly #opts: TokenStoreOptions;
  constructor(opts: TokenStoreOptions) {
    this.#opts = opts;
  }

  get file(): string {
    return path.join(this.#opts.dir, TOKEN_FILE_NAME);
  }

  /** First hit wins: env, keychain, fallback file. Null when none holds a token. */
  async resolve(baseUrl: string): Promise<ResolvedToken | null> {
    const fromEnv = this.#opts.env.PROXYCTL_API_KEY?.trim();
    if (fromEnv) return { token: fromEnv, source: 'env' };
    try {
      const t = await this.#opts.keychain.get(KEYCHAIN_SERVICE, baseUrl);
      if (t) return { token: t, source: 'keychain' };
    } catch (err) {
      if (!(err instanceof KeychainUnavailable)) throw err;
    }
    const data = await this.#readFile();
    const t = data.tokens[baseUrl];
    if (!t) return null;
    // Once per stored token, not on every command: after that the user knows where it lives.
    if (!this.#opts.quiet && !data.noticed?.includes(baseUrl)) {
      this.#opts.warn(`using the API token stored in ${this.file} (no keychain available); this notice is shown once`);
      data.noticed = [...(data.noticed ?? []), baseUrl];
      await this.#writeAll(data).catch(() => {});
    }
    return { token: t, source: 'file', file: this.file };
  }

  /** Stores in the keychain when one answers, else in the 0600 file (with a warning naming it). */
  async save(baseUrl: string, token: string): Promise<SaveResult> {
    try {
      await this.#opts.keychain.set(KEYCHAIN_SERVICE, baseUrl, token);
      // A stale file copy would shadow nothing, but must not linger with an old secret.
      await this.#removeFileToken(baseUrl);
      return { where: 'keychain' };
    } catch (err) {
      if (!(err instanceof KeychainUnavailable)) throw err;
      await this.#writeFileToken(baseUrl, token);
      this.#opts.warn(`no keychain available; the API token is stored in ${this.file} (mode 0600)`);
      return { where: 'file', file: this.file, reason: err.message };
    }
  }

  /** Removes the token for this base URL from the keychain and the file. */
  async remove(baseUrl: string): Promise<{ keychain: boolean; file: boolean }> {
    let keychain = false;
    try {
      keychain = await this.#opts.keychain.delete(KEYCHAIN_SERVICE, baseUrl);
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
      const tokens: Record<string, string> = {};
      if (parsed && typeof parsed.tokens === 'object' && parsed.tokens) {
        for (const [k, v] of Object.entries(parsed.tokens)) if (typeof v === 'string') tokens[k] = v;
      }
      const noticed = Array.isArray(parsed.noticed) ? parsed.noticed.filter((u): u is string => typeof u === 'string' && u in tokens) : [];
      return { version: 1, tokens, noticed };
    } catch {
      this.#opts.warn(`${this.file} is not valid JSON; ignoring it`);
      return { version: 1, tokens: {} };
    }
  }

  async #writeFileToken(baseUrl: string, token: string): Promise<void> {
    const data = await this.#readFile();
    data.tokens[baseUrl] = token;
    data.noticed = data.noticed?.filter((u) => u !== baseUrl);
    await this.#writeAll(data);
  }

  async #removeFileToken(baseUrl: string): Promise<boolean> {
    const data = await this.#readFile();
    if (!(baseUrl in data.tokens)) return false;
    delete data.tokens[baseUrl];
    data.noticed = data.noticed?.filter((u) => u !== baseUrl);
    if (Object.keys(data.tokens).length === 0) await unlink(this.file).catch(() => {});
    else await this.#writeAll(data);
    return true;
  }

  async #writeAll(data: TokenFile): Promise<void> {
    await mkdir(this.#opts.dir, { recursive: true, mode: 0o700 });
    // Written under a temp name created 0600, then renamed: never a moment with wider permissions.
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600, flag: 'w' });
    await chmod(tmp, 0o600);
    await rename(tmp, this.file);
  }
}
