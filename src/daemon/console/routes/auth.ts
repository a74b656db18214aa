// Log in (the password, then the second factor when one is on), and log out; each recorded in the audit log.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { verifyPassword } from '../../secrets.js';
import { auditDraft, sessionHandle } from '../../services/audit.js';
import {
  assertionCredential,
  authenticationOptions,
  CHALLENGE_TTL_MS,
  PasskeyError,
  pendingProblem,
  relyingParty,
  verifyAssertion,
} from '../../services/passkeys.js';
import { secondFactorOn, untilText } from '../../services/second-factor.js';
import type { Account } from '../../store/index.js';
import { consoleAudit, field, seeOther, sendHtml, type ConsoleDeps } from '../deps.js';
import { sourceIp, sourceLimitKey } from '../../services/source-ip.js';
import { LoginLimiter } from '../login-limiter.js';
import { loginPage, secondStepPage } from '../pages/login.js';
import { clearSessionCookie, sessionRecord, type Flash } from '../session.js';
import { secondFactorNotice } from '../sudo.js';

/** How long the second step may take after the password. */
const SECOND_STEP_MS = 5 * 60_000;

/** A browser as the Sessions card names it: its User-Agent, cut short. */
export const userAgentOf = (request: FastifyRequest): string =>
  String(request.headers['user-agent'] ?? '').slice(0, 256);

/** Why the log-in page is shown, from `?notice=` (no secret ever travels in a URL). */
const NOTICES: Record<string, Flash> = {
  'logged-out': { kind: 'success', text: 'You have logged out.' },
  'ended-all': { kind: 'success', text: 'You have been logged out on every browser.' },
  inactive: {
    kind: 'error',
    text: 'Your session has ended because the account is not active. Contact support if this is unexpected.',
  },
  expired: { kind: 'info', text: 'Your session has expired. Please log in again.' },
};

const STATUS_TEXT: Record<string, string> = {
  suspended: 'This account is suspended. Contact support to restore access.',
  closed: 'This account is closed.',
};

export default function authRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get('/', async (request, reply) =>
    seeOther(reply, request.session.accountId ? '/console/account' : '/console/login'),
  );

  app.get<{ Querystring: { notice?: string } }>(
    '/login',
    { config: { consolePublic: true } },
    async (request, reply) => {
      if (request.session.accountId) return seeOther(reply, '/console/account');
      const notice = typeof request.query.notice === 'string' ? NOTICES[request.query.notice] : undefined;
      return sendHtml(reply, loginPage({ csrf: reply.generateCsrf(), notice }));
    },
  );

  app.post('/login', { config: { consolePublic: true } }, async (request, reply) => {
    const email = field(request.body, 'email').trim().slice(0, 320);
    const password = field(request.body, 'password');
    const again = (status: number, notice: Flash) =>
      sendHtml(reply, loginPage({ csrf: reply.generateCsrf(), email, notice }), status);
    if (!email || !password) return again(400, { kind: 'error', text: 'Enter your email and password.' });

    const keys = LoginLimiter.keys(email, sourceLimitKey(sourceIp(request)));
    const wait = deps.limiter.retryAfterSec(keys);
    if (wait > 0) {
      reply.header('retry-after', String(wait));
      const minutes = Math.ceil(wait / 60);
      return again(429, {
        kind: 'error',
        text: `Too many failed log-in attempts. Try again in ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}.`,
      });
    }

    const { accounts } = deps.ctx.store;
    const account = await accounts.findByEmail(email);
    // Unknown emails cost one scrypt too, so timing does not tell which part was wrong.
    const ok = await verifyPassword(password.slice(0, 1024), account ? await accounts.passwordHash(account.id) : null);
    if (!ok || !account) {
      deps.limiter.recordFailure(keys);
      request.log.info({ event: 'console_login_failed' }, 'console log-in failed');
      // The account's own record of the attempt (an unknown email has no account to record it on).
      if (account)
        await deps.ctx.store.audit.append({
          ...auditDraft(consoleAudit(request, false), 'console.login_failed', null, { step: 'password' }),
          accountId: account.id,
        });
      return again(401, { kind: 'error', text: 'Wrong email or password.' });
    }
    deps.limiter.recordSuccess(keys);
    if (account.status !== 'active') {
      return again(403, { kind: 'error', text: STATUS_TEXT[account.status] ?? 'This account is not active.' });
    }
    if (secondFactorOn(await deps.secondFactor.state(account.id))) {
      // Not signed in yet: a session of its own (no fixation) that holds only what the second step needs.
      await request.session.regenerate();
      if (request.protocol === 'https') request.session.cookie.secure = true;
      request.session.pending2fa = { accountId: account.id, atMs: deps.ctx.nowMs() };
      return seeOther(reply, '/console/login/2fa');
    }
    return completeLogin(request, reply, account, 'password');
  });

  /** The session of a person past the password and within the second step's time, or null. */
  const pendingOf = async (request: FastifyRequest): Promise<Account | null> => {
    const p = request.session.pending2fa;
    if (!p || deps.ctx.nowMs() - p.atMs > SECOND_STEP_MS) return null;
    const a = await deps.ctx.store.accounts.get(p.accountId);
    return a && a.status === 'active' ? a : null;
  };

  const secondStep = async (
    request: FastifyRequest,
    reply: FastifyReply,
    account: Account,
    notice?: Flash,
    status = 200,
  ) => {
    const state = await deps.secondFactor.state(account.id);
    if (!notice && state.lockedUntilMs > deps.ctx.nowMs()) {
      notice = {
        kind: 'error',
        text: `Too many wrong codes: the second step is locked until ${untilText(state.lockedUntilMs, deps.ctx.nowMs())}.`,
      };
    }
    return sendHtml(
      reply,
      secondStepPage({
        csrf: reply.generateCsrf(),
        totp: state.totp !== null,
        passkeys: state.passkeys.length > 0,
        notice,
      }),
      status,
    );
  };

  app.get('/login/2fa', { config: { consolePublic: true } }, async (request, reply) => {
    const account = await pendingOf(request);
    if (!account) return seeOther(reply, '/console/login?notice=expired');
    return secondStep(request, reply, account);
  });

  app.post('/login/2fa', { config: { consolePublic: true } }, async (request, reply) => {
    const account = await pendingOf(request);
    if (!account) return seeOther(reply, '/console/login?notice=expired');
    const p = request.session.pending2fa!;
    if (p.passkeyOkAtMs && deps.ctx.nowMs() - p.passkeyOkAtMs < CHALLENGE_TTL_MS)
      return completeLogin(request, reply, account, 'passkey');
    const r = await deps.secondFactor.check(
      account.id,
      field(request.body, 'code'),
      consoleAudit(request, false),
      'login',
    );
    if (!r.ok)
      return secondStep(
        request,
        reply,
        account,
        secondFactorNotice(r, deps.ctx.nowMs()),
        r.problem === 'locked' ? 429 : 401,
      );
    return completeLogin(
      request,
      reply,
      account,
      r.method,
      r.method === 'recovery_code' ? r.recoveryCodesLeft : undefined,
    );
  });

  app.post('/login/passkey/options', { config: { consolePublic: true } }, async (request, reply) => {
    const account = await pendingOf(request);
    if (!account)
      return reply.code(401).send({ message: 'Your sign-in expired. Start again with your email and password.' });
    const state = await deps.secondFactor.state(account.id);
    const options = await authenticationOptions(
      relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host),
      state.passkeys,
    );
    request.session.webauthn = {
      challenge: options.challenge,
      purpose: 'login',
      expiresAtMs: deps.ctx.nowMs() + CHALLENGE_TTL_MS,
    };
    return reply.send(options);
  });

  app.post('/login/passkey', { config: { consolePublic: true } }, async (request, reply) => {
    const account = await pendingOf(request);
    if (!account)
      return reply.code(401).send({ message: 'Your sign-in expired. Start again with your email and password.' });
    const pending = request.session.webauthn;
    const problem = pendingProblem(pending, 'login', deps.ctx.nowMs());
    if (problem) return reply.code(400).send({ message: problem });
    delete request.session.webauthn;
    const state = await deps.secondFactor.state(account.id);
    if (state.lockedUntilMs > deps.ctx.nowMs())
      return reply.code(429).send({
        message: `Too many wrong second factors: the second step is locked until ${untilText(state.lockedUntilMs, deps.ctx.nowMs())}.`,
      });
    try {
      const passkey = await deps.ctx.store.secondFactors.passkeyByCredential(
        assertionCredential((request.body as { response?: unknown } | null)?.response),
      );
      if (!passkey || passkey.accountId !== account.id)
        throw new PasskeyError('That passkey is not registered to this account.');
      const counter = await verifyAssertion(
        relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host),
        pending!,
        (request.body as { response: unknown }).response,
        passkey,
      );
      await deps.ctx.store.secondFactors.passkeyUsed(passkey.id, counter);
      request.session.pending2fa!.passkeyOkAtMs = deps.ctx.nowMs();
      return reply.send({ ok: true });
    } catch (e) {
      if (!(e instanceof PasskeyError)) throw e;
      const r = await deps.secondFactor.failed(account.id, consoleAudit(request, false), 'login', 'wrong', 'passkey');
      const locked = r.lockedUntilMs
        ? ` Too many wrong second factors: the second step is locked until ${untilText(r.lockedUntilMs, deps.ctx.nowMs())}.`
        : '';
      return reply.code(400).send({ message: `${e.message}${locked}` });
    }
  });

  /** Signs the session in: a fresh session id (no fixation), written with its log-in record in one transaction. */
  async function completeLogin(
    request: FastifyRequest,
    reply: FastifyReply,
    account: Account,
    method: string,
    recoveryCodesLeft?: number,
  ) {
    await request.session.regenerate();
    // The new session's cookie starts from the defaults: `Secure` again when reached over TLS.
    if (request.protocol === 'https') request.session.cookie.secure = true;
    const now = deps.ctx.nowMs();
    const s = request.session;
    s.accountId = account.id;
    s.loginAtMs = now;
    s.authAtMs = now;
    s.seenAtMs = now;
    s.ip = sourceIp(request);
    s.ua = userAgentOf(request);
    const ctx = { ...consoleAudit(request), actor: { type: 'console' as const, id: sessionHandle(s.sessionId) } };
    await deps.sessions.set(
      s.sessionId,
      sessionRecord(s, deps.ctx.nowMs),
      auditDraft(ctx, 'console.login', null, { method }),
    );
    request.log.info({ event: 'console_login', account_id: account.id }, 'console log-in');
    if (recoveryCodesLeft !== undefined) {
      s.flash = {
        kind: 'warn',
        text: `You signed in with a recovery code; ${recoveryCodesLeft} ${recoveryCodesLeft === 1 ? 'is' : 'are'} left. Make new ones on this page if you are running out.`,
      };
    }
    return seeOther(reply, '/console/account');
  }

  app.post('/logout', async (request, reply) => {
    const accountId = request.session.accountId;
    if (accountId)
      await deps.sessions.destroy(request.session.sessionId, auditDraft(consoleAudit(request), 'console.logout'));
    await request.session.destroy();
    clearSessionCookie(request, reply);
    if (accountId) request.log.info({ event: 'console_logout', account_id: accountId }, 'console log-out');
    return seeOther(reply, '/console/login?notice=logged-out');
  });
}
