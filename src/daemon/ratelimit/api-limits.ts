// The API's limits: per token per route, and invalid-token attempts per source IP. Fails closed.
import {
  KEY_LIMITS,
  RATE_LIMITS,
  RATE_WINDOW_MS,
  INVALID_TOKEN_LIMIT,
  type LimitedRoute,
} from '../../contract/paths.js';
import { LimiterUnavailableError, retryAfterSeconds, type WindowStore } from './limiter.js';

export interface LimitSettings {
  perRoute: Record<LimitedRoute, number>;
  invalidTokenPerIp: number;
  /** Per API key per rolling window: reads and writes (`--key-limits READS,WRITES`). */
  keyReads: number;
  keyWrites: number;
  windowMs: number;
  /** A store that does not answer within this is treated as down (503). */
  storeTimeoutMs: number;
}

export const DEFAULT_LIMITS: LimitSettings = {
  perRoute: { ...RATE_LIMITS },
  invalidTokenPerIp: INVALID_TOKEN_LIMIT,
  keyReads: KEY_LIMITS.reads,
  keyWrites: KEY_LIMITS.writes,
  windowMs: RATE_WINDOW_MS,
  storeTimeoutMs: 500,
};

/** `list=60,add=10,delete=10,usage=60,invalid=20` (operator / bench override). */
export function parseLimitOverrides(s: string | undefined, base: LimitSettings = DEFAULT_LIMITS): LimitSettings {
  const out: LimitSettings = { ...base, perRoute: { ...base.perRoute } };
  if (!s) return out;
  for (const part of s.split(',')) {
    const [k, v] = part.split('=').map((x) => x.trim());
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`bad rate limit "${part}"`);
    if (k === 'list' || k === 'add' || k === 'delete' || k === 'usage') out.perRoute[k] = n;
    else if (k === 'invalid') out.invalidTokenPerIp = n;
    else throw new Error(`unknown rate limit "${k}"`);
  }
  return out;
}

type LimitVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** The window keys: invalid-token hits per source IP, and hits per token and route. */
export const badTokenKey = (ip: string): string => `bad:${ip}`;
export const tokenRouteKey = (accessKey: string, route: LimitedRoute): string => `tok:${route}:${accessKey}`;
/** Hits per API key, reads and writes apart, and per key on a route with a limit of its own (usage). */
export const keyKindKey = (keyId: string, kind: 'read' | 'write'): string =>
  `key:${kind === 'read' ? 'r' : 'w'}:${keyId}`;
export const keyRouteKey = (keyId: string, route: LimitedRoute): string => `key:${route}:${keyId}`;

/** `--key-limits READS,WRITES`: two integers 1..1000000; null when it is not that. */
export function parseKeyLimits(s: string): { reads: number; writes: number } | null {
  const m = /^\s*(\d{1,7})\s*,\s*(\d{1,7})\s*$/.exec(s);
  if (!m) return null;
  const [reads, writes] = [Number(m[1]), Number(m[2])];
  return reads >= 1 && writes >= 1 && reads <= 1_000_000 && writes <= 1_000_000 ? { reads, writes } : null;
}

export class ApiLimits {
  constructor(
    private readonly store: WindowStore,
    readonly settings: LimitSettings = DEFAULT_LIMITS,
    private readonly nowMs: () => number = Date.now,
  ) {}

  get storeKind(): string {
    return this.store.kind;
  }

  /** Seconds until a refused key may try again. */
  retryAfter(oldestAtMs: number | null, nowMs: number): number {
    return retryAfterSeconds({ allowed: false, count: 0, oldestAtMs }, this.settings.windowMs, nowMs);
  }

  private async bounded<T>(p: Promise<T>): Promise<T> {
    // The in-process store answers synchronously and cannot hang: no timer per call on the hot path.
    if (this.store.kind === 'memory') return p;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LimiterUnavailableError('timeout')), this.settings.storeTimeoutMs);
    });
    try {
      return await Promise.race([p, timeout]);
    } catch (e) {
      throw e instanceof LimiterUnavailableError ? e : new LimiterUnavailableError(e);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Is this source IP locked out after too many invalid tokens? Checked before the token. */
  async checkSourceIp(ip: string): Promise<LimitVerdict> {
    const now = this.nowMs();
    const d = await this.bounded(this.store.peek(badTokenKey(ip), this.settings.windowMs, now));
    if (d.count < this.settings.invalidTokenPerIp) return { allowed: true };
    return { allowed: false, retryAfterSeconds: retryAfterSeconds(d, this.settings.windowMs, now) };
  }

  async recordInvalidToken(ip: string): Promise<void> {
    await this.bounded(this.store.record(badTokenKey(ip), this.nowMs(), this.settings.windowMs));
  }

  async consumeToken(accessKey: string, route: LimitedRoute): Promise<LimitVerdict> {
    const now = this.nowMs();
    const d = await this.bounded(
      this.store.consume(tokenRouteKey(accessKey, route), this.settings.perRoute[route], this.settings.windowMs, now),
    );
    if (d.allowed) return { allowed: true };
    return { allowed: false, retryAfterSeconds: retryAfterSeconds(d, this.settings.windowMs, now) };
  }

  /** A request of an API key: its reads or writes per rolling window, then (`route`) a route's own limit per key. */
  async consumeKey(keyId: string, kind: 'read' | 'write', route?: LimitedRoute): Promise<LimitVerdict> {
    const now = this.nowMs();
    const limit = kind === 'read' ? this.settings.keyReads : this.settings.keyWrites;
    const d = await this.bounded(this.store.consume(keyKindKey(keyId, kind), limit, this.settings.windowMs, now));
    if (!d.allowed) return { allowed: false, retryAfterSeconds: retryAfterSeconds(d, this.settings.windowMs, now) };
    if (route === undefined) return { allowed: true };
    const r = await this.bounded(
      this.store.consume(keyRouteKey(keyId, route), this.settings.perRoute[route], this.settings.windowMs, now),
    );
    if (r.allowed) return { allowed: true };
    return { allowed: false, retryAfterSeconds: retryAfterSeconds(r, this.settings.windowMs, now) };
  }

  healthy(): Promise<boolean> {
    return this.bounded(this.store.healthy()).catch(() => false);
  }

  /** Waits (at most `ms`) for a store that connects; true when it serves. */
  async ready(ms: number): Promise<boolean> {
    return (await this.store.ready?.(ms)) ?? true;
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
