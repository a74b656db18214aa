// `proxyctl whitelist list`: one page, or every page with --all; a table on a TTY, TSV on a pipe, JSON with --json.
import { MAX_PAGE_SIZE, RATE_LIMITS, RATE_WINDOW_MS, type ListData, type WhitelistItem } from '../../contract/index.js';
import { isRateLimited, type ListParams, type WhitelistApi } from '../api.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { terminalSafe, renderTsv } from '../output.js';
import { RollingWindowPacer, type Clock } from '../pacer.js';
import { apiFailure, openSession } from './shared.js';

interface ListOptions {
  ctx: Context;
  status?: 'all' | 'active' | 'disabled';
  ip?: string;
  page?: number;
  pageSize?: number;
  all: boolean;
  /** 429 replays per page with --all. */
  retry?: number;
}

const ALL_PAGE_SIZE = MAX_PAGE_SIZE;

export async function runList(opts: ListOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const { api, resolved } = await openSession(ctx, deps);
  const base: ListParams = {};
  if (opts.status) base.status = opts.status;
  if (opts.ip) base.ip = opts.ip;
  let doc: ListData;
  try {
    if (!opts.all) {
      doc = (await api.list({ ...base, page: opts.page ?? 1, page_size: opts.pageSize ?? 20 })).data;
    } else {
      doc = await listAll(api, deps.clock, base, opts.retry);
    }
  } catch (err) {
    throw apiFailure(err, resolved.source);
  } finally {
    await api.close();
  }

  if (ctx.json) {
    out.writeJson(doc);
    return Exit.OK;
  }
  // The server's text made terminalSafe before our colours go around the status (renderTable keeps only those).
  const rows = doc.items.map((i) => [
    i.whitelist_id,
    terminalSafe(i.ip),
    statusText(i, out.paint),
    terminalSafe(i.remark),
    terminalSafe(i.created_at),
  ]);
  if (!deps.io.stdoutIsTTY) {
    // Scripts that skip --json get one tab-separated record per line, no header.
    if (rows.length)
      out.line(
        renderTsv(
          doc.items.map((i) => [i.whitelist_id, i.ip, i.status === 1 ? 'active' : 'disabled', i.remark, i.created_at]),
        ),
      );
    return Exit.OK;
  }
  if (doc.items.length === 0) {
    out.line(doc.total === 0 ? 'No whitelist entries.' : `No entries on page ${doc.page} (${doc.total} in total).`);
    return Exit.OK;
  }
  out.line(out.table(['ID', 'IP', 'Status', 'Remark', 'Created (UTC)'], rows));
  const pages = Math.max(1, Math.ceil(doc.total / Math.max(1, doc.page_size)));
  if (opts.all) out.line(out.paint('dim', `${doc.total} entries`));
  else {
    const more = doc.page < pages ? ` — next: --page ${doc.page + 1}, or --all` : '';
    out.line(out.paint('dim', `page ${doc.page} of ${pages}, ${doc.total} entries${more}`));
  }
  return Exit.OK;
}

function statusText(i: WhitelistItem, paint: (s: 'green' | 'yellow', t: string) => string): string {
  return i.status === 1 ? paint('green', 'active') : paint('yellow', 'disabled');
}

/** Walks every page (100 a page), paced to the list limit; entries that shift between pages are not repeated. */
export async function listAll(
  api: Pick<WhitelistApi, 'list'>,
  clock: Clock,
  base: ListParams = {},
  retry = 3,
): Promise<ListData> {
  const pacer = new RollingWindowPacer(RATE_LIMITS.list, RATE_WINDOW_MS, clock);
  const seen = new Set<number>();
  const items: WhitelistItem[] = [];
  for (let page = 1; ; page++) {
    let data: ListData | undefined;
    for (let replay = 0; data === undefined; replay++) {
      await pacer.acquire();
      try {
        data = (await api.list({ ...base, page, page_size: ALL_PAGE_SIZE })).data;
        pacer.record();
      } catch (err) {
        pacer.record();
        if (!isRateLimited(err) || replay >= retry) throw err;
        await clock.sleep(err.retryAfterMs ?? 1000);
      }
    }
    for (const it of data.items) {
      if (seen.has(it.whitelist_id)) continue;
      seen.add(it.whitelist_id);
      items.push(it);
    }
    if (data.items.length < ALL_PAGE_SIZE || page * ALL_PAGE_SIZE >= data.total) break;
  }
  return { items, page: 1, page_size: items.length, total: items.length };
}
