// Activity page and its CSV: the signed-in account's audit records only (the account id comes from the session,
// never from the query), filtered by action and by UTC days.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DAY_MS } from '../../../rules/time.js';
import { parseIsoTime } from '../../../contract/time.js';
import { AUDIT_ACTIONS, auditCsv, type AuditListQuery } from '../../services/audit.js';
import { accountOf, sendHtml, takeFlash, type ConsoleDeps } from '../deps.js';
import { activityPage, type ActivityFilter } from '../pages/activity.js';

const PAGE_SIZE = 50;
/** A CSV holds at most this many records (the newest of the selection): a bounded answer. */
const CSV_MAX = 10_000;

type Query = { action?: string; from?: string; to?: string; page?: string };

function filterOf(request: FastifyRequest<{ Querystring: Query }>): {
  filter: ActivityFilter;
  query: Omit<AuditListQuery, 'page' | 'page_size'>;
  error?: string;
} {
  const str = (v: unknown, max: number) => (typeof v === 'string' ? v.trim().slice(0, max) : '');
  const q = request.query;
  const filter: ActivityFilter = {
    action: str(q.action, 64),
    from: str(q.from, 10),
    to: str(q.to, 10),
    page: /^[1-9]\d{0,8}$/.test(str(q.page, 9)) ? Number(q.page) : 1,
  };
  const problems: string[] = [];
  const families = new Set(Object.keys(AUDIT_ACTIONS).map((a) => a.split('.')[0]!));
  if (filter.action && !Object.hasOwn(AUDIT_ACTIONS, filter.action) && !families.has(filter.action))
    problems.push(`There is no action "${filter.action}".`);
  const day = (s: string, what: string) => {
    if (!s) return undefined;
    const t = /^\d{4}-\d{2}-\d{2}$/.test(s) ? parseIsoTime(s) : null;
    if (t === null) problems.push(`${what}: enter a date such as 2026-11-25.`);
    return t ?? undefined;
  };
  const fromMs = day(filter.from, 'From');
  const toDay = day(filter.to, 'To');
  const toMs = toDay === undefined ? undefined : toDay + DAY_MS;
  if (fromMs !== undefined && toMs !== undefined && fromMs >= toMs) problems.push('From must not be after To.');
  return {
    filter,
    query: { fromMs, toMs, action: filter.action || undefined },
    ...(problems.length ? { error: problems.join(' ') } : {}),
  };
}

export default function activityRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get<{ Querystring: Query }>('/activity', async (request, reply) => {
    const account = accountOf(request);
    const { filter, query, error } = filterOf(request);
    let data = { items: [] as Awaited<ReturnType<typeof deps.ctx.audit.list>>['items'], total: 0 };
    if (!error) {
      data = await deps.ctx.audit.list(account.id, { ...query, page: filter.page, page_size: PAGE_SIZE });
      const last = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      if (filter.page > last && data.total > 0) {
        filter.page = last;
        data = await deps.ctx.audit.list(account.id, { ...query, page: last, page_size: PAGE_SIZE });
      }
    }
    return sendHtml(
      reply,
      activityPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        filter,
        filterError: error,
        items: data.items,
        total: data.total,
        pageSize: PAGE_SIZE,
        flash: takeFlash(request),
      }),
    );
  });

  app.get<{ Querystring: Query }>('/activity.csv', async (request, reply) => {
    const account = accountOf(request);
    const { query, error } = filterOf(request);
    if (error) return reply.code(400).type('text/plain; charset=utf-8').send(`${error}\n`);
    const { items } = await deps.ctx.audit.list(account.id, { ...query, page: 1, page_size: CSV_MAX });
    const day = new Date(deps.ctx.nowMs()).toISOString().slice(0, 10);
    return reply
      .header('content-disposition', `attachment; filename="activity-${day}.csv"`)
      .header('cache-control', 'no-store')
      .type('text/csv; charset=utf-8')
      .send(auditCsv(items));
  });
}
