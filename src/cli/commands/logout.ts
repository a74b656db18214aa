// `proxyctl logout`: remove the stored token for the base URL (keychain and fallback file).
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { envToken } from './shared.js';

export async function runLogout(opts: { ctx: Context }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const removed = await deps.tokens.remove(ctx.baseUrl);
  const any = removed.keychain || removed.file;
  if (ctx.json) out.writeJson({ base_url: ctx.baseUrl, removed: any });
  else if (!ctx.quiet)
    out.line(any ? `Logged out of ${ctx.baseUrl}: stored token removed` : `No token was stored for ${ctx.baseUrl}`);
  if (envToken(deps.env)) out.warn('PROXYCTL_API_KEY is still set and still provides a token');
  return Exit.OK;
}
