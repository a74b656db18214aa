// Failed console log-ins, counted per account (email) and per source IP over a rolling window.
// In process memory: with several workers each counts on its own (the limit is then per worker).

export interface LoginLimits {
  perAccount: number;
  perSourceIp: number;
  windowMs: number;
}

const DEFAULT_LOGIN_LIMITS: LoginLimits = { perAccount: 10, perSourceIp: 20, windowMs: 15 * 60 * 1000 };

export class LoginLimiter {
  private readonly failures = new Map<string, number[]>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
    private readonly nowMs: () => number = Date.now,
  ) {
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  static keys(email: string, sourceIp: string): { account: string; ip: string } {
    return { account: `account:${email.trim().toLowerCase()}`, ip: `ip:${sourceIp}` };
  }

  private live(key: string): number[] {
    const since = this.nowMs() - this.limits.windowMs;
    const list = (this.failures.get(key) ?? []).filter((t) => t > since);
    if (list.length) this.failures.set(key, list);
    else this.failures.delete(key);
    return list;
  }

  /** Seconds to wait before another attempt is allowed, or 0 when allowed. */
  retryAfterSec(keys: { account: string; ip: string }): number {
    let wait = 0;
    for (const [key, limit] of [
      [keys.account, this.limits.perAccount],
      [keys.ip, this.limits.perSourceIp],
    ] as const) {
      const list = this.live(key);
      if (list.length >= limit) {
        const freeAt = list[list.length - limit]! + this.limits.windowMs;
        wait = Math.max(wait, Math.ceil((freeAt - this.nowMs()) / 1000));
      }
    }
    return wait;
  }

  recordFailure(keys: { account: string; ip: string }): void {
    const now = this.nowMs();
    for (const key of [keys.account, keys.ip]) {
      const list = this.live(key);
      list.push(now);
      this.failures.set(key, list);
    }
  }

  /** A successful log-in clears the account's count (not the source IP's). */
  recordSuccess(keys: { account: string; ip: string }): void {
    this.failures.delete(keys.account);
  }

  private sweep(): void {
    for (const key of [...this.failures.keys()]) this.live(key);
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
