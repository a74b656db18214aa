// An account's webhook (docs/operations.md, "Webhooks"): the URL rule (https and a public address, unless the
// operator allows private receivers), thresholds, the signing secret, and the signature. The console and
// `proxyd admin webhook` set it through here; the sender (daemon/webhooks/) checks the URL again at each delivery.
import { createHmac, randomBytes } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isPublicAddress } from '../../gateway/index.js';
import type { Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';

export const DEFAULT_THRESHOLDS = [80, 100];

export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: Lookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/** What a refusal of an http:// or private receiver adds: the one switch that allows it, and whose it is. */
const PRIVATE_HINT =
  'http:// and private or loopback receivers are allowed only when the operator runs proxyd serve, or proxyd admin webhook set, with --allow-private-webhooks';

/** A webhook the rules refuse; the message says why (never carries the secret). */
export class WebhookError extends Error {
  override name = 'WebhookError';
}

/** `80,100` → [80, 100]: whole percentages 1..100, sorted, without repeats. */
export function parseThresholds(s: string): number[] {
  const parts = s.split(',').map((p) => p.trim());
  if (parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) < 1 || Number(p) > 100))
    throw new WebhookError('thresholds: whole percentages from 1 to 100, e.g. 80,100');
  return [...new Set(parts.map(Number))].sort((a, b) => a - b);
}

/**
 * The address a delivery to `url` may go to (the one it will dial: no second lookup to rebind), or why not:
 * `https://` resolving to public addresses only, unless `allowPrivate` (then `http://` and any address).
 */
export async function checkWebhookUrl(
  url: string,
  allowPrivate: boolean,
  lookup: Lookup = systemLookup,
): Promise<{ address: string; family: number; url: URL }> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new WebhookError('url: not a URL');
  }
  if (u.username || u.password) throw new WebhookError('url: no credentials in the URL (requests are signed)');
  if (u.protocol !== 'https:' && !(allowPrivate && u.protocol === 'http:'))
    throw new WebhookError(allowPrivate ? 'url: http:// or https:// only' : `url: must be https:// (${PRIVATE_HINT})`);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: Array<{ address: string; family: number }>;
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host);
  } catch {
    throw new WebhookError(`url: ${host} does not resolve`);
  }
  if (addresses.length === 0) throw new WebhookError(`url: ${host} does not resolve`);
  // Every answer must be public: an attacker's name may answer a private address among public ones.
  if (!allowPrivate && addresses.some((a) => !isPublicAddress(a.address)))
    throw new WebhookError(`url: ${host} resolves to a private or reserved address (${PRIVATE_HINT})`);
  return { ...addresses[0]!, url: u };
}

export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

/** `Proxyd-Signature: t=UNIX,v1=HEX`, HEX = HMAC-SHA256(secret, `${t}.${body}`). */
export function signature(secret: string, unixSeconds: number, body: string): string {
  return `t=${unixSeconds},v1=${createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex')}`;
}

/** Sets (or replaces) an account's webhook with a new secret, returned once. */
export async function setWebhook(
  store: Store,
  accountId: number,
  o: { url: string; thresholds?: number[] },
  opts: { allowPrivate: boolean; lookup?: Lookup },
  ctx?: AuditContext,
): Promise<{ url: string; thresholds: number[]; secret: string }> {
  await checkWebhookUrl(o.url, opts.allowPrivate, opts.lookup);
  const thresholds = o.thresholds ?? DEFAULT_THRESHOLDS;
  const secret = newWebhookSecret();
  // The record names the URL and thresholds, never the signing secret.
  await store.webhooks.set(
    { accountId, url: o.url, thresholds, secret },
    ctx && auditDraft(ctx, 'webhook.set', o.url, { thresholds }),
  );
  return { url: o.url, thresholds, secret };
}

/** Removes the account's webhook; false when it had none (nothing recorded). */
export function removeWebhook(store: Store, accountId: number, ctx?: AuditContext): Promise<boolean> {
  return store.webhooks.remove(accountId, ctx && auditDraft(ctx, 'webhook.removed'));
}
