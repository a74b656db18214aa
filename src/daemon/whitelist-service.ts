// The whitelist rules (docs/api.md List, Add, Delete), shared by the API and the console (one implementation).
import { BusinessError, Code, ITEM_REASON, partialMessage, type ItemCode } from '../contract/codes.js';
import { checkWhitelistIpv4, codePointLength, isStrictIPv4, MAX_REMARK_CODE_POINTS } from '../contract/ipv4.js';
import { isoSeconds, type BatchResult, type FailedItem, type ListData, type ListQuery, type WhitelistItem } from '../contract/schemas.js';
import { isMainlandChina, type CountryLookup } from './geo.js';
import { StoreUnavailableError, type Store, type WhitelistEntry } from './store/index.js';

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
   * Adds items, each committed on its own, with the outcome of processing them one by one in order.
   * The caller has checked verification. Database out of reach with nothing written: 503.
   */
  async add(accountId: number, items: ReadonlyArray<{ ip: string; remark?: string | undefined }>): Promise<BatchOutcome> {
    const account = await this.store.accounts.get(accountId);
    if (!account || account.status !== 'active') throw new BusinessError(Code.INVALID_API_KEY);
    if (!account.verified) throw new BusinessError(Code.NOT_VERIFIED);
    const remark = (i: number) => items[i]!.remark ?? '';
    const problems = items.map((item, i) => this.itemProblem(item.ip, remark(i)));
    // Entry ids in item order, reserved up front when items are claimed concurrently (PostgreSQL).
    const ids = await this.store.whitelist.reserveEntryIds(problems.filter((p) => p === null).length);
    const idOf = new Map<number, number>();
    if (ids) problems.forEach((p, i) => p === null && idOf.set(i, ids[idOf.size]!));
    const results = await this.perItem(
      items.map((item, i) => (problems[i] === null ? item.ip : null)),
      (i) => this.store.whitelist.claimIp(accountId, items[i]!.ip, remark(i), idOf.get(i)),
      'whitelist add item failed',
    );
    return this.tally(
      items.map((item, i) => {
        const r = results[i];
        const code = problems[i] ?? (r === 'added' ? null : r === 'already_listed' ? Code.ALREADY_LISTED : r === 'unavailable' ? Code.IP_UNAVAILABLE : Code.SYSTEM);
        return { ip: item.ip, code: code as ItemCode | null, unreachable: r === 'unreachable' };
      }),
    );
  }

  async delete(accountId: number, ips: readonly string[]): Promise<BatchOutcome> {
    const results = await this.perItem(
      ips.map((ip) => (isStrictIPv4(ip) ? ip : null)),
      (i) => this.store.whitelist.releaseClaim(accountId, ips[i]!),
      'whitelist delete item failed',
    );
    return this.tally(
      ips.map((ip, i) => {
        const r = results[i];
        const code = r === undefined ? Code.INVALID_IPV4 : r === 'deleted' ? null : r === 'absent' ? Code.NO_SUCH_WHITELIST : Code.SYSTEM;
        return { ip, code: code as ItemCode | null, unreachable: r === 'unreachable' };
      }),
    );
  }

  /** The batch outcome in item order; 503 when the database was out of reach and nothing was written. */
  private tally(per: Array<{ ip: string; code: ItemCode | null; unreachable: boolean }>): BatchOutcome {
    const success = per.filter((p) => p.code === null).length;
    if (success === 0 && per.some((p) => p.unreachable)) throw new StoreUnavailableError('during the batch, before any item was written');
    return outcome(
      success,
      per.filter((p) => p.code !== null).map((p) => fail(p.ip, p.code!)),
    );
  }

  /**
   * Runs the store step of every item with a key (null: refused before the database), up to
   * `store.itemConcurrency` at once: on PostgreSQL concurrent commits share a WAL flush. An IP met again
   * waits for its first occurrence, so outcomes are those of one-by-one processing in order. Busy → a
   * retryable item; once the database is out of reach, the remaining items fail retryable without waiting again.
   */
  private async perItem<T>(keys: ReadonlyArray<string | null>, step: (i: number) => Promise<T>, what: string): Promise<Array<T | 'failed' | 'unreachable' | undefined>> {
    const out: Array<T | 'failed' | 'unreachable' | undefined> = new Array(keys.length);
    const pending = new Map<string, Promise<void>>();
    let unreachable = false;
    let next = 0;
    const one = async (i: number, before: Promise<void> | undefined): Promise<void> => {
      await before;
      if (unreachable) {
        out[i] = 'unreachable';
        return;
      }
      try {
        out[i] = await step(i);
      } catch (e) {
        if (e instanceof StoreUnavailableError) {
          unreachable = true;
          out[i] = 'unreachable';
          return;
        }
        this.log.error({ err: { message: (e as Error).message } }, what);
        out[i] = 'failed';
      }
    };
    const lane = async (): Promise<void> => {
      while (next < keys.length) {
        const i = next++;
        const key = keys[i];
        if (key === null || key === undefined) continue;
        const done = one(i, pending.get(key));
        pending.set(key, done);
        await done;
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.store.itemConcurrency) }, lane));
    return out;
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2): Promise<WhitelistItem | null> {
    const e = await this.store.whitelist.setStatus(accountId, ip, status);
    return e ? toApiItem(e) : null;
  }
}
