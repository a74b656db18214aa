// The API's limits: per token per route, and invalid-token attempts per source IP. Fails closed.
import { RATE_LIMITS, RATE_WINDOW_MS, INVALID_TOKEN_LIMIT, type LimitedRoute } from '../../contract/paths.js';
import { LimiterUnavailableError, retryAfterSeconds, type WindowStore } from './limiter.js';

export interface LimitSettings {
  perRoute: Record<LimitedRoute, number>;
  invalidTokenPerIp: number;
  windowMs: number;
  /** A store that does not answer within this is treated as down (503). */
  storeTimeoutMs: number;
}

export const DEFAULT_LIMITS: LimitSettings = {
  perRoute: { ...RATE_LIMITS },
  invalidTokenPerIp: INVALID_TOKEN_LIMIT,
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
    const d = await this.bounded(this.store.consume(tokenRouteKey(accessKey, route), this.settings.perRoute[route], this.settings.windowMs, now));
    if (d.allowed) return { allowed: true };
    return { allowed: false, retryAfterSeconds: retryAfterSeconds(d, this.settings.windowMs, now) };
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
