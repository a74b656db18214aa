// Log in and log out.
import type { FastifyInstance } from 'fastify';
import { verifyPassword } from '../../secrets.js';
import { field, seeOther, sendHtml, type ConsoleDeps } from '../deps.js';
import { sourceIp, sourceLimitKey } from '../../services/source-ip.js';
import { LoginLimiter } from '../login-limiter.js';
import { loginPage } from '../pages/login.js';
import { clearSessionCookie, type Flash } from '../session.js';

/** Why the log-in page is shown, from `?notice=` (no secret ever travels in a URL). */
const NOTICES: Record<string, Flash> = {
  'logged-out': { kind: 'success', text: 'You have logged out.' },
  'ended-all': { kind: 'success', text: 'You have been logged out on every browser.' },
  inactive: { kind: 'error', text: 'Your session has ended because the account is not active. Contact support if this is unexpected.' },
  expired: { kind: 'info', text: 'Your session has expired. Please log in again.' },
};

const STATUS_TEXT: Record<string, string> = {
  suspended: 'This account is suspended. Contact support to restore access.',
  closed: 'This account is closed.',
};

export default function authRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/', async (request, reply) => seeOther(reply, request.session.accountId ? '/console/account' : '/console/login'));

  app.get<{ Querystring: { notice?: string } }>('/login', { config: { consolePublic: true } }, async (request, reply) => {
    if (request.session.accountId) return seeOther(reply, '/console/account');
    const notice = typeof request.query.notice === 'string' ? NOTICES[request.query.notice] : undefined;
    return sendHtml(reply, loginPage({ csrf: reply.generateCsrf(), notice }));
  });

  app.post('/login', { config: { consolePublic: true } }, async (request, reply) => {
    const email = field(request.body, 'email').trim().slice(0, 320);
    const password = field(request.body, 'password');
    const again = (status: number, notice: Flash) => sendHtml(reply, loginPage({ csrf: reply.generateCsrf(), email, notice }), status);
    if (!email || !password) return again(400, { kind: 'error', text: 'Enter your email and password.' });

    const keys = LoginLimiter.keys(email, sourceLimitKey(sourceIp(request)));
    const wait = deps.limiter.retryAfterSec(keys);
    if (wait > 0) {
      reply.header('retry-after', String(wait));
      const minutes = Math.ceil(wait / 60);
      return again(429, { kind: 'error', text: `Too many failed log-in attempts. Try again in ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}.` });
    }

    const { accounts } = deps.ctx.store;
    const account = await accounts.findByEmail(email);
    // Unknown emails cost one scrypt too, so timing does not tell which part was wrong.
    const ok = await verifyPassword(password.slice(0, 1024), account ? await accounts.passwordHash(account.id) : null);
    if (!ok || !account) {
      deps.limiter.recordFailure(keys);
      request.log.info({ event: 'console_login_failed' }, 'console log-in failed');
      return again(401, { kind: 'error', text: 'Wrong email or password.' });
    }
    deps.limiter.recordSuccess(keys);
    if (account.status !== 'active') {
      return again(403, { kind: 'error', text: STATUS_TEXT[account.status] ?? 'This account is not active.' });
    }
    // A fresh session id at log-in (no fixation); the CSRF secret is new with it.
    await request.session.regenerate();
    // The new session's cookie starts from the defaults: `Secure` again when reached over TLS.
    if (request.protocol === 'https') request.session.cookie.secure = true;
    request.session.accountId = account.id;
    request.session.loginAtMs = deps.ctx.nowMs();
    request.log.info({ event: 'console_login', account_id: account.id }, 'console log-in');
    return seeOther(reply, '/console/account');
  });

  app.post('/logout', async (request, reply) => {
    const accountId = request.session.accountId;
    await request.session.destroy();
    clearSessionCookie(request, reply);
    if (accountId) request.log.info({ event: 'console_logout', account_id: accountId }, 'console log-out');
    return seeOther(reply, '/console/login?notice=logged-out');
  });
}
