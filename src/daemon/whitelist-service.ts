// The whitelist rules of SPEC 3.4-3.6, shared by the API and the console (one implementation).
import { BusinessError, Code, ITEM_REASON, partialMessage, type ItemCode } from '../contract/codes.js';
import { checkWhitelistIpv4, codePointLength, isStrictIPv4, MAX_REMARK_CODE_POINTS } from '../contract/ipv4.js';
import { isoSeconds, type BatchResult, type FailedItem, type ListData, type ListQuery, type WhitelistItem } from '../contract/schemas.js';
import { isMainlandChina, type CountryLookup } from './geo.js';
import { StoreUnavailableError, type ClaimOutcome, type ReleaseOutcome, type Store, type WhitelistEntry } from './store/index.js';

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

export interface BatchOutcome {
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


export class WhitelistService {
  constructor(
    private readonly store: Store,
    private readonly geo: CountryLookup,
    private readonly log: ServiceLog,
  ) {}

  async list(accountId: number, q: ListQuery): Promise<ListData> {
    const status = q.status === 'active' ? 1 : q.status === 'disabled' ? 2 : undefined;
    const { items, total } = await this.store.whitelist.list(accountId, {
      status,
      ip: q.ip,
      limit: q.page_size,
      offset: (q.page - 1) * q.page_size,
    });
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
   * Adds items in order, each committed on its own. The caller has checked verification. The database
   * out of reach before anything was written throws (503); after that, the rest fail as retryable items.
   */
  async add(accountId: number, items: ReadonlyArray<{ ip: string; remark?: string | undefined }>): Promise<BatchOutcome> {
    const account = await this.store.accounts.get(accountId);
    if (!account || account.status !== 'active') throw new BusinessError(Code.INVALID_API_KEY);
    if (!account.verified) throw new BusinessError(Code.NOT_VERIFIED);
    let success = 0;
    let unreachable = false;
    const failed: FailedItem[] = [];
    for (const item of items) {
      const remark = item.remark ?? '';
      const problem = this.itemProblem(item.ip, remark);
      if (problem !== null) {
        failed.push(fail(item.ip, problem));
        continue;
      }
      const r: ClaimOutcome | 'failed' | 'unreachable' = await this.itemStep(success, unreachable, 'whitelist add item failed', () =>
        this.store.whitelist.claimIp(accountId, item.ip, remark),
      );
      if (r === 'added') success++;
      else if (r === 'already_listed') failed.push(fail(item.ip, Code.ALREADY_LISTED));
      else if (r === 'unavailable') failed.push(fail(item.ip, Code.IP_UNAVAILABLE));
      else {
        unreachable ||= r === 'unreachable';
        failed.push(fail(item.ip, Code.SYSTEM as ItemCode));
      }
    }
    return outcome(success, failed);
  }

  async delete(accountId: number, ips: readonly string[]): Promise<BatchOutcome> {
    let success = 0;
    let unreachable = false;
    const failed: FailedItem[] = [];
    for (const ip of ips) {
      if (!isStrictIPv4(ip)) {
        failed.push(fail(ip, Code.INVALID_IPV4));
        continue;
      }
      const r: ReleaseOutcome | 'failed' | 'unreachable' = await this.itemStep(success, unreachable, 'whitelist delete item failed', () =>
        this.store.whitelist.releaseClaim(accountId, ip),
      );
      if (r === 'deleted') success++;
      else if (r === 'absent') failed.push(fail(ip, Code.NO_SUCH_WHITELIST));
      else {
        unreachable ||= r === 'unreachable';
        failed.push(fail(ip, Code.SYSTEM as ItemCode));
      }
    }
    return outcome(success, failed);
  }

  /**
   * One item's store call. Busy → a retryable item. Database out of reach → 503 when nothing of the
   * batch was written yet; later, this and every remaining item fail retryable without waiting again.
   */
  private async itemStep<T>(done: number, unreachable: boolean, what: string, op: () => Promise<T>): Promise<T | 'failed' | 'unreachable'> {
    if (unreachable) return 'unreachable';
    try {
      return await op();
    } catch (e) {
      if (e instanceof StoreUnavailableError) {
        if (done === 0) throw e;
        return 'unreachable';
      }
      this.log.error({ err: { message: (e as Error).message } }, what);
      return 'failed';
    }
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2): Promise<WhitelistItem | null> {
    const e = await this.store.whitelist.setStatus(accountId, ip, status);
    return e ? toApiItem(e) : null;
  }
}
