// The whitelist rules (docs/api.md List, Add, Delete), shared by the API and the console (one implementation).
import { BusinessError, Code, ITEM_REASON, partialMessage, type ItemCode } from '../../contract/codes.js';
import { checkWhitelistIpv4, codePointLength, isStrictIPv4, MAX_REMARK_CODE_POINTS } from '../../contract/ipv4.js';
import { MAX_BATCH_ITEMS } from '../../contract/paths.js';
import {
  isoSeconds,
  type BatchResult,
  type FailedItem,
  type ListData,
  type ListQuery,
  type WhitelistItem,
} from '../../contract/schemas.js';
import { auditDraft, type AuditContext } from './audit.js';
import { isMainlandChina, type CountryLookup } from './geo.js';
import {
  StoreUnavailableError,
  type ListFilter,
  type Store,
  type WhitelistEntry,
  type WhitelistPage,
} from '../store/index.js';

export interface ServiceLog {
  error(obj: object, msg?: string): void;
}

export function toApiItem(e: WhitelistEntry): WhitelistItem {
  return {
    whitelist_id: e.id,
    ip: e.ip,
    remark: e.remark,
    status: e.status,
    created_at: isoSeconds(e.created_at),
  };
}

/** Past every entry an account can have: PostgreSQL takes the offset as an integer, which stops here. */
const MAX_OFFSET = 2 ** 31 - 1;

/** The store's filter for a list query. */
export function listFilter(q: ListQuery): ListFilter {
  return {
    status: q.status === 'active' ? 1 : q.status === 'disabled' ? 2 : undefined,
    ip: q.ip,
    limit: q.page_size,
    offset: Math.min((q.page - 1) * q.page_size, MAX_OFFSET),
  };
}

interface BatchOutcome {
  code: number;
  message: string;
  data: BatchResult;
}

function outcome(success: number, failed: FailedItem[]): BatchOutcome {
  const data = { success_count: success, failed_count: failed.length, failed_items: failed };
  if (failed.length === 0) return { code: Code.OK, message: 'success', data };
  return { code: Code.PARTIAL, message: partialMessage(success, failed.length), data };
}

const fail = (ip: unknown, code: ItemCode): FailedItem => ({ ip: String(ip), code, reason: ITEM_REASON[code] });

/** The batch outcome in item order. */
function outcomeOf(per: Array<{ ip: string; code: ItemCode | null }>): BatchOutcome {
  return outcome(
    per.filter((p) => p.code === null).length,
    per.filter((p) => p.code !== null).map((p) => fail(p.ip, p.code!)),
  );
}

/**
 * A remark as text either database holds: an unpaired surrogate or a NUL (PostgreSQL's text has neither; one
 * failed the whole batch) becomes U+FFFD, one code point for one, so the length rule reads the same.
 */
const storableRemark = (remark: string): string =>
  remark.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\u0000/g, '\uFFFD');

/** The batch limit (10413, nothing processed): the one home of the rule; the API checks it before the body's schema. */
export function assertBatchSize(n: number): void {
  if (n > MAX_BATCH_ITEMS) throw new BusinessError(Code.TOO_MANY_ITEMS);
}

export class WhitelistService {
  constructor(
    private readonly store: Store,
    private readonly geo: CountryLookup,
    private readonly log: ServiceLog,
  ) {}

  /** `prefetched`: the page already read with the call's admission (PostgreSQL), for this very query. */
  async list(accountId: number, q: ListQuery, prefetched?: WhitelistPage): Promise<ListData> {
    const { items, total } = prefetched ?? (await this.store.whitelist.list(accountId, listFilter(q)));
    return { items: items.map(toApiItem), page: q.page, page_size: q.page_size, total };
  }

  /** Checks an item against every rule that needs no database; null when it may be claimed. */
  private itemProblem(ip: string, remark: string): ItemCode | null {
    const v = checkWhitelistIpv4(ip);
    if (!v.ok) return v.code;
    if (isMainlandChina(this.geo, ip)) return Code.MAINLAND_CHINA;
    if (codePointLength(remark) > MAX_REMARK_CODE_POINTS) return Code.REMARK_TOO_LONG;
    return null;
  }

  /**
   * Adds items with the outcome of processing them one by one in order (a failing item undoes nothing). With `ctx`,
   * the request's one record (the IPs added) commits with them. Verification is checked here, before any item.
   * Database out of reach: 503.
   */
  async add(
    accountId: number,
    items: ReadonlyArray<{ ip: string; remark?: string | undefined }>,
    ctx?: AuditContext,
  ): Promise<BatchOutcome> {
    assertBatchSize(items.length);
    const account = await this.store.accounts.get(accountId);
    if (!account || account.status !== 'active') throw new BusinessError(Code.INVALID_API_KEY);
    if (!account.verified) throw new BusinessError(Code.NOT_VERIFIED);
    const problems = items.map((item) => this.itemProblem(item.ip, item.remark ?? ''));
    const results = await this.batch(
      problems,
      (sent) =>
        this.store.whitelist.claimIps(
          accountId,
          sent.map((i) => ({ ip: items[i]!.ip, remark: storableRemark(items[i]!.remark ?? '') })),
          ctx && auditDraft(ctx, 'whitelist.added', null, { requested: items.length }),
        ),
      'whitelist add failed',
    );
    return outcomeOf(
      items.map((item, i) => {
        const r = results[i];
        const code =
          problems[i] ??
          (r === 'added'
            ? null
            : r === 'already_listed'
              ? Code.ALREADY_LISTED
              : r === 'unavailable'
                ? Code.IP_UNAVAILABLE
                : Code.SYSTEM);
        return { ip: item.ip, code: code as ItemCode | null };
      }),
    );
  }

  async delete(accountId: number, ips: readonly string[], ctx?: AuditContext): Promise<BatchOutcome> {
    assertBatchSize(ips.length);
    const problems = ips.map((ip) => (isStrictIPv4(ip) ? null : Code.INVALID_IPV4));
    const results = await this.batch(
      problems,
      (sent) =>
        this.store.whitelist.releaseIps(
          accountId,
          sent.map((i) => ips[i]!),
          ctx && auditDraft(ctx, 'whitelist.deleted', null, { requested: ips.length }),
        ),
      'whitelist delete failed',
    );
    return outcomeOf(
      ips.map((ip, i) => {
        const r = results[i];
        const code = problems[i] ?? (r === 'deleted' ? null : r === 'absent' ? Code.NO_SUCH_WHITELIST : Code.SYSTEM);
        return { ip, code: code as ItemCode | null };
      }),
    );
  }

  /**
   * Sends the items with no problem to the store as one batch (processed one by one in item order, each
   * committed on its own) and spreads the outcomes back over the items. The database out of reach: 503 (the
   * client resends; items already done answer 10425/10426, which the CLI reads as done). Any other failure:
   * logged, and every item sent fails retryable.
   */
  private async batch<T>(
    problems: ReadonlyArray<ItemCode | null>,
    run: (sent: number[]) => Promise<T[]>,
    what: string,
  ): Promise<Array<T | 'failed' | undefined>> {
    const sent = problems.flatMap((p, i) => (p === null ? [i] : []));
    const out: Array<T | 'failed' | undefined> = new Array(problems.length);
    if (sent.length === 0) return out;
    try {
      const results = await run(sent);
      sent.forEach((i, k) => (out[i] = results[k]));
    } catch (e) {
      if (e instanceof StoreUnavailableError) throw e;
      this.log.error({ err: { message: (e as Error).message } }, what);
      for (const i of sent) out[i] = 'failed';
    }
    return out;
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2, ctx?: AuditContext): Promise<WhitelistItem | null> {
    const e = await this.store.whitelist.setStatus(
      accountId,
      ip,
      status,
      ctx && auditDraft(ctx, 'whitelist.status_changed', ip, { status: status === 1 ? 'active' : 'disabled' }),
    );
    return e ? toApiItem(e) : null;
  }
}
