// `proxyd admin …`: operator commands working directly on the database (also while daemons serve it).
import { isEmailAddress } from '../../contract/email.js';
import { isStrictIPv4 } from '../../contract/ipv4.js';
import { passwordProblem } from '../../contract/password.js';
import { isoSeconds } from '../../contract/schemas.js';
import type { Account, AccountStatus, Store } from '../store/index.js';
import { createAccount, setAccountStatus, setVerification } from '../services/account.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { createProxyUser } from '../services/proxy-users.js';
import { disableToken, resetToken } from '../services/tokens.js';
import { toApiItem } from '../services/whitelist.js';
import { WebhookError, parseThresholds, removeWebhook, setWebhook } from '../services/webhooks.js';

export class AdminError extends Error {
  override name = 'AdminError';
}

/** A required option missing, or two that exclude each other: a usage error (exit 2, as commander's own). */
export class AdminUsageError extends AdminError {
  override name = 'AdminUsageError';
}

/** No account has this email: the command's runner adds which database it looked in (a default data dir is easy to miss). */
export class NoAccountError extends AdminError {
  override name = 'NoAccountError';
  constructor(readonly email: string) {
    super(`no account with email ${email}`);
  }
}

export interface AdminDeps {
  store: Store;
  readStdin: () => Promise<string>;
  /** Which database the command used, for "not found" errors (a default data dir is easy to miss). */
  where: string;
}

function accountJson(a: Account) {
  return {
    account_id: a.id,
    email: a.email,
    status: a.status,
    verified: a.verified,
    created_at: isoSeconds(a.created_at),
  };
}

/** The account with this email, else NoAccountError. */
export async function requireAccount(store: Store, email: string): Promise<Account> {
  const a = await store.accounts.findByEmail(email);
  if (!a) throw new NoAccountError(email);
  return a;
}

/** `--email` where a run function's options may lack it (commander requires it; a caller of the function may not). */
export function requiredEmail(email: string | undefined): string {
  if (!email) throw new AdminUsageError('--email is required');
  return email;
}

function firstLine(s: string): string {
  return s.split(/\r?\n/)[0] ?? '';
}

async function readPassword(
  deps: AdminDeps,
  opts: { password?: string; passwordStdin?: boolean },
  required: boolean,
): Promise<string | null> {
  if (opts.password !== undefined && opts.passwordStdin)
    throw new AdminUsageError('give --password or --password-stdin, not both');
  let pw: string | null = opts.password ?? null;
  if (opts.passwordStdin) pw = firstLine(await deps.readStdin());
  if (pw === null) {
    if (required) throw new AdminUsageError('a password is required: --password-stdin (recommended) or --password P');
    return null;
  }
  const problem = passwordProblem(pw);
  if (problem) throw new AdminError(`password must be ${problem}`);
  return pw;
}

export async function accountCreate(
  deps: AdminDeps,
  o: { email: string; password?: string; passwordStdin?: boolean; verified?: boolean },
) {
  if (!isEmailAddress(o.email)) throw new AdminError(`not an email address: ${o.email}`);
  const pw = (await readPassword(deps, o, true))!;
  const created = await createAccount(deps.store, o.email, pw, o.verified === true, operatorContext());
  if (created === 'exists') throw new AdminError(`an account with email ${o.email} already exists`);
  return { account_id: created.id, email: created.email };
}

function parseBool(s: string, what: string): boolean {
  if (s === 'true' || s === '1' || s === 'yes') return true;
  if (s === 'false' || s === '0' || s === 'no') return false;
  throw new AdminError(`${what}: expected true or false, got "${s}"`);
}

export async function accountSet(deps: AdminDeps, o: { email: string; status?: string; verified?: string }) {
  const a = await requireAccount(deps.store, o.email);
  if (o.status === undefined && o.verified === undefined)
    throw new AdminUsageError('nothing to set: give --status and/or --verified');
  const ctx = operatorContext();
  if (o.status !== undefined) {
    if (!['active', 'suspended', 'closed'].includes(o.status))
      throw new AdminError(`--status: expected active, suspended or closed, got "${o.status}"`);
    await setAccountStatus(deps.store, a, o.status as AccountStatus, ctx);
  }
  if (o.verified !== undefined) await setVerification(deps.store, a, parseBool(o.verified, '--verified'), ctx);
  return accountJson((await deps.store.accounts.get(a.id))!);
}

/** Turns the account's second factor off (a customer who lost every factor and recovery code); recorded. */
export async function accountReset2fa(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  const was = await deps.store.secondFactors.disable(a.id, auditDraft(operatorContext(), '2fa.reset'));
  return { email: a.email, second_factor: 'off', was_on: was };
}

export async function tokenReset(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  return { token: (await resetToken(deps.store, a.id, operatorContext())).token };
}

export async function tokenDisable(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  const key = await disableToken(deps.store, a.id, operatorContext());
  if (!key) throw new AdminError(`account ${o.email} has no active token`);
  return { access_key: key, status: 'disabled' };
}

export async function proxyUserCreate(
  deps: AdminDeps,
  o: { email: string; username: string; passwordStdin?: boolean },
) {
  const a = await requireAccount(deps.store, o.email);
  const given = await readPassword(deps, { passwordStdin: o.passwordStdin }, false);
  const r = await createProxyUser(deps.store, a.id, o.username, given, operatorContext());
  if (!r.ok)
    throw new AdminError(r.problem === 'exists' ? `proxy user ${o.username} already exists` : `username: ${r.detail}`);
  return { username: o.username, password: r.password };
}

export async function whitelistSetStatus(deps: AdminDeps, o: { email: string; ip: string; status: string }) {
  const a = await requireAccount(deps.store, o.email);
  if (!isStrictIPv4(o.ip)) throw new AdminError(`--ip: not a valid IPv4 address: ${o.ip}`);
  if (o.status !== 'active' && o.status !== 'disabled')
    throw new AdminError(`--status: expected active or disabled, got "${o.status}"`);
  const status = o.status === 'active' ? 1 : 2;
  const e = await deps.store.whitelist.setStatus(
    a.id,
    o.ip,
    status,
    auditDraft(operatorContext(), 'whitelist.status_changed', o.ip, { status: o.status }),
  );
  if (!e) throw new AdminError(`account ${o.email} has no whitelist entry for ${o.ip}`);
  return toApiItem(e);
}

export async function webhookSet(
  deps: AdminDeps,
  o: { email: string; url: string; thresholds: string; allowPrivateWebhooks?: boolean },
) {
  const a = await requireAccount(deps.store, o.email);
  try {
    return await setWebhook(
      deps.store,
      a.id,
      { url: o.url, thresholds: parseThresholds(o.thresholds) },
      { allowPrivate: o.allowPrivateWebhooks === true },
      operatorContext(),
    );
  } catch (e) {
    if (e instanceof WebhookError) throw new AdminError(`--${e.message}`);
    throw e;
  }
}

export async function webhookRemove(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  return { removed: await removeWebhook(deps.store, a.id, operatorContext()) };
}

export async function webhookDeliveries(deps: AdminDeps, o: { email: string; limit: string }) {
  const a = await requireAccount(deps.store, o.email);
  const limit = Number(o.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
    throw new AdminError('--limit: a whole number from 1 to 10000');
  return (await deps.store.webhooks.events(a.id, limit)).map((e) => ({
    id: e.id,
    type: e.type,
    attempts: e.attempts,
    state: e.state,
    last_status: e.lastStatus,
    created_at: isoSeconds(Math.floor(e.createdAtMs / 1000)),
  }));
}
