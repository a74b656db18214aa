// `proxyctl login [--with-token]`: read the token, check its format and that the API accepts it, store it.
import { parseToken } from '../../contract/index.js';
import { isAuthError } from '../api.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { AuthError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { readAll } from '../io.js';
import { isApiKeyShaped } from '../key-format.js';
import { apiFailure, envToken, warnIfPlainHttp } from './shared.js';

interface LoginOptions {
  ctx: Context;
  withToken: boolean;
}

export async function runLogin(opts: LoginOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out, io } = deps;
  let raw: string;
  if (opts.withToken || !io.stdinIsTTY) {
    raw =
      (await readAll(io.stdin))
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l !== '') ?? '';
  } else {
    out.info(`Paste the API token for ${ctx.baseUrl} (from the web console, Account page).`);
    raw = (await deps.readSecret('API token: ')).trim();
  }
  if (raw === '') throw new AuthError('no token given');
  const parsed = parseToken(raw);
  if (!parsed && isApiKeyShaped(raw))
    throw new AuthError(
      'that is an API key (pxk_…), which does not open the whitelist: store it with `proxyctl key set`; `proxyctl login` takes the account token (<accessKey>.<secret>)',
    );
  if (!parsed)
    throw new AuthError(
      'that is not an API token: expected <accessKey>.<secret> (ak + 20 hex digits, a dot, 43 base64url characters)',
    );

  warnIfPlainHttp(ctx, deps);
  const api = deps.makeApi(ctx.baseUrl, raw);
  try {
    await api.list({ page: 1, page_size: 1 });
  } catch (err) {
    if (isAuthError(err))
      throw new AuthError(
        `the API at ${ctx.baseUrl} rejected the token for access key ${parsed.accessKey}, nothing stored${err.refs()}; check that it is the current token from the web console (Account page) and that --base-url names this account's API`,
      );
    throw apiFailure(err);
  } finally {
    await api.close();
  }

  const saved = await deps.tokens.save(ctx.baseUrl, raw);
  if (envToken(deps.env)) out.warn('PROXYCTL_API_KEY is set and takes precedence over the stored token');
  if (ctx.json) {
    out.writeJson({
      base_url: ctx.baseUrl,
      access_key: parsed.accessKey,
      stored: saved.where,
      ...(saved.where === 'file' ? { file: saved.file } : {}),
    });
  } else if (!ctx.quiet) {
    const where = saved.where === 'keychain' ? 'the OS keychain' : saved.file;
    out.line(
      `${out.paint('green', '✓')} Logged in to ${ctx.baseUrl} with access key ${parsed.accessKey} (token stored in ${where})`,
    );
  }
  return Exit.OK;
}
