// api_keys rows as both backends store them: scopes and allowed sources as comma-separated lists.
import type { ApiKeyInfo } from './types.js';

export interface ApiKeyDbRow {
  id: string;
  account_id: number;
  name: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  allowed_ips: string;
  revoked_at: number | null;
  last_used_at: number | null;
  last_used_ip: string | null;
}

export const API_KEY_COLUMNS =
  'id, account_id, name, scopes, created_at, expires_at, allowed_ips, revoked_at, last_used_at, last_used_ip';

const list = (s: string): string[] => (s === '' ? [] : s.split(','));

export function apiKeyInfo(r: ApiKeyDbRow): ApiKeyInfo {
  return {
    id: r.id,
    account_id: Number(r.account_id),
    name: r.name,
    scopes: list(r.scopes),
    created_at: Number(r.created_at),
    expires_at: r.expires_at === null ? null : Number(r.expires_at),
    allowed_ips: list(r.allowed_ips),
    revoked_at: r.revoked_at === null ? null : Number(r.revoked_at),
    last_used_at: r.last_used_at === null ? null : Number(r.last_used_at),
    last_used_ip: r.last_used_ip,
  };
}
