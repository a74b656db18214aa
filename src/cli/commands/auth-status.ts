// `proxyctl auth status`: where the token comes from, its access key, whether the API accepts it (exit 4 if not).
import { parseToken } from '../../contract/index.js';
import { isAuthError } from '../api.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { apiFailure, envKeyNote, rejectedTokenHint } from './shared.js';

interface AuthStatusDoc {
  source: 'env' | 'keychain' | 'file' | null;
  access_key: string | null;
  base_url: string;
  /** null: the API could not be asked (unreachable, or an answer that was not one). */
  valid: boolean | null;
}

export async function runAuthStatus(opts: { ctx: Context }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const resolved = await deps.tokens.resolve(ctx.baseUrl);
  const doc: AuthStatusDoc = {
    source: resolved?.source ?? null,
    access_key: null,
    base_url: ctx.baseUrl,
    valid: false,
  };
  let why = '';
  if (!resolved) why = `no token${envKeyNote(deps.env)}: run \`proxyctl login\` or set PROXYCTL_API_KEY`;
  else {
    const parsed = parseToken(resolved.token);
    if (!parsed) why = 'the token is not in the <accessKey>.<secret> format';
    else {
      doc.access_key = parsed.accessKey;
      const api = deps.makeApi(ctx.baseUrl, resolved.token);
      try {
        await api.list({ page: 1, page_size: 1 });
        doc.valid = true;
      } catch (err) {
        if (!isAuthError(err)) {
          // --json: still the document (where the token comes from is known here), then the error as any command says it.
          if (ctx.json) out.writeJson({ ...doc, valid: null });
          throw apiFailure(err);
        }
        why = `the API rejects this token${err.refs()}; ${rejectedTokenHint(resolved.source)}`;
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
      ['token source', from],
      ['access key', doc.access_key ?? '-'],
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
