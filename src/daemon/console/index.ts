// The web console under /console/ (docs/console.md): server-rendered pages, server-side sessions in the store,
// CSRF tokens on every form, rate-limited log-in. Everything lives in one encapsulated scope so none
// of its hooks, parsers or handlers touch the whitelist API.
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import fastifySession from '@fastify/session';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiContext } from '../services/context.js';
import { randomKey } from '../secrets.js';
import { SecondFactorService } from '../services/second-factor.js';
import { sourceIp } from '../services/source-ip.js';
import { StoreUnavailableError } from '../store/index.js';
import { CONSOLE_CSS, COPY_JS, LOGO_SVG, PASSKEY_JS } from './assets.js';
import { seeOther, sendHtml, type ConsoleDeps } from './deps.js';
import { LoginLimiter, type LoginLimits } from './login-limiter.js';
import { errorPage } from './pages/errors.js';
import accountRoutes from './routes/account.js';
import apiKeyRoutes from './routes/api-keys.js';
import authRoutes from './routes/auth.js';
import connectionRoutes from './routes/connections.js';
import ipRoutes from './routes/ips.js';
import usageRoutes from './routes/usage.js';
import proxyUserRoutes from './routes/proxy-users.js';
import securityRoutes from './routes/security.js';
import activityRoutes from './routes/activity.js';
import sudoRoutes, { dropStalePending } from './sudo.js';
import whitelistRoutes from './routes/whitelist.js';
import {
  AnonymousSessions,
  clearSessionCookie,
  loadSessionSecret,
  RevealSealer,
  SESSION_COOKIE,
  SESSION_IDLE_MS,
  SESSION_MAX_MS,
  StoreSessionAdapter,
} from './session.js';

export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

interface ConsoleOptions {
  loginLimits?: LoginLimits;
  /** Cookie-signing secret; by default one per data dir in `console-session.key` (mode 0600), or one per fleet in PostgreSQL. */
  sessionSecret?: string;
}

export async function consolePlugin(app: FastifyInstance, ctx: ApiContext, opts: ConsoleOptions = {}): Promise<void> {
  const secret =
    opts.sessionSecret ??
    (await ctx.store.fleetSecret('console_session', randomKey())) ??
    loadSessionSecret(ctx.store.location);
  const sessions = ctx.store.sessions;
  const anonymous = new AnonymousSessions(secret);
  const deps: ConsoleDeps = {
    ctx,
    sessions,
    sealer: new RevealSealer(secret),
    limiter: new LoginLimiter(opts.loginLimits, ctx.nowMs),
    // TOTP secrets at rest are sealed with a key of their own derived from the same secret (docs/decisions.md#d-058).
    secondFactor: new SecondFactorService(ctx.store, new RevealSealer(secret, RevealSealer.TOTP), ctx.nowMs),
  };
  const pruner = setInterval(() => {
    sessions.pruneExpired().catch(() => {
      /* busy or unreachable: next round */
    });
  }, 10 * 60_000);
  pruner.unref();
  app.addHook('onClose', async () => {
    clearInterval(pruner);
    deps.limiter.close();
  });

  await app.register(
    async (scope) => {
      scope.addHook('onSend', async (_request, reply, payload) => {
        reply.header('content-security-policy', CSP);
        reply.header('referrer-policy', 'no-referrer');
        reply.header('x-frame-options', 'DENY');
        reply.header('cross-origin-opener-policy', 'same-origin');
        return payload;
      });
      scope.setErrorHandler(async (err: FastifyError, request, reply) => renderError(err, request, reply));
      scope.setNotFoundHandler(async (request, reply) =>
        sendHtml(
          reply,
          errorPage({
            status: 404,
            title: 'Page not found',
            text: 'There is no console page at this address.',
            signedIn: !!request.session?.accountId,
          }),
          404,
        ),
      );

      // Static files: no session needed (and none loaded or written).
      await scope.register(async (assets) => {
        const asset = (file: string, type: string, body: string) =>
          assets.get(`/assets/${file}`, async (_request, reply) =>
            reply.header('cache-control', 'public, max-age=3600').type(type).send(body),
          );
        asset('console.css', 'text/css; charset=utf-8', CONSOLE_CSS);
        asset('copy.js', 'text/javascript; charset=utf-8', COPY_JS);
        asset('passkey.js', 'text/javascript; charset=utf-8', PASSKEY_JS);
        asset('favicon.svg', 'image/svg+xml', LOGO_SVG);
      });

      await scope.register(async (pages) => {
        await pages.register(fastifyFormbody, { bodyLimit: 64 * 1024 });
        await pages.register(fastifyCookie);
        await pages.register(fastifySession, {
          secret,
          cookieName: SESSION_COOKIE,
          store: new StoreSessionAdapter(sessions, ctx.nowMs, anonymous),
          saveUninitialized: false,
          rolling: true,
          cookie: { path: '/console', httpOnly: true, sameSite: 'strict', secure: false, maxAge: SESSION_IDLE_MS },
        });
        await pages.register(fastifyCsrf, {
          sessionPlugin: '@fastify/session',
          getToken: (req) => (req.body as { _csrf?: string } | undefined)?._csrf,
        });

        // `Secure` whenever the console is reached over TLS (directly or via a trusted proxy).
        pages.addHook('onRequest', async (request) => {
          if (request.protocol === 'https' && request.session?.cookie) request.session.cookie.secure = true;
          // Not logged in: the log-in form's CSRF secret is the one derived from the session id (never stored).
          const session = request.session;
          if (session && session.accountId === undefined && session._csrf === undefined)
            session._csrf = anonymous.csrfSecret(session.sessionId);
        });

        // Every request re-checks the account: suspension or closure ends the session at once.
        pages.addHook('preHandler', async (request, reply) => {
          if (request.routeOptions.config.consolePublic) return;
          const accountId = request.session.accountId;
          if (!accountId) return seeOther(reply, '/console/login');
          const account = await ctx.store.accounts.get(accountId);
          if (!account || account.status !== 'active') {
            await sessions.destroyForAccount(accountId);
            await request.session.destroy();
            clearSessionCookie(request, reply);
            return seeOther(reply, '/console/login?notice=inactive');
          }
          if (ctx.nowMs() - (request.session.loginAtMs ?? 0) > SESSION_MAX_MS) {
            await request.session.destroy();
            clearSessionCookie(request, reply);
            return seeOther(reply, '/console/login?notice=expired');
          }
          // The Sessions card's "last seen" and address (the session is written back on every request anyway).
          request.session.seenAtMs = ctx.nowMs();
          dropStalePending(request, ctx.nowMs());
          request.session.ip = sourceIp(request);
          request.consoleAccount = account;
        });

        // After the body is parsed and the session checked: every form post carries its CSRF token.
        pages.addHook('preHandler', (request, reply, done) => {
          if (request.method !== 'POST') return done();
          pages.csrfProtection(request, reply, done);
        });

        authRoutes(pages, deps);
        accountRoutes(pages, deps);
        apiKeyRoutes(pages, deps);
        whitelistRoutes(pages, deps);
        proxyUserRoutes(pages, deps);
        usageRoutes(pages, deps);
        connectionRoutes(pages, deps);
        ipRoutes(pages, deps);
        securityRoutes(pages, deps);
        sudoRoutes(pages, deps);
        activityRoutes(pages, deps);
      });
    },
    { prefix: '/console' },
  );
}

function renderError(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const signedIn = !!request.session?.accountId;
  if (err.code === 'FST_CSRF_MISSING_SECRET' || err.code === 'FST_CSRF_INVALID_TOKEN') {
    request.log.warn(
      { event: 'console_csrf_refused', route: request.routeOptions.url },
      'form without a valid CSRF token',
    );
    return sendHtml(
      reply,
      errorPage({
        status: 403,
        title: 'This form has expired',
        text: 'For your security the form could not be accepted. Go back, reload the page and try again.',
        signedIn,
      }),
      403,
    );
  }
  if (err instanceof StoreUnavailableError) {
    request.log.warn({ event: 'console_database_unavailable' }, 'database unreachable: console answers 503');
    // No session save on the way out: it would meet the same unreachable database.
    (request as { session: unknown }).session = null;
    return sendHtml(
      reply,
      errorPage({
        status: 503,
        title: 'Temporarily unavailable',
        text: 'Nothing was changed. Try again in a moment.',
        requestId: request.id,
        signedIn,
      }),
      503,
    );
  }
  const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
  if (status < 500) {
    return sendHtml(
      reply,
      errorPage({ status, title: 'The request could not be processed', text: 'Go back and try again.', signedIn }),
      status,
    );
  }
  // The message only: a stack or a request dump could carry form fields.
  request.log.error({ err: { type: err.name, message: err.message } }, 'console error');
  return sendHtml(
    reply,
    errorPage({
      status: 500,
      title: 'Something went wrong',
      text: 'The page could not be shown. Try again in a moment.',
      requestId: request.id,
      signedIn,
    }),
    500,
  );
}
