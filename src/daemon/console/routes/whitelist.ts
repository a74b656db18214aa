// Whitelist page: the same WhitelistService as the API (one set of rules), filters, add, delete, enable/disable.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { MAX_BATCH_ITEMS } from '../../../contract/paths.js';
import { ListQuerySchema } from '../../../contract/schemas.js';
import { accountOf, consoleAudit, field, seeOther, sendHtml, setFlash, takeFlash, type ConsoleDeps } from '../deps.js';
import { lastPage } from '../layout.js';
import { whitelistPage, type WhitelistFilter } from '../pages/whitelist.js';

const PAGE_SIZE = 20;

type Query = { status?: string; ip?: string; page?: string };

export default function whitelistRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const service = deps.ctx.whitelist;

  app.get<{ Querystring: Query }>('/whitelist', async (request, reply) => {
    const account = accountOf(request);
    const q = request.query;
    const str = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
    const filter: WhitelistFilter = {
      status:
        str(q.status) === 'active' || str(q.status) === 'disabled' ? (str(q.status) as 'active' | 'disabled') : 'all',
      ip: str(q.ip).slice(0, 64),
      page: /^[1-9][0-9]{0,8}$/.test(str(q.page)) ? Number(str(q.page)) : 1,
    };
    // The list endpoint's own query schema: a filter means here what it means on the API.
    const parsed = ListQuerySchema.safeParse({
      page: String(filter.page),
      page_size: String(PAGE_SIZE),
      status: filter.status,
      ...(filter.ip ? { ip: filter.ip } : {}),
    });
    let data = { items: [] as Awaited<ReturnType<typeof service.list>>['items'], total: 0 };
    let filterError: string | undefined;
    if (parsed.success) {
      data = await service.list(account.id, parsed.data);
      // Past the last page (a link from before a delete, a page typed by hand): the last page instead.
      const last = lastPage(data.total, PAGE_SIZE);
      if (filter.page > last && data.total > 0) {
        filter.page = last;
        data = await service.list(account.id, { ...parsed.data, page: last });
      }
    } else filterError = 'Enter a complete IPv4 address to filter by, such as 203.0.113.7.';
    const addResult = request.session.addResult;
    if (addResult) delete request.session.addResult;
    return sendHtml(
      reply,
      whitelistPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        verified: account.verified,
        filter,
        filterError,
        items: data.items,
        total: data.total,
        pageSize: PAGE_SIZE,
        addResult,
        flash: takeFlash(request),
      }),
    );
  });

  app.post('/whitelist/add', async (request, reply) => {
    const account = accountOf(request);
    const ips = field(request.body, 'ip')
      .split(/[\s,;]+/)
      .filter(Boolean);
    const remark = field(request.body, 'remark').trim();
    if (ips.length === 0) {
      setFlash(request, 'error', 'Enter at least one IPv4 address.');
      return seeOther(reply, '/console/whitelist');
    }
    try {
      const out = await service.add(
        account.id,
        ips.map((ip) => ({ ip, remark })),
        consoleAudit(request),
      );
      request.session.addResult = { successCount: out.data.success_count, failedItems: out.data.failed_items };
    } catch (e) {
      if (!(e instanceof BusinessError)) throw e;
      const text =
        e.code === Code.NOT_VERIFIED
          ? 'account is not real-name verified'
          : e.code === Code.TOO_MANY_ITEMS
            ? `at most ${MAX_BATCH_ITEMS} addresses at once`
            : e.message;
      setFlash(request, 'error', `${e.code}: ${text}. Nothing was added.`);
    }
    return seeOther(reply, '/console/whitelist');
  });

  app.post('/whitelist/delete', async (request, reply) => {
    const account = accountOf(request);
    const ip = field(request.body, 'ip').trim();
    const out = await service.delete(account.id, [ip], consoleAudit(request));
    const failed = out.data.failed_items[0];
    if (failed) setFlash(request, 'error', `${failed.code}: ${failed.reason} (${failed.ip}).`);
    else setFlash(request, 'success', `Deleted ${ip}. New gateway connections from it are refused.`);
    return seeOther(reply, '/console/whitelist');
  });

  app.post('/whitelist/status', async (request, reply) => {
    const account = accountOf(request);
    const ip = field(request.body, 'ip').trim();
    const status = field(request.body, 'status');
    if (status !== 'active' && status !== 'disabled') {
      setFlash(request, 'error', 'Choose enable or disable.');
      return seeOther(reply, '/console/whitelist');
    }
    const item = await service.setStatus(account.id, ip, status === 'active' ? 1 : 2, consoleAudit(request));
    if (!item) setFlash(request, 'error', `${Code.NO_SUCH_WHITELIST}: whitelist does not exist (${ip}).`);
    else
      setFlash(
        request,
        'success',
        status === 'active' ? `Enabled ${ip}.` : `Disabled ${ip}. The gateway refuses new connections from it.`,
      );
    return seeOther(reply, '/console/whitelist');
  });
}
