// API keys (docs/api.md, "Authentication"): made, listed and revoked by the console's Account page and by
// `proxyd admin key` only (no key can make keys). The key is shown once; the store keeps its secret's hash.
import {
  MAX_KEYS_PER_ACCOUNT,
  KeyFieldError,
  checkKeyName,
  parseAllowedIps,
  parseScopes,
  type Scope,
} from '../../contract/scopes.js';
import { formatIsoTime, isoSeconds } from '../../contract/schemas.js';
import { mintApiKey } from '../secrets.js';
import type { ApiKeyInfo, Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';

/** The account holds MAX_KEYS_PER_ACCOUNT live keys already: nothing was made. */
export class KeyLimitError extends Error {
  constructor() {
    super(`the account already holds ${MAX_KEYS_PER_ACCOUNT} API keys: revoke one first`);
    this.name = 'KeyLimitError';
  }
}

export interface KeyRequest {
  name: unknown;
  /** `usage:read,users:write` or a list. */
  scopes: string | readonly unknown[];
  /** When the key stops working (ms epoch), or null: never. */
  expiresAtMs?: number | null;
  /** `a,b/24` or a list; empty: from anywhere. */
  allowedIps?: string | readonly unknown[];
}

/** A key as the console and `proxyd admin key list` show it (never the key or its hash). */
export interface ApiKeyJson {
  id: string;
  name: string;
  scopes: Scope[];
  created_at: string;
  expires_at: string | null;
  allowed_ips: string[];
  revoked_at: string | null;
  last_used_at: string | null;
  last_used_ip: string | null;
  /** `active`, `expired` or `revoked`. */
  state: 'active' | 'expired' | 'revoked';
}

export function apiKeyJson(k: ApiKeyInfo, nowMs: number): ApiKeyJson {
  const state =
    k.revoked_at !== null ? 'revoked' : k.expires_at !== null && k.expires_at * 1000 <= nowMs ? 'expired' : 'active';
  return {
    id: k.id,
    name: k.name,
    scopes: k.scopes as Scope[],
    created_at: isoSeconds(k.created_at),
    expires_at: k.expires_at === null ? null : isoSeconds(k.expires_at),
    allowed_ips: k.allowed_ips,
    revoked_at: k.revoked_at === null ? null : isoSeconds(k.revoked_at),
    last_used_at: k.last_used_at === null ? null : isoSeconds(k.last_used_at),
    last_used_ip: k.last_used_ip,
    state,
  };
}

export class ApiKeyService {
  constructor(
    private readonly store: Store,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /**
   * Checks every field (KeyFieldError naming the first bad one), then makes the key with its audit record
   * (`api_key.created`: the id, name, scopes, expiry and sources; never the key). KeyLimitError past 20 live keys.
   */
  async create(accountId: number, req: KeyRequest, ctx: AuditContext): Promise<{ key: string; info: ApiKeyJson }> {
    const name = checkKeyName(req.name);
    const scopes = parseScopes(req.scopes);
    const expiresAtMs = req.expiresAtMs ?? null;
    if (expiresAtMs !== null && (!Number.isFinite(expiresAtMs) || expiresAtMs <= this.nowMs())) {
      throw new KeyFieldError('expires_at', 'must be in the future');
    }
    const expiresAt = expiresAtMs === null ? null : Math.ceil(expiresAtMs / 1000);
    const allowedIps = parseAllowedIps(req.allowedIps ?? []);
    for (let attempt = 0; attempt < 3; attempt++) {
      const m = mintApiKey();
      const details = {
        name,
        scopes,
        expires_at: expiresAt === null ? null : formatIsoTime(expiresAt * 1000),
        allowed_ips: allowedIps,
      };
      const r = await this.store.apiKeys.create(
        { id: m.id, accountId, name, scopes, secretHash: m.secretHash, expiresAt, allowedIps },
        MAX_KEYS_PER_ACCOUNT,
        auditDraft(ctx, 'api_key.created', m.id, details),
      );
      if (r === 'too_many') throw new KeyLimitError();
      if (r !== 'exists') return { key: m.key, info: apiKeyJson(r, this.nowMs()) };
    }
    throw new Error('could not draw a free key id');
  }

  /** Every key of the account, newest first; `live`: only those neither revoked nor expired. */
  async list(accountId: number, opts: { live?: boolean } = {}): Promise<ApiKeyJson[]> {
    const now = this.nowMs();
    const all = (await this.store.apiKeys.list(accountId)).map((k) => apiKeyJson(k, now));
    return opts.live ? all.filter((k) => k.state === 'active') : all;
  }

  /** Revokes the account's key (`api_key.revoked`); null when it has none of that id, or it was revoked already. */
  async revoke(accountId: number, id: string, ctx: AuditContext): Promise<ApiKeyJson | null> {
    if (!/^[A-Za-z0-9]{1,32}$/.test(id)) return null;
    const r = await this.store.apiKeys.revoke(accountId, id, auditDraft(ctx, 'api_key.revoked', id, {}));
    return r ? apiKeyJson(r, this.nowMs()) : null;
  }
}
