// `proxyd admin audit`, `audit verify`, `audit head` (docs/admin.md, "audit"): the records as JSON lines, the check
// of every hash chain, and the chains' heads to keep somewhere the database's writers cannot reach.
import { readFileSync } from 'node:fs';
import type { AuditHead, Store } from '../store/index.js';
import { actionsMatching, auditJson, isAuditAction, verifyChains, type VerifyReport } from '../services/audit.js';
import { AdminError, requireAccount } from './admin-kit.js';
import { parseSince } from './connections.js';

export interface AuditOptions {
  email?: string;
  since?: string;
  action?: string;
  limit?: string;
}

async function accountIdOf(store: Store, email: string | undefined): Promise<number | undefined> {
  return email === undefined ? undefined : (await requireAccount(store, email)).id;
}

/** Records oldest first as JSON lines, written as they are read (a page at a time). */
export async function auditList(
  store: Store,
  o: AuditOptions,
  write: (line: string) => void,
  nowMs = Date.now(),
): Promise<void> {
  const accountId = await accountIdOf(store, o.email);
  const fromMs = o.since !== undefined ? parseSince(o.since, nowMs) : undefined;
  if (o.action !== undefined && !isAuditAction(o.action) && actionsMatching(o.action)!.every((a) => a === o.action)) {
    throw new AdminError(
      `--action: no action "${o.action}" (docs/admin.md lists them; a family such as "whitelist" takes all of its actions)`,
    );
  }
  const limit = o.limit === undefined ? Infinity : Number(o.limit);
  if (o.limit !== undefined && (!Number.isInteger(limit) || limit < 1))
    throw new AdminError('--limit: a whole number of at least 1');
  const emails = new Map<number, string | null>();
  const emailOf = async (id: number) => {
    if (!emails.has(id)) emails.set(id, (await store.accounts.get(id))?.email ?? null);
    return emails.get(id)!;
  };
  const PAGE = 1_000;
  let written = 0;
  for (let offset = 0; written < limit; offset += PAGE) {
    const { rows } = await store.audit.list({
      accountId,
      fromMs,
      actions: actionsMatching(o.action),
      limit: Math.min(PAGE, limit - written),
      offset,
      order: 'oldest',
    });
    for (const r of rows) write(JSON.stringify(auditJson(r, await emailOf(r.accountId))));
    written += rows.length;
    if (rows.length < PAGE) break;
  }
}

/** A head kept elsewhere (a line of `audit head`), checked against the chain as it is now. */
interface KeptHead {
  account_id: number;
  seq: number;
  hash: string;
}

/**
 * Every chain (or one account's), checked; with `heads`, each head kept earlier must still be in its chain (a
 * chain rewritten whole by someone with write access to the database no longer holds that hash at that seq).
 */
export async function auditVerify(
  store: Store,
  o: { email?: string; heads?: string },
): Promise<{ report: VerifyReport; json: object; message: string | null }> {
  const accountId = await accountIdOf(store, o.email);
  const report = await verifyChains(store, accountId);
  const emailOf = async (id: number) => (await store.accounts.get(id))?.email ?? null;
  if (report.ok && o.heads !== undefined) {
    for (const kept of readHeads(o.heads)) {
      if (accountId !== undefined && kept.account_id !== accountId) continue;
      const problem = await keptHeadProblem(store, kept);
      if (problem) {
        report.ok = false;
        report.problems.push({
          accountId: kept.account_id,
          recordId: problem.recordId,
          seq: kept.seq,
          kind: 'edited',
          detail: problem.detail,
        });
        break;
      }
    }
  }
  if (report.ok)
    return { report, json: { ok: true, accounts: report.accounts, records: report.records }, message: null };
  const p = report.problems[0]!;
  const email = await emailOf(p.accountId);
  const json = {
    ok: false,
    accounts: report.accounts,
    records: report.records,
    broken: {
      account: email,
      account_id: p.accountId,
      record_id: p.recordId,
      seq: p.seq,
      problem: p.kind,
      detail: p.detail,
    },
    chains_broken: report.problems.length,
  };
  const which = p.recordId !== null ? `record ${p.recordId} (seq ${p.seq})` : `seq ${p.seq}`;
  return {
    report,
    json,
    message: `audit chain of ${email ?? `account ${p.accountId}`} broken at ${which}: ${p.detail}`,
  };
}

function readHeads(file: string): KeptHead[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new AdminError(`--heads: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const out: KeptHead[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let h: Partial<KeptHead>;
    try {
      h = JSON.parse(line) as Partial<KeptHead>;
    } catch {
      throw new AdminError(`--heads: line ${i + 1} of ${file} is not JSON (a line of \`proxyd admin audit head\`)`);
    }
    if (!Number.isInteger(h.account_id) || !Number.isInteger(h.seq) || typeof h.hash !== 'string')
      throw new AdminError(`--heads: line ${i + 1} of ${file} has no account_id, seq and hash`);
    out.push(h as KeptHead);
  }
  return out;
}

async function keptHeadProblem(
  store: Store,
  kept: KeptHead,
): Promise<{ recordId: number | null; detail: string } | null> {
  const [head] = await store.audit.heads(kept.account_id);
  if (kept.seq === 0) return null;
  if (!head || head.seq < kept.seq)
    return {
      recordId: null,
      detail: `the kept head seq ${kept.seq} is past the chain's end (seq ${head?.seq ?? 0}): records were removed and the chain rewritten`,
    };
  if (kept.seq === head.anchorSeq)
    return head.anchorHash === kept.hash
      ? null
      : { recordId: null, detail: `the chain's anchor at seq ${kept.seq} does not hold the kept hash: rewritten` };
  if (kept.seq < head.anchorSeq) return null; // removed by retention since: the anchor is what remains
  const [r] = await store.audit.chain({ accountId: kept.account_id, seq: kept.seq - 1 }, 1, kept.account_id);
  if (!r || r.seq !== kept.seq)
    return { recordId: null, detail: `the record at the kept head's seq ${kept.seq} is gone` };
  return r.hash === kept.hash
    ? null
    : {
        recordId: r.id,
        detail: `the record at the kept head's seq ${kept.seq} has another hash than the one kept: the chain was rewritten`,
      };
}

/** One JSON line per chain: what to keep elsewhere (an external log, a cron mail) to check against later. */
export async function auditHeads(
  store: Store,
  o: { email?: string },
  nowMs = Date.now(),
): Promise<Array<Record<string, unknown>>> {
  const accountId = await accountIdOf(store, o.email);
  const heads: AuditHead[] = await store.audit.heads(accountId);
  const out: Array<Record<string, unknown>> = [];
  for (const h of heads) {
    out.push({
      time: new Date(nowMs).toISOString(),
      account: (await store.accounts.get(h.accountId))?.email ?? null,
      account_id: h.accountId,
      seq: h.seq,
      hash: h.hash,
      anchor_seq: h.anchorSeq,
      anchor_hash: h.anchorHash,
    });
  }
  return out;
}
