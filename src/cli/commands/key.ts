// `proxyctl key set|status|forget` (docs/cli.md "API keys"): the API key (`pxk_…`) that opens every endpoint but the
// whitelist, kept beside the token (keychain, else the 0600 file); PROXYCTL_API_KEY holding a key overrides it.
import { parseToken } from '../../contract/index.js';
import { isAuthError } from '../api.js';
import type { Context } from '../context.js';
import { getGateway } from '../customer-api.js';
import type { Deps } from '../deps.js';
import { AuthError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { readAll } from '../io.js';
import { apiKeyId } from '../key-id.js';
import { isApiKeyShaped } from '../key-format.js';
import { apiFailure, KEY_HINT, warnIfPlainHttp } from './shared.js';

const KEY_FORMAT = 'pxk_<id>_<secret>, as the web console (Account page, API keys) shows it once';

export async function runKeySet(opts: { ctx: Context; stdin: boolean }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out, io } = deps;
  let raw: string;
  if (opts.stdin || !io.stdinIsTTY) {
    raw =
      (await readAll(io.stdin))
        .split('\n')
        .map((l) => l.trim())
        .find((l) => l !== '') ?? '';
  } else {
    out.info(`Paste the API key for ${ctx.baseUrl} (made in the web console, Account page, API keys).`);
    raw = (await deps.readSecret('API key: ')).trim();
  }
  if (raw === '') throw new AuthError('no API key given');
  if (parseToken(raw))
    throw new AuthError(
      'that is the account token, which opens only the whitelist: store it with `proxyctl login`; `proxyctl key set` takes an API key (pxk_…)',
    );
  const keyId = apiKeyId(raw);
  if (!keyId) throw new AuthError(`that is not an API key: expected ${KEY_FORMAT}`);

  warnIfPlainHttp(ctx, deps, 'API key');
  const api = deps.makeApi(ctx.baseUrl, raw);
  try {
    await getGateway(api);
  } catch (err) {
    if (isAuthError(err))
      throw new AuthError(
        `the API at ${ctx.baseUrl} rejected the API key ${keyId}, nothing stored${err.refs()}; check that it is current (not revoked or expired), allowed from this address, and that --base-url names this account's API`,
      );
    throw apiFailure(err);
  } finally {
    await api.close();
  }
  const saved = await deps.keys.save(ctx.baseUrl, raw);
  const env = deps.env.PROXYCTL_API_KEY?.trim();
  if (env && isApiKeyShaped(env))
    out.warn('PROXYCTL_API_KEY holds an API key and takes precedence over the stored one');
  if (ctx.json) {
    out.writeJson({
      base_url: ctx.baseUrl,
      key_id: keyId,
      stored: saved.where,
      ...(saved.where === 'file' ? { file: saved.file } : {}),
    });
  } else if (!ctx.quiet) {
    const where = saved.where === 'keychain' ? 'the OS keychain' : saved.file;
    out.line(`${out.paint('green', '✓')} API key ${keyId} accepted by ${ctx.baseUrl} (stored in ${where})`);
  }
  return Exit.OK;
}

interface KeyStatusDoc {
  source: 'env' | 'keychain' | 'file' | null;
  key_id: string | null;
  base_url: string;
  /** null: the API could not be asked. */
  valid: boolean | null;
}

export async function runKeyStatus(opts: { ctx: Context }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const resolved = await deps.keys.resolve(ctx.baseUrl);
  const doc: KeyStatusDoc = { source: resolved?.source ?? null, key_id: null, base_url: ctx.baseUrl, valid: false };
  let why = '';
  if (!resolved) why = `no API key; ${KEY_HINT}`;
  else {
    const keyId = apiKeyId(resolved.token);
    if (!keyId) why = `the API key is not in the ${KEY_FORMAT.split(',')[0]} format; ${KEY_HINT}`;
    else {
      doc.key_id = keyId;
      const api = deps.makeApi(ctx.baseUrl, resolved.token);
      try {
        await getGateway(api);
        doc.valid = true;
      } catch (err) {
        if (!isAuthError(err)) {
          if (ctx.json) out.writeJson({ ...doc, valid: null });
          throw apiFailure(err);
        }
        why = `the API rejects this key: revoked, expired or not allowed from this address${err.refs()}; ${resolved.source === 'env' ? 'set PROXYCTL_API_KEY to a current key' : KEY_HINT}`;
      } finally {
        await api.close();
      }
    }
  }
  if (ctx.json) out.writeJson(doc);
  else {
    const from =
      doc.source === 'env'
        ? 'environment (PROXYCTL_API_KEY)'
        : doc.source === 'keychain'
          ? 'OS keychain'
          : doc.source === 'file'
            ? `file ${resolved?.file ?? ''}`
            : '-';
    const rows = [
      ['base URL', ctx.baseUrl],
      ['key source', from],
      ['key id', doc.key_id ?? '-'],
      ['accepted', doc.valid ? out.paint('green', 'yes') : out.paint('red', 'no')],
    ];
    for (const [k, v] of rows) out.line(`${(k ?? '').padEnd(13)} ${v}`);
  }
  if (!doc.valid) {
    out.error(why);
    return Exit.AUTH;
  }
  return Exit.OK;
}

export async function runKeyForget(opts: { ctx: Context }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const removed = await deps.keys.remove(ctx.baseUrl);
  const any = removed.keychain || removed.file;
  if (ctx.json) out.writeJson({ base_url: ctx.baseUrl, removed: any });
  else if (!ctx.quiet)
    out.line(any ? `Forgot the API key for ${ctx.baseUrl}` : `No API key was stored for ${ctx.baseUrl}`);
  const env = deps.env.PROXYCTL_API_KEY?.trim();
  if (env && isApiKeyShaped(env)) out.warn('PROXYCTL_API_KEY is still set and still provides an API key');
  return Exit.OK;
}
