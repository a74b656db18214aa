// IPs page: the signed-in account's dedicated addresses only (every query is by its account id), and their replacement.
import { isStrictIPv4 } from '../../../contract/ipv4.js';
import type { FastifyInstance } from 'fastify';
import { customerIps, monthOf, replaceAddress } from '../../services/dedicated.js';
import { accountOf, consoleAudit, field, seeOther, sendHtml, setFlash, takeFlash, type ConsoleDeps } from '../deps.js';
import { ipsPage } from '../pages/ips.js';

export default function ipRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { store } = deps.ctx;

  app.get('/ips', async (request, reply) => {
    const account = accountOf(request);
    const now = deps.ctx.nowMs();
    const [{ period_start, items }, used] = await Promise.all([
      customerIps(store, account.id, now),
      store.egress.replacementsUsed(account.id, monthOf(Math.floor(now / 1000)).month),
    ]);
    return sendHtml(
      reply,
      ipsPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        periodStart: period_start,
        items,
        replacements: { used, max: deps.ctx.dedicated.replacementsPerMonth },
        flash: takeFlash(request),
      }),
    );
  });

  app.post('/ips/replace', async (request, reply) => {
    const account = accountOf(request);
    const address = field(request.body, 'address').trim();
    if (!isStrictIPv4(address)) {
      setFlash(request, 'error', 'Choose one of your addresses to replace.');
      return seeOther(reply, '/console/ips');
    }
    const d = deps.ctx.dedicated;
    const r = await replaceAddress(
      store,
      account.id,
      address,
      {
        maxPerMonth: d.replacementsPerMonth,
        quarantineDays: d.quarantineDays,
        nowSec: Math.floor(deps.ctx.nowMs() / 1000),
      },
      consoleAudit(request),
    );
    if (r.ok)
      setFlash(
        request,
        'success',
        `Replaced ${r.old} with ${r.new}. Connections open from ${r.old} end within seconds.`,
      );
    else if (r.code === 'not_found') setFlash(request, 'error', `${address} is not one of your addresses.`);
    else if (r.code === 'allowance')
      setFlash(
        request,
        'error',
        `You have used this month's ${d.replacementsPerMonth} replacements; more from ${new Date(Date.now() + r.retryAfterSec * 1000).toISOString().slice(0, 10)}.`,
      );
    else setFlash(request, 'error', 'There is no free address to replace it with now. Please ask support.');
    return seeOther(reply, '/console/ips');
  });
}
