// A command's work on the API key's endpoints: the key's session opened, its failures mapped to exit statuses
// (an answer of the wrong shape is exit 1, a refused key or missing scope exit 4), the client closed.
import type { WhitelistApi } from '../api.js';
import type { Context } from '../context.js';
import { BadShape } from '../customer-api.js';
import type { Deps } from '../deps.js';
import { CliError } from '../errors.js';
import { keyFailure, openKeySession, type KeySession } from './shared.js';

export async function withKey<T>(
  ctx: Context,
  deps: Deps,
  fn: (api: WhitelistApi, s: KeySession) => Promise<T>,
): Promise<T> {
  const session = await openKeySession(ctx, deps);
  try {
    return await fn(session.api, session);
  } catch (err) {
    if (err instanceof BadShape) throw new CliError(err.message);
    if (err instanceof CliError) throw err;
    throw keyFailure(err, session);
  } finally {
    await session.api.close();
  }
}
