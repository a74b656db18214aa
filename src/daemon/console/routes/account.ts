// Account page: details, the API token card (create/reset with a confirmation step, shown once), API keys
// (routes/api-keys.ts), webhook, target
// rules, password and email (sensitive actions: sudo.ts), the second factor and sessions (routes/security.ts).
import type { FastifyInstance } from 'fastify';
import { passwordProblem } from '../../../contract/password.js';
import { verifyPassword } from '../../secrets.js';
import { changeEmail, changePassword } from '../../services/account.js';
import { ApiKeyService } from '../../services/api-keys.js';
import { auditDraft } from '../../services/audit.js';
import { resetToken } from '../../services/tokens.js';
import {
  DEFAULT_THRESHOLDS,
  WebhookError,
  parseThresholds,
  removeWebhook,
  setWebhook,
} from '../../services/webhooks.js';
import { describeProblems, getTargetRules, setTargetRules } from '../../services/target-rules.js';
import { accountOf, consoleAudit, field, seeOther, sendHtml, setFlash, takeFlash, type ConsoleDeps } from '../deps.js';
import { accountPage, tokenConfirmPage } from '../pages/account.js';
import { clearSessionCookie } from '../session.js';
import { sourceIp, sourceLimitKey } from '../../services/source-ip.js';
import { LoginLimiter } from '../login-limiter.js';
import { sensitiveAction } from '../sudo.js';
import { securityView } from './security.js';

// Passwords set before the one rule (src/contract/password.ts) could be up to 1024 characters: still checked.
const MAX_VERIFIED_LENGTH = 1024;

export default function accountRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { store } = deps.ctx;

  app.get('/account', async (request, reply) => {
    const account = accountOf(request);
    // The full token lives (sealed) in the session for one redirect only; this read discards it.
    let revealedToken: string | null = null;
    let revealedSecret: string | null = null;
    let recoveryCodes: string[] | null = null;
    let revealedKey: { id: string; key: string } | null = null;
    const reveal = request.session.reveal;
    if (reveal) {
      delete request.session.reveal;
      if (reveal.kind === 'token') revealedToken = deps.sealer.open(reveal.sealed);
      if (reveal.kind === 'webhook-secret') revealedSecret = deps.sealer.open(reveal.sealed);
      if (reveal.kind === 'api-key') {
        const key = deps.sealer.open(reveal.sealed);
        if (key && reveal.label) revealedKey = { id: reveal.label, key };
      }
      if (reveal.kind === 'recovery-codes')
        recoveryCodes = JSON.parse(deps.sealer.open(reveal.sealed) ?? 'null') as string[] | null;
    }
    const webhook = await store.webhooks.get(account.id);
    if (revealedSecret && webhook?.secret !== revealedSecret) revealedSecret = null; // set again elsewhere since
    const token = await store.tokens.activeToken(account.id);
    if (revealedToken && token && !revealedToken.startsWith(`${token.access_key}.`)) revealedToken = null; // reset again elsewhere since
    return sendHtml(
      reply,
      accountPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        status: account.status,
        verified: account.verified,
        createdAtSec: account.created_at,
        token: token ? { accessKey: token.access_key, createdAtSec: token.created_at } : null,
        revealedToken,
        webhook: webhook ? { url: webhook.url, thresholds: webhook.thresholds } : null,
        revealedWebhookSecret: revealedSecret,
        sessionCount: await deps.sessions.countForAccount(account.id),
        rules: await getTargetRules(store, account.id),
        apiKeys: {
          csrf: '',
          keys: await new ApiKeyService(store, deps.ctx.nowMs).list(account.id),
          revealed: revealedKey,
        },
        security: await securityView(request, deps, account, recoveryCodes),
        flash: takeFlash(request),
      }),
    );
  });

  app.get('/token/confirm', async (request, reply) => {
    const account = accountOf(request);
    const token = await store.tokens.activeToken(account.id);
    return sendHtml(
      reply,
      tokenConfirmPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        existingAccessKey: token?.access_key ?? null,
      }),
    );
  });

  sensitiveAction(app, deps, '/token', 'token.reset', { label: 'Making a new API token' }, async (request, reply) => {
    const account = accountOf(request);
    // Disables the old token and stores the new one in one transaction: the old one gets 401 at once.
    const minted = await resetToken(store, account.id, consoleAudit(request));
    request.session.reveal = { kind: 'token', sealed: deps.sealer.seal(minted.token) };
    request.log.info(
      { event: 'console_token_reset', account_id: account.id, access_key: minted.accessKey },
      'api token made in the console',
    );
    return seeOther(reply, '/console/account');
  });

  sensitiveAction(
    app,
    deps,
    '/webhook',
    'webhook.set',
    { label: 'Setting the webhook' },
    async (request, reply, { fields }) => {
      const account = accountOf(request);
      const url = (fields.url ?? '').trim();
      const thresholdsText = (fields.thresholds ?? '').trim();
      try {
        const thresholds = thresholdsText ? parseThresholds(thresholdsText) : DEFAULT_THRESHOLDS;
        const set = await setWebhook(
          store,
          account.id,
          { url, thresholds },
          { allowPrivate: deps.ctx.allowPrivateWebhooks },
          consoleAudit(request),
        );
        request.session.reveal = { kind: 'webhook-secret', sealed: deps.sealer.seal(set.secret) };
        request.log.info({ event: 'console_webhook_set', account_id: account.id }, 'webhook set in the console');
      } catch (e) {
        if (!(e instanceof WebhookError)) throw e;
        setFlash(
          request,
          'error',
          `The webhook was not saved. ${e.message.replace(/^url: /, 'URL: ').replace(/^thresholds: /, 'Thresholds: ')}.`,
        );
      }
      return seeOther(reply, '/console/account');
    },
  );

  sensitiveAction(
    app,
    deps,
    '/webhook/remove',
    'webhook.remove',
    { label: 'Removing the webhook' },
    async (request, reply) => {
      const account = accountOf(request);
      await removeWebhook(store, account.id, consoleAudit(request));
      setFlash(request, 'success', 'The webhook was removed.');
      return seeOther(reply, '/console/account');
    },
  );

  app.post('/target-rules', async (request, reply) => {
    const account = accountOf(request);
    // Lines or commas, as typed; an empty box empties its list.
    const list = (name: string) => {
      const items = field(request.body, name)
        .split(/[\r\n,]+/)
        .map((i) => i.trim())
        .filter((i) => i !== '');
      return items.length ? items.join(',') : 'none';
    };
    const r = await setTargetRules(
      store,
      account.id,
      { deny: list('deny'), allow: list('allow') },
      consoleAudit(request),
    );
    if (!r.ok) {
      const which = (list: string) => (list === 'allow' ? 'Allowed targets' : 'Denied targets');
      const text =
        r.code === 'invalid_items'
          ? r.lists.map((l) => `${which(l.list)}: ${describeProblems(l.problems)}`).join('; ')
          : 'Denied targets: not accepted';
      setFlash(request, 'error', `${text}. Your target rules were not changed.`);
      return seeOther(reply, '/console/account');
    }
    request.log.info(
      { event: 'console_target_rules', account_id: account.id, deny: r.rules.deny.length, allow: r.rules.allow.length },
      'target rules saved',
    );
    setFlash(
      request,
      'success',
      'Saved your target rules. Every gateway applies them to new connections within a second.',
    );
    return seeOther(reply, '/console/account');
  });

  sensitiveAction(
    app,
    deps,
    '/password',
    'account.password',
    { label: 'Changing your password' },
    async (request, reply, { fields }) => {
      const account = accountOf(request);
      const current = fields.current_password ?? '';
      const next = fields.new_password ?? '';
      // A guess at the current password counts as a failed log-in (same limits, same counts): a session taken
      // over cannot be used to find the password by trying.
      const keys = LoginLimiter.keys(account.email, sourceLimitKey(sourceIp(request)));
      const wait = deps.limiter.retryAfterSec(keys);
      if (wait > 0) {
        const minutes = Math.ceil(wait / 60);
        reply.header('retry-after', String(wait));
        setFlash(
          request,
          'error',
          `Too many wrong passwords. Try again in ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}. Your password was not changed.`,
        );
        return seeOther(reply, '/console/account');
      }
      if (
        !(await verifyPassword(current.slice(0, MAX_VERIFIED_LENGTH), await store.accounts.passwordHash(account.id)))
      ) {
        deps.limiter.recordFailure(keys);
        request.log.info(
          { event: 'console_password_wrong', account_id: account.id },
          'console: wrong current password',
        );
        setFlash(request, 'error', 'The current password is wrong. Your password was not changed.');
        return seeOther(reply, '/console/account');
      }
      deps.limiter.recordSuccess(keys);
      const problem = passwordProblem(next);
      if (problem) {
        setFlash(request, 'error', `The new password must be ${problem}. Your password was not changed.`);
        return seeOther(reply, '/console/account');
      }
      await changePassword(store, account.id, next, consoleAudit(request));
      // Every other session ends; this one continues under a new id.
      await deps.sessions.destroyOthers(account.id, request.session.sessionId);
      await request.session.regenerate(['accountId', 'loginAtMs', 'authAtMs', 'ua', 'ip', 'seenAtMs']);
      if (request.protocol === 'https') request.session.cookie.secure = true;
      request.log.info({ event: 'console_password_changed', account_id: account.id }, 'console password changed');
      setFlash(request, 'success', 'Your password has been changed. Other browsers have been logged out.');
      return seeOther(reply, '/console/account');
    },
  );

  sensitiveAction(
    app,
    deps,
    '/email',
    'account.email',
    { label: 'Changing your email' },
    async (request, reply, { fields }) => {
      const account = accountOf(request);
      const email = (fields.email ?? '').trim();
      const r = await changeEmail(store, account, email, consoleAudit(request));
      if (!r.ok) {
        const why =
          r.problem === 'invalid'
            ? 'That is not an email address.'
            : r.problem === 'same'
              ? 'That is your email already.'
              : 'Another account uses that email.';
        setFlash(request, 'error', `${why} Your email was not changed.`);
        return seeOther(reply, '/console/account');
      }
      request.log.info({ event: 'console_email_changed', account_id: account.id }, 'console email changed');
      setFlash(request, 'success', `Your email is now ${email}. Use it to sign in from now on.`);
      return seeOther(reply, '/console/account');
    },
  );

  app.post('/sessions/end-all', async (request, reply) => {
    const account = accountOf(request);
    await deps.sessions.destroyForAccount(
      account.id,
      auditDraft(consoleAudit(request), 'console.sessions_ended', null, { including_this: true }),
    );
    await request.session.destroy();
    clearSessionCookie(request, reply);
    request.log.info({ event: 'console_logout_everywhere', account_id: account.id }, 'console sessions ended');
    return seeOther(reply, '/console/login?notice=ended-all');
  });
}
