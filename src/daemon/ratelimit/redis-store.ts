// Window store in Redis, shared by every daemon and host using it. The sliding-window log is a sorted set
// per key, read and written by one Lua script per decision, so concurrent daemons never over-admit.
// Fails fast (no offline queue, short command timeout) so ApiLimits answers 503 instead of waiting or
// bypassing; the client reconnects on its own, so service returns without a restart. Only while the first
// connection is still being made does a command wait for it (within ApiLimits' 500 ms bound).
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';
import type { WindowDecision } from '../store/types.js';
import type { WindowStore } from './limiter.js';

const REDIS_KEY_PREFIX = 'proxyd:rl:';

/**
 * ioredis, loaded when a Redis store is made, not with this module: loading it defines a class that extends
 * `String` (its RESP3 VerbatimString), which turns String.prototype into a dictionary for good, and every
 * string method call in the process (the gateway's parsing included) then goes through V8's generic lookup
 * (docs/decisions.md#d-042, "ioredis loaded only with --redis-url").
 */
function loadRedis(): typeof Redis {
  return (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis;
}
/** How long a command waits for the first connection: inside ApiLimits' 500 ms bound. */
const FIRST_CONNECTION_WAIT_MS = 400;

// KEYS[1] key; ARGV limit, windowMs, nowMs, member. Returns {allowed 0|1, count, oldest score or -1}.
const CONSUME_LUA = `
local since = tonumber(ARGV[3]) - tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', since)
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  n = n + 1
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {1, n, first[2]}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, n, first[2] or '-1'}
`;

// KEYS[1] key; ARGV windowMs, nowMs. Read-only count of hits in (now - window, now].
const PEEK_LUA = `
local since = tonumber(ARGV[2]) - tonumber(ARGV[1])
local n = redis.call('ZCOUNT', KEYS[1], '(' .. since, '+inf')
local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. since, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {n, first[2] or '-1'}
`;

// KEYS[1] key; ARGV windowMs, nowMs, member. Unconditional hit; trims what left the window.
const RECORD_LUA = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`;

type Reply = Array<number | string>;

interface WindowCommands {
  proxydWindowConsume(key: string, limit: number, windowMs: number, nowMs: number, member: string): Promise<Reply>;
  proxydWindowPeek(key: string, windowMs: number, nowMs: number): Promise<Reply>;
  proxydWindowRecord(key: string, windowMs: number, nowMs: number, member: string): Promise<number>;
}

interface RedisStoreOptions {
  /** A command without a reply within this fails (ApiLimits' own bound is 500 ms). */
  commandTimeoutMs?: number;
  /** Called when the connection state changes (for one log line per outage, not one per request). */
  onStateChange?: (up: boolean, detail: string) => void;
  /** Extra ioredis options (tests). */
  redis?: Partial<RedisOptions>;
}

/** Client settings that make every command fail fast while Redis is away, and reconnect forever. */
function redisClientOptions(commandTimeoutMs = 300): RedisOptions {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    // Keep trying: 50 ms, 100 ms, … capped at 1 s, so service is back within about a second of Redis.
    retryStrategy: (times: number) => Math.min(times * 50, 1000),
    // A reply may be lost with the connection: never resend (a resent hit would count twice).
    autoResendUnfulfilledCommands: false,
    connectionName: 'proxyd',
  };
}

/** Settles when `p` does or after `ms`, whichever comes first. */
async function atMost(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

function member(nowMs: number): string {
  return `${nowMs}-${randomBytes(8).toString('hex')}`;
}

function oldest(v: number | string | undefined): number | null {
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

export class RedisWindowStore implements WindowStore {
  readonly kind = 'redis' as const;
  readonly client: Redis;
  private readonly cmd: WindowCommands;
  /** `connecting` until the first connection is made or start-up gives up on it (ready()). */
  private state: 'connecting' | 'up' | 'down' = 'connecting';
  private lastError = 'not connected yet';
  private readonly firstConnection: Promise<void>;
  private settleFirst!: () => void;

  constructor(
    url: string,
    private readonly opts: RedisStoreOptions = {},
  ) {
    this.firstConnection = new Promise((resolve) => (this.settleFirst = resolve));
    this.client = new (loadRedis())(url, { ...redisClientOptions(opts.commandTimeoutMs), ...opts.redis });
    this.client.defineCommand('proxydWindowConsume', { numberOfKeys: 1, lua: CONSUME_LUA });
    this.client.defineCommand('proxydWindowPeek', { numberOfKeys: 1, lua: PEEK_LUA, readOnly: true });
    this.client.defineCommand('proxydWindowRecord', { numberOfKeys: 1, lua: RECORD_LUA });
    this.cmd = this.client as unknown as WindowCommands;
    this.client.on('ready', () => {
      if (this.state !== 'up') opts.onStateChange?.(true, 'connected');
      this.state = 'up';
      this.settleFirst();
    });
    // Without a listener ioredis reports every failed reconnect as an unhandled error.
    this.client.on('error', (e: Error) => {
      this.lastError = e.message;
      if (this.state === 'up') this.markDown(e.message);
    });
    this.client.on('close', () => {
      if (this.state === 'up') this.markDown('connection closed');
    });
  }

  private markDown(detail: string): void {
    this.state = 'down';
    this.opts.onStateChange?.(false, detail);
    this.settleFirst();
  }

  /** Waits at most `ms` for the first connection; if it is still away, the outage starts now (one redis_down). */
  async ready(ms: number): Promise<boolean> {
    if (this.state === 'connecting') {
      await atMost(this.firstConnection, ms);
      if (!this.isUp()) this.markDown(this.lastError);
    }
    return this.isUp();
  }

  // A method, not a field read: the state changes across an await.
  private isUp(): boolean {
    return this.state === 'up';
  }

  /** A command sent before the first connection waits for it (bounded: never sent after its caller gave up). */
  private async connected(): Promise<void> {
    if (this.state !== 'connecting') return;
    await atMost(this.firstConnection, FIRST_CONNECTION_WAIT_MS);
    if (!this.isUp()) throw new Error(`Redis not connected yet (${this.lastError})`);
  }

  private k(key: string): string {
    return REDIS_KEY_PREFIX + key;
  }

  async consume(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision> {
    await this.connected();
    const r = await this.cmd.proxydWindowConsume(this.k(key), limit, windowMs, nowMs, member(nowMs));
    return { allowed: Number(r[0]) === 1, count: Number(r[1]), oldestAtMs: oldest(r[2]) };
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision> {
    await this.connected();
    const r = await this.cmd.proxydWindowPeek(this.k(key), windowMs, nowMs);
    return { allowed: true, count: Number(r[0]), oldestAtMs: oldest(r[1]) };
  }

  async record(key: string, nowMs: number, windowMs: number): Promise<void> {
    await this.connected();
    await this.cmd.proxydWindowRecord(this.k(key), windowMs, nowMs, member(nowMs));
  }

  async healthy(): Promise<boolean> {
    try {
      return (await this.client.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.settleFirst();
    this.client.disconnect(false);
  }
}
