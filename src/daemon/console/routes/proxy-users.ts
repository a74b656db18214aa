// Proxy users page: create (password generated and shown once), reset password, delete.
import type { FastifyInstance } from 'fastify';
import { accountOf, consoleAudit, field, seeOther, sendHtml, setFlash, takeFlash, type ConsoleDeps } from '../deps.js';
import { lastPage } from '../layout.js';
import { proxyUsersPage } from '../pages/proxy-users.js';
import { RESERVED_MARKERS_HINT, isProxyUsername, reservedMarkerIn } from '../../../contract/proxy-username.js';
import {
  createProxyUser,
  deleteProxyUser,
  resetProxyUserPassword,
  setProxyUserLimits,
} from '../../services/proxy-users.js';
import { countLimit, rateLimit, sizeLimit } from '../../services/limits.js';

const USERS_PAGE_SIZE = 50;

export default function proxyUserRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const users = deps.ctx.store.proxyUsers;

  app.get<{ Querystring: { page?: string } }>('/proxy-users', async (request, reply) => {
    const account = accountOf(request);
    const all = await users.listForAccount(account.id);
    // A page of them (thousands fit no page); one past the end shows the last.
    const asked =
      typeof request.query.page === 'string' && /^[1-9][0-9]{0,8}$/.test(request.query.page)
        ? Number(request.query.page)
        : 1;
    const page = Math.min(asked, lastPage(all.length, USERS_PAGE_SIZE));
    let revealed: { username: string; password: string } | null = null;
    const reveal = request.session.reveal;
    if (reveal) {
      delete request.session.reveal;
      const password = reveal.kind === 'proxy-password' ? deps.sealer.open(reveal.sealed) : null;
      if (password && reveal.label) revealed = { username: reveal.label, password };
    }
    return sendHtml(
      reply,
      proxyUsersPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        users: all.slice((page - 1) * USERS_PAGE_SIZE, page * USERS_PAGE_SIZE),
        total: all.length,
        page,
        pageSize: USERS_PAGE_SIZE,
        limits: new Map((await deps.ctx.store.plans.userLimits(account.id)).map((l) => [l.username, l])),
        revealed,
        flash: takeFlash(request),
        nowMs: deps.ctx.nowMs(),
      }),
    );
  });

  app.post('/proxy-users', async (request, reply) => {
    const account = accountOf(request);
    const username = field(request.body, 'username').trim();
    const created = await createProxyUser(deps.ctx.store, account.id, username, null, consoleAudit(request));
    if (!created.ok) {
      const message =
        created.problem === 'exists'
          ? `The username ${username} is taken. Choose another one.`
          : isProxyUsername(username)
            ? `Usernames may not contain "${reservedMarkerIn(username)}": ${RESERVED_MARKERS_HINT}.`
            : 'Usernames have 3–64 characters: letters, digits, dot, underscore or hyphen.';
      setFlash(request, 'error', message);
      return seeOther(reply, '/console/proxy-users');
    }
    request.session.reveal = { kind: 'proxy-password', sealed: deps.sealer.seal(created.password), label: username };
    request.log.info(
      { event: 'console_proxy_user_created', account_id: account.id, proxy_user_id: created.user.id },
      'proxy user created',
    );
    return seeOther(reply, '/console/proxy-users');
  });

  app.post<{ Params: { id: string } }>('/proxy-users/:id/reset', async (request, reply) => {
    const account = accountOf(request);
    const user = await ownUser(request.params.id, account.id);
    if (!user) {
      setFlash(request, 'error', 'That proxy user does not exist.');
      return seeOther(reply, '/console/proxy-users');
    }
    const password = await resetProxyUserPassword(deps.ctx.store, account.id, user, consoleAudit(request));
    request.session.reveal = { kind: 'proxy-password', sealed: deps.sealer.seal(password), label: user.username };
    request.log.info(
      { event: 'console_proxy_user_reset', account_id: account.id, proxy_user_id: user.id },
      'proxy user password reset',
    );
    return seeOther(reply, '/console/proxy-users');
  });

  app.post<{ Params: { id: string } }>('/proxy-users/:id/limits', async (request, reply) => {
    const account = accountOf(request);
    const user = await ownUser(request.params.id, account.id);
    if (!user) {
      setFlash(request, 'error', 'That proxy user does not exist.');
      return seeOther(reply, '/console/proxy-users');
    }
    const traffic = sizeLimit(field(request.body, 'traffic_limit'));
    const conns = countLimit(field(request.body, 'max_connections'));
    const rate = rateLimit(field(request.body, 'rate_limit'));
    if (!traffic.ok || !conns.ok || !rate.ok) {
      const problem = !traffic.ok
        ? `Traffic limit: ${traffic.problem}`
        : !conns.ok
          ? `Max connections: ${conns.problem}`
          : `Rate limit: ${(rate as { problem: string }).problem}`;
      setFlash(request, 'error', `${problem}.`);
      return seeOther(reply, '/console/proxy-users');
    }
    await setProxyUserLimits(
      deps.ctx.store,
      account.id,
      user.username,
      { trafficLimit: traffic.value, maxConnections: conns.value, rateLimit: rate.value },
      consoleAudit(request),
    );
    request.log.info(
      { event: 'console_proxy_user_limits', account_id: account.id, proxy_user_id: user.id },
      'proxy user limits saved',
    );
    setFlash(request, 'success', `Saved the limits of ${user.username}. Every gateway applies them within a second.`);
    return seeOther(reply, '/console/proxy-users');
  });

  app.post<{ Params: { id: string } }>('/proxy-users/:id/delete', async (request, reply) => {
    const account = accountOf(request);
    const user = await ownUser(request.params.id, account.id);
    if (!user || !(await deleteProxyUser(deps.ctx.store, account.id, user, consoleAudit(request))))
      setFlash(request, 'error', 'That proxy user does not exist.');
    else
      setFlash(request, 'success', `Deleted proxy user ${user.username}. New gateway connections with it are refused.`);
    return seeOther(reply, '/console/proxy-users');
  });

  async function ownUser(idParam: string, accountId: number) {
    if (!/^[1-9][0-9]{0,15}$/.test(idParam)) return null;
    const u = await users.get(Number(idParam));
    return u && u.account_id === accountId ? u : null;
  }
}
