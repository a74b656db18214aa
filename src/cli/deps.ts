// The real dependencies of a command: process streams, wall clock, OS keychain, undici client, ora.
import type { WhitelistApi } from './api.js';
import type { CheckDeps } from './check/types.js';
import type { Context } from './context.js';
import { processIo, type Io } from './io.js';
import { createOutput, type Output } from './output.js';
import type { Clock } from './pacer.js';
import type { Progress } from './progress.js';
import { TokenStore } from './token-store.js';
import { VERSION } from '../contract/version.js';

export interface Deps {
  io: Io;
  env: NodeJS.ProcessEnv;
  clock: Clock;
  out: Output;
  tokens: TokenStore;
  /** The API key (`pxk_…`) store: beside the token, the same fallback. */
  keys: TokenStore;
  /** A client for a credential: a token goes as api_key, an API key as a Bearer credential. */
  makeApi(baseUrl: string, token: string): WhitelistApi;
  /** Hidden prompt on a TTY. */
  readSecret(question: string): Promise<string>;
  /** A progress display, or null where none should be drawn. */
  progress(): Promise<Progress | null>;
  /** Replaces the check's resolver and monotonic clock (tests). */
  check?: Partial<CheckDeps>;
  /** Calls `handler` on the first Ctrl-C (SIGINT) until the returned function is called; absent: Ctrl-C ends the process. */
  onInterrupt?(handler: () => void): () => void;
}

const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
    }),
};

/** The first Ctrl-C goes to `handler`; a second one ends the process as Ctrl-C would have. */
function onSigint(handler: () => void): () => void {
  let first = true;
  const listener = () => {
    if (first) {
      first = false;
      handler();
      return;
    }
    process.off('SIGINT', listener);
    process.kill(process.pid, 'SIGINT');
  };
  process.on('SIGINT', listener);
  return () => void process.off('SIGINT', listener);
}

/**
 * The API client loads zod and the contract's schemas (~150 ms of start-up): it is loaded on a command's
 * first API call, so `proxyctl check` and the local commands never pay for it.
 */
function lazyApi(make: () => Promise<WhitelistApi>): WhitelistApi {
  let client: Promise<WhitelistApi> | null = null;
  const get = () => (client ??= make());
  return {
    list: async (params) => (await get()).list(params),
    add: async (items) => (await get()).add(items),
    delete: async (ips) => (await get()).delete(ips),
    usageSummary: async (params) => (await get()).usageSummary(params),
    usageSeries: async (params) => (await get()).usageSeries(params),
    usageDomains: async (params) => (await get()).usageDomains(params),
    request: async (method, path, opts) => (await get()).request(method, path, opts),
    close: async () => {
      if (client) await (await client).close();
    },
  };
}

export async function createDeps(
  ctx: Context,
  io: Io = processIo(),
  env: NodeJS.ProcessEnv = process.env,
): Promise<Deps> {
  const { osKeychain } = await import('./token-store.js');
  const out = createOutput(io, { color: ctx.color, json: ctx.json, quiet: ctx.quiet });
  const keychain = osKeychain();
  return {
    io,
    env,
    clock: realClock,
    out,
    tokens: new TokenStore({ env, keychain, dir: ctx.configDir, warn: (m) => out.warn(m), quiet: ctx.quiet }),
    keys: new TokenStore({
      env,
      keychain,
      dir: ctx.configDir,
      warn: (m) => out.warn(m),
      quiet: ctx.quiet,
      kind: 'key',
    }),
    makeApi: (baseUrl, token) =>
      lazyApi(async () => {
        const { ApiClient } = await import('./api.js');
        return new ApiClient({ baseUrl, token, userAgent: `proxyctl/${VERSION}` });
      }),
    readSecret: async (q) => (await import('./prompt.js')).readHidden(io.stdin, io.stderr, q),
    progress: async () => {
      if (ctx.quiet || !io.stderrIsTTY || !io.progressStream) return null;
      const { createSpinner } = await import('./progress.js');
      return createSpinner(io.progressStream, ctx.color);
    },
    onInterrupt: onSigint,
  };
}
