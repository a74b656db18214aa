// Pieces every API command shares: the token lookup and API errors mapped to exit statuses.
import { parseToken } from '../../contract/index.js';
import { ApiError, isAuthError, isRateLimited, type WhitelistApi } from '../api.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { AuthError, CliError } from '../errors.js';
import { Exit } from '../exit-codes.js';
import { apiKeyId } from '../key-id.js';
import { isApiKeyShaped } from '../key-format.js';
import type { ResolvedToken, TokenSource } from '../token-store.js';

export interface Session {
  resolved: ResolvedToken;
  api: WhitelistApi;
}

/** The token for this base URL and a client, or exit 4 when there is none. */
export async function openSession(ctx: Context, deps: Deps): Promise<Session> {
  const resolved = await deps.tokens.resolve(ctx.baseUrl);
  if (!resolved)
    throw new AuthError(
      `no API token for ${ctx.baseUrl}${envKeyNote(deps.env)}; run \`proxyctl login\` or set PROXYCTL_API_KEY`,
    );
  if (!parseToken(resolved.token)) {
    throw new AuthError(
      `the API token from ${resolved.source === 'env' ? 'PROXYCTL_API_KEY' : `the ${resolved.source}`} is not in the <accessKey>.<secret> format`,
    );
  }
  warnIfPlainHttp(ctx, deps);
  return { resolved, api: deps.makeApi(ctx.baseUrl, resolved.token) };
}

/** PROXYCTL_API_KEY when it holds a token (not a `pxk_` key): what the whitelist commands take from it. */
export function envToken(env: NodeJS.ProcessEnv): string | undefined {
  const v = env.PROXYCTL_API_KEY?.trim();
  return v && !isApiKeyShaped(v) ? v : undefined;
}

/** Said when no token was found but PROXYCTL_API_KEY holds an API key: it does not open the whitelist. */
export function envKeyNote(env: NodeJS.ProcessEnv): string {
  const v = env.PROXYCTL_API_KEY?.trim();
  return v && isApiKeyShaped(v)
    ? ' (PROXYCTL_API_KEY holds an API key, which does not open the whitelist: the whitelist takes the account token)'
    : '';
}

/** The token rides in the query string: over plain HTTP to another host anyone on the path can read it. */
export function warnIfPlainHttp(ctx: Context, deps: Deps, what = 'API token'): void {
  const u = new URL(ctx.baseUrl);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host);
  if (u.protocol === 'http:' && !loopback)
    deps.out.warn(`${ctx.baseUrl} is plain HTTP: the ${what} travels unencrypted`);
}

/** What to do about a token the API rejects, by where the token came from. */
export function rejectedTokenHint(source: TokenSource | undefined): string {
  if (source === 'env')
    return 'PROXYCTL_API_KEY holds a token the API does not accept (reset or expired?): set it to a current token from the web console, Account page';
  return 'the token may have been reset or expired: get the current one from the web console (Account page), then run `proxyctl login`';
}

/** An API failure as a CLI error with the right exit status. */
export function apiFailure(err: unknown, source?: TokenSource): CliError {
  if (isAuthError(err))
    return new AuthError(`the API rejected the token: ${err.describe()}; ${rejectedTokenHint(source)}`);
  if (isRateLimited(err)) {
    const s = err.retryAfterMs !== undefined ? `; retry in ${Math.ceil(err.retryAfterMs / 1000)} s` : '';
    const what = err.message.startsWith('rate limited') ? err.describe() : `rate limited: ${err.describe()}`;
    return new CliError(`${what}${s}`, Exit.RATE_LIMITED);
  }
  if (err instanceof ApiError) return new CliError(err.describe(), Exit.ERROR);
  if (err instanceof CliError) return err;
  return new CliError(String((err as Error)?.message ?? err), Exit.ERROR);
}

export interface KeySession {
  resolved: ResolvedToken;
  /** The key's public id (what may be shown of it). */
  keyId: string;
  api: WhitelistApi;
}

/** How to get a key: every message about a missing or rejected key ends with it. */
export const KEY_HINT =
  'run `proxyctl key set` with a key from the web console (Account page, API keys), or set PROXYCTL_API_KEY to one (pxk_…)';

/** The API key for this base URL and a client on it (Bearer), or exit 4 saying how to get one. */
export async function openKeySession(ctx: Context, deps: Deps): Promise<KeySession> {
  const resolved = await deps.keys.resolve(ctx.baseUrl);
  if (!resolved) {
    const env = deps.env.PROXYCTL_API_KEY?.trim();
    // The account token opens only the whitelist: say so rather than "no key" alone.
    const token =
      env && parseToken(env) ? ' (PROXYCTL_API_KEY holds an account token, which opens only the whitelist)' : '';
    throw new AuthError(`no API key for ${ctx.baseUrl}${token}; ${KEY_HINT}`);
  }
  const keyId = apiKeyId(resolved.token);
  if (!keyId)
    throw new AuthError(
      `the API key from ${resolved.source === 'env' ? 'PROXYCTL_API_KEY' : `the ${resolved.source}`} is not in the pxk_<id>_<secret> format; ${KEY_HINT}`,
    );
  warnIfPlainHttp(ctx, deps, 'API key');
  return { resolved, keyId, api: deps.makeApi(ctx.baseUrl, resolved.token) };
}

/** A failure of an endpoint that takes the API key: 401 and 403 (a missing scope) are exit 4, the rest as apiFailure. */
export function keyFailure(err: unknown, session: Pick<KeySession, 'keyId' | 'resolved'>): CliError {
  if (isAuthError(err)) {
    const fix =
      session.resolved.source === 'env'
        ? 'set PROXYCTL_API_KEY to a current key'
        : 'run `proxyctl key set` with a current key';
    return new AuthError(
      `the API rejected the API key ${session.keyId} (revoked, expired, not allowed from this address, or another server's): ${err.describe()}; ${fix} from the web console (Account page, API keys)`,
    );
  }
  if (isMissingScope(err))
    return new AuthError(
      `${err.describe()}: the API key ${session.keyId} cannot do this; make a key with that scope in the web console (Account page, API keys) and run \`proxyctl key set\``,
    );
  return apiFailure(err);
}

/** 403 with 10403 on a key's endpoint: the key lacks the endpoint's scope (the message names it). */
export function isMissingScope(err: unknown): err is ApiError {
  return err instanceof ApiError && err.httpStatus === 403;
}

/** A batch run's Ctrl-C: the run stops after the request in flight, so its summary (and --failed-out) still say what was done; a second Ctrl-C quits at once. `release` stops listening. */
export function stopBetweenRequests(deps: Deps): { signal: AbortSignal; release: () => void } {
  const interrupt = new AbortController();
  const stop = deps.onInterrupt?.(() => {
    interrupt.abort();
    deps.out.warn('interrupted: stopping after the request in flight (Ctrl-C again to quit at once)');
  });
  return { signal: interrupt.signal, release: () => stop?.() };
}
