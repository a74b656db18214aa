// Usage page and its CSV: the signed-in account's own metered usage only (every query is by its account id),
// both over the account's current period.
import type { FastifyInstance } from 'fastify';
import { usageDomains, usageReport, usageText } from '../../services/usage.js';
import { accountOf, sendHtml, takeFlash, type ConsoleDeps } from '../deps.js';
import { usagePage } from '../pages/usage.js';
import { shownPeriodStart } from '../../metering/plans.js';
import type { Plan, Store } from '../../store/index.js';
import { PERIOD_MS, bucketStart } from '../../store/usage-sql.js';
import { formatSize } from '../../../contract/size.js';

const HOUR = PERIOD_MS.hour;
/** Domains the Usage page names; the rest are summed as "Other". */
const TOP_DOMAINS = 10;
const DAY = PERIOD_MS.day;

/** The account's plan and where its current period started: what the page and its CSV both cover. */
async function currentPeriod(
  store: Store,
  accountId: number,
  nowMs: number,
): Promise<{ plan: Plan | null; from: number }> {
  const plan = await store.plans.get(accountId);
  return { plan, from: await shownPeriodStart(store, accountId, plan, nowMs) };
}

export default function usageRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const store = deps.ctx.store;

  app.get('/usage', async (request, reply) => {
    const account = accountOf(request);
    const now = Date.now();
    const hourNow = bucketStart('hour', now);
    const dayNow = bucketStart('day', now);
    const hourStarts = Array.from({ length: 24 }, (_, i) => hourNow - (23 - i) * HOUR);
    const dayStarts = Array.from({ length: 30 }, (_, i) => dayNow - (29 - i) * DAY);
    const { plan, from } = await currentPeriod(store, account.id, now);
    const [byUser, hours, days, domains] = await Promise.all([
      usageReport(store, account.id, 'user', from, now + 1, now, deps.ctx.usageRetentionMs),
      usageReport(store, account.id, 'hour', hourStarts[0]!, now + 1, now),
      usageReport(store, account.id, 'day', dayStarts[0]!, now + 1, now),
      usageDomains(store, account.id, { from, limit: TOP_DOMAINS }, now),
    ]);
    const since = new Date(from).toISOString().slice(0, 10);
    const periodLabel = !plan
      ? `This month (${new Date(from).toISOString().slice(0, 7)}, UTC)`
      : plan.period === 'lifetime'
        ? `Since ${since} (lifetime plan, UTC)`
        : `This ${plan.period === 'day' ? 'day' : 'billing month'} (since ${since}, UTC)`;
    const limit =
      plan?.trafficLimit != null
        ? `${formatSize(plan.trafficLimit)} ${plan.period === 'lifetime' ? "for the plan's lifetime" : `per ${plan.period}`}`
        : 'No limit';
    const expired = plan?.expiresAt != null && plan.expiresAt <= now;
    return sendHtml(
      reply,
      usagePage({
        csrf: reply.generateCsrf(),
        email: account.email,
        periodLabel,
        limit: expired ? `${limit} (plan expired)` : limit,
        byUser,
        hours,
        days,
        domains,
        hourStarts,
        dayStarts,
        flash: takeFlash(request),
      }),
    );
  });

  app.get('/usage.csv', async (request, reply) => {
    const account = accountOf(request);
    const now = Date.now();
    const { plan, from } = await currentPeriod(store, account.id, now);
    const report = await usageReport(store, account.id, 'user', from, now + 1, now, deps.ctx.usageRetentionMs);
    // Named by the period: its month without a plan (usage-2026-11.csv), else its first day (usage-2026-11-15.csv).
    const name = plan?.period === 'lifetime' ? 'lifetime' : new Date(from).toISOString().slice(0, plan ? 10 : 7);
    return reply
      .type('text/csv; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="usage-${name}.csv"`)
      .send(usageText(report, 'csv'));
  });
}
