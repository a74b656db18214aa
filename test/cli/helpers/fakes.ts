// Fake clock, in-memory streams and keychain, and a Deps built from them.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ApiClient } from '../../../src/cli/api.js';
import { resolveContext, type Context, type GlobalOptions } from '../../../src/cli/context.js';
import type { Deps } from '../../../src/cli/deps.js';
import type { Io } from '../../../src/cli/io.js';
import { createOutput } from '../../../src/cli/output.js';
import type { Clock } from '../../../src/cli/pacer.js';
import { KeychainUnavailable, TokenStore, type Keychain } from '../../../src/cli/token-store.js';

export const TOKEN = 'ak0123456789abcdef0123.' + 'S'.repeat(40) + 'abc';
export const OTHER_TOKEN = 'akfedcba9876543210fedc.' + 'T'.repeat(40) + 'xyz';

/** Virtual time: sleep advances it at once and is recorded. */
export class FakeClock implements Clock {
  t = 1_700_000_000_000;
  readonly sleeps: number[] = [];
  now = (): number => this.t;
  sleep = async (ms: number): Promise<void> => {
    this.sleeps.push(ms);
    this.t += ms;
  };
}

export class MemoryKeychain implements Keychain {
  readonly entries = new Map<string, string>();
  available = true;
  async get(service: string, account: string) {
    if (!this.available) throw new KeychainUnavailable('test: none');
    return this.entries.get(`${service}|${account}`) ?? null;
  }
  async set(service: string, account: string, secret: string) {
    if (!this.available) throw new KeychainUnavailable('test: none');
    this.entries.set(`${service}|${account}`, secret);
  }
  async delete(service: string, account: string) {
    if (!this.available) throw new KeychainUnavailable('test: none');
    return this.entries.delete(`${service}|${account}`);
  }
}

export interface TestIo extends Io {
  out(): string;
  err(): string;
}

export function memoryIo(opts: { stdin?: string; tty?: boolean } = {}): TestIo {
  let out = '';
  let err = '';
  return {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    stdin: Readable.from(opts.stdin !== undefined ? [Buffer.from(opts.stdin)] : []),
    stdoutIsTTY: opts.tty === true,
    stderrIsTTY: opts.tty === true,
    stdinIsTTY: opts.tty === true && opts.stdin === undefined,
    out: () => out,
    err: () => err,
  };
}

export function tempConfigDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'proxyctl-cli-test-'));
}

export interface Harness {
  ctx: Context;
  deps: Deps;
  io: TestIo;
  clock: FakeClock;
  keychain: MemoryKeychain;
  dir: string;
}

export function harness(
  baseUrl: string,
  opts: {
    globals?: GlobalOptions;
    env?: NodeJS.ProcessEnv;
    stdin?: string;
    tty?: boolean;
    dir?: string;
    keychain?: MemoryKeychain;
    secret?: string;
  } = {},
): Harness {
  const io = memoryIo({
    ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
    ...(opts.tty !== undefined ? { tty: opts.tty } : {}),
  });
  const env = opts.env ?? {};
  const dir = opts.dir ?? tempConfigDir();
  const ctx = resolveContext({ baseUrl, ...opts.globals }, env, io, {}, dir);
  const clock = new FakeClock();
  const keychain = opts.keychain ?? new MemoryKeychain();
  const out = createOutput(io, { color: ctx.color, json: ctx.json, quiet: ctx.quiet });
  const deps: Deps = {
    io,
    env,
    clock,
    out,
    tokens: new TokenStore({ env, keychain, dir, warn: (m) => out.warn(m) }),
    keys: new TokenStore({ env, keychain, dir, warn: (m) => out.warn(m), kind: 'key' }),
    makeApi: (b, t) => new ApiClient({ baseUrl: b, token: t, timeoutMs: 2000 }),
    readSecret: async () => opts.secret ?? '',
    progress: async () => null,
  };
  return { ctx, deps, io, clock, keychain, dir };
}

/** n distinct public test addresses outside mainland China (8.8.x.x, 9.9.x.x). */
export function publicIps(n: number, prefix = '8.8'): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}.${Math.floor(i / 250)}.${(i % 250) + 1}`);
}
