// The audit log as people and programs read it (docs/security.md, "Audit log"): the closed list of actions, who
// did it (the context an edge hands a service), the record's JSON, the query the console's Activity page, the
// operator's `proxyd admin audit` and the customer API's `GET /openapi/v1/audit` all answer from, and the check
// of every chain (`proxyd admin audit verify`).
import { createHash, randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import {
  ChainVerifier,
  type AuditActor,
  type AuditDraft,
  type AuditHead,
  type AuditRecord,
  type ChainProblem,
  type Store,
} from '../store/index.js';

/** Every action a record can name, with how the Activity page words it. */
export const AUDIT_ACTIONS = {
  'account.created': 'Account created',
  'console.login': 'Signed in to the console',
  'console.login_failed': 'Failed sign-in',
  'console.logout': 'Signed out',
  'console.session_ended': 'Signed out a session',
  'console.sessions_ended': 'Signed out everywhere else',
  '2fa.enabled': 'Two-factor authentication turned on',
  '2fa.passkey_added': 'Passkey added',
  '2fa.passkey_removed': 'Passkey removed',
  '2fa.disabled': 'Two-factor authentication turned off',
  '2fa.recovery_code_used': 'Recovery code used',
  '2fa.recovery_codes_renewed': 'New recovery codes made',
  '2fa.reset': 'Two-factor authentication reset by the operator',
  'account.password_changed': 'Password changed',
  'account.email_changed': 'Email changed',
  'account.suspended': 'Account suspended',
  'account.reactivated': 'Account reactivated',
  'account.closed': 'Account closed',
  'account.verification_changed': 'Real-name verification changed',
  'token.reset': 'API token made',
  'token.disabled': 'API token disabled',
  'api_key.created': 'API key created',
  'api_key.revoked': 'API key revoked',
  'whitelist.added': 'Whitelist entries added',
  'whitelist.deleted': 'Whitelist entries deleted',
  'whitelist.status_changed': 'Whitelist entry enabled or disabled',
  'proxy_user.created': 'Proxy user created',
  'proxy_user.changed': 'Proxy user changed',
  'proxy_user.password_rotated': 'Proxy user password changed',
  'proxy_user.deleted': 'Proxy user deleted',
  'rules.changed': 'Target rules changed',
  'webhook.set': 'Webhook set',
  'webhook.removed': 'Webhook removed',
  'plan.changed': 'Plan changed',
  'plan.expired': 'Plan expired',
  'ip.assigned': 'Dedicated addresses assigned',
  'ip.released': 'Dedicated addresses released',
  'ip.replaced': 'Dedicated address replaced',
} as const;

export type AuditAction = keyof typeof AUDIT_ACTIONS;

export const isAuditAction = (s: string): s is AuditAction => Object.hasOwn(AUDIT_ACTIONS, s);

/** Who is acting, from where, in which request: what an edge (console, API, admin, a background job) hands a service. */
export interface AuditContext {
  actor: AuditActor;
  sourceIp: string | null;
  requestId: string | null;
}

/** The record of one action in `ctx` (the store adds the account, the time and the chain). */
export function auditDraft(
  ctx: AuditContext,
  action: AuditAction,
  target: string | null = null,
  details: Record<string, unknown> = {},
): AuditDraft {
  return { actor: ctx.actor, sourceIp: ctx.sourceIp, requestId: ctx.requestId, action, target, details };
}

/** A console session as records and the Sessions card name it: a digest of its id (the id itself is the cookie's secret). */
export function sessionHandle(sid: string): string {
  return createHash('sha256').update(`proxyd console session ${sid}`).digest('hex').slice(0, 16);
}

/** `proxyd admin …`: the operator (the OS user running the command), one request id per command. */
export function operatorContext(): AuditContext {
  let who = 'operator';
  try {
    who = userInfo().username || who;
  } catch {
    /* no passwd entry for this uid: "operator" */
  }
  return { actor: { type: 'operator', id: who }, sourceIp: null, requestId: randomUUID() };
}

/** The service acting on its own (a plan that expired), on this node. */
export function systemContext(node: string): AuditContext {
  return { actor: { type: 'system', id: node }, sourceIp: null, requestId: randomUUID() };
}

/** A record as the console, the API and `proxyd admin audit` show it (never a secret: none is ever written). */
export interface AuditRecordJson {
  id: number;
  time: string;
  account: string | null;
  actor: AuditActor;
  source_ip: string | null;
  request_id: string | null;
  action: string;
  target: string | null;
  details: Record<string, unknown>;
  seq: number;
  hash: string;
}

export function auditJson(r: AuditRecord, email: string | null): AuditRecordJson {
  return {
    id: r.id,
    time: new Date(r.timeMs).toISOString(),
    account: email,
    actor: r.actor,
    source_ip: r.sourceIp,
    request_id: r.requestId,
    action: r.action,
    target: r.target,
    details: r.details,
    seq: r.seq,
    hash: r.hash,
  };
}

export interface AuditListQuery {
  fromMs?: number | undefined;
  toMs?: number | undefined;
  action?: string | undefined;
  page: number;
  page_size: number;
}

export interface AuditPage {
  items: AuditRecordJson[];
  page: number;
  page_size: number;
  total: number;
}

/** An action filter: exact (`whitelist.added`) or a family (`whitelist`: every `whitelist.*`). */
export function actionsMatching(filter: string | undefined): string[] | undefined {
  if (!filter) return undefined;
  if (isAuditAction(filter)) return [filter];
  const family = Object.keys(AUDIT_ACTIONS).filter((a) => a.startsWith(`${filter}.`));
  return family.length ? family : [filter];
}

/** Whether a filter names an action (`whitelist.added`) or a family of them (`whitelist`). */
export function actionsKnown(filter: string): boolean {
  return isAuditAction(filter) || Object.keys(AUDIT_ACTIONS).some((a) => a.startsWith(`${filter}.`));
}

/**
 * One account's records, newest first, a page at a time: the console's Activity page and the customer API read
 * through here (the account id comes from the session or the key, never from the caller's input).
 */
export class AuditService {
  constructor(private readonly store: Store) {}

  async list(accountId: number, q: AuditListQuery): Promise<AuditPage> {
    const account = await this.store.accounts.get(accountId);
    const { rows, total } = await this.store.audit.list({
      accountId,
      fromMs: q.fromMs,
      toMs: q.toMs,
      actions: actionsMatching(q.action),
      limit: q.page_size,
      offset: Math.min((q.page - 1) * q.page_size, 2 ** 31 - 1),
    });
    return {
      items: rows.map((r) => auditJson(r, account?.email ?? null)),
      page: q.page,
      page_size: q.page_size,
      total,
    };
  }
}

const CSV_COLUMNS = [
  'time',
  'action',
  'actor_type',
  'actor_id',
  'source_ip',
  'request_id',
  'target',
  'details',
  'id',
  'seq',
  'hash',
] as const;

/** A CSV field: quoted when it holds a comma, quote or line break; a leading = + - @ is neutralised (spreadsheet formulas). */
function csvField(v: string): string {
  const safe = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export function auditCsv(items: readonly AuditRecordJson[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const r of items) {
    const cells = [
      r.time,
      r.action,
      r.actor.type,
      r.actor.id ?? '',
      r.source_ip ?? '',
      r.request_id ?? '',
      r.target ?? '',
      JSON.stringify(r.details),
      String(r.id),
      String(r.seq),
      r.hash,
    ];
    lines.push(cells.map(csvField).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

export interface VerifyReport {
  ok: boolean;
  accounts: number;
  records: number;
  problems: ChainProblem[];
}

/** Reads every chain (or one account's) in order and checks it: each record's hash, its link to the one before, the head. */
export async function verifyChains(store: Store, accountId?: number, pageSize = 5_000): Promise<VerifyReport> {
  const heads = new Map<number, AuditHead>((await store.audit.heads(accountId)).map((h) => [h.accountId, h]));
  const v = new ChainVerifier(heads);
  let after = { accountId: accountId ?? -1, seq: -1 };
  for (;;) {
    const rows = await store.audit.chain(after, pageSize, accountId);
    for (const r of rows) v.push(r);
    if (rows.length < pageSize) break;
    const last = rows[rows.length - 1]!;
    after = { accountId: last.accountId, seq: last.seq };
  }
  v.end();
  return {
    ok: v.problems.length === 0,
    accounts: Math.max(v.accounts, heads.size),
    records: v.records,
    problems: v.problems,
  };
}
