// `proxyd admin key create|list|revoke` (docs/admin.md, "API keys"): the operator's side of the console's card.
import { KeyFieldError } from '../../contract/scopes.js';
import { parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import { ApiKeyService, KeyLimitError, type ApiKeyJson } from '../services/api-keys.js';
import { operatorContext } from '../services/audit.js';
import { AdminError, requireAccount, type AdminDeps } from './admin-kit.js';

const FLAG: Record<KeyFieldError['field'], string> = {
  name: '--name',
  scopes: '--scopes',
  expires_at: '--expires',
  allowed_ips: '--allowed-ips',
};

/** Makes a key; prints `{"id","key",…}` (the key shown only here). Every bad flag is named, nothing made. */
export async function keyCreate(
  deps: AdminDeps,
  o: { email: string; name: string; scopes: string; expires?: string; allowedIps?: string },
) {
  const id = (await requireAccount(deps.store, o.email)).id;
  let expiresAtMs: number | null = null;
  if (o.expires !== undefined) {
    expiresAtMs = parseIsoTime(o.expires.trim());
    if (expiresAtMs === null)
      throw new AdminError(
        timeFlagProblem('--expires', o.expires, 'an ISO 8601 time, e.g. 2027-01-01 or 2027-01-01T00:00:00Z'),
      );
  }
  try {
    const r = await new ApiKeyService(deps.store).create(
      id,
      { name: o.name, scopes: o.scopes, expiresAtMs, allowedIps: o.allowedIps ?? '' },
      operatorContext(),
    );
    return {
      id: r.info.id,
      key: r.key,
      name: r.info.name,
      scopes: r.info.scopes,
      expires_at: r.info.expires_at,
      allowed_ips: r.info.allowed_ips,
    };
  } catch (e) {
    if (e instanceof KeyFieldError) throw new AdminError(`${FLAG[e.field]}: ${e.message.slice(e.field.length + 2)}`);
    if (e instanceof KeyLimitError) throw new AdminError(`account ${o.email}: ${e.message}`);
    throw e;
  }
}

/** Every key of the account, newest first (revoked and expired ones say so); never a key or its hash. */
export async function keyList(deps: AdminDeps, o: { email: string }): Promise<ApiKeyJson[]> {
  return new ApiKeyService(deps.store).list((await requireAccount(deps.store, o.email)).id);
}

export async function keyRevoke(deps: AdminDeps, o: { email: string; id: string }): Promise<ApiKeyJson> {
  const r = await new ApiKeyService(deps.store).revoke(
    (await requireAccount(deps.store, o.email)).id,
    o.id.trim(),
    operatorContext(),
  );
  if (!r) throw new AdminError(`account ${o.email} has no API key ${o.id} that is not revoked already`);
  return r;
}
