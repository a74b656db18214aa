import { MIN_PASSWORD_CHARS } from '../../../contract/password.js';
import { html, raw, type Html } from '../html.js';
import { csrfField, shell, utc } from '../layout.js';
import type { Flash } from '../session.js';
import { apiKeysCard, type ApiKeysView } from './api-keys.js';

/** A live console session as the Sessions card lists it. */
export interface SessionRow {
  handle: string;
  current: boolean;
  createdAtMs: number | null;
  seenAtMs: number | null;
  ip: string | null;
  browser: string;
}

/** The second factor and sessions, as the Account page shows them. */
export interface SecurityView {
  on: boolean;
  totpSinceMs: number | null;
  recoveryCodesLeft: number;
  passkeys: Array<{ id: number; name: string; createdAtMs: number; lastUsedAtMs: number | null }>;
  lockedUntilMs: number;
  /** A TOTP set-up open in this browser: the secret, its QR code (an SVG made here) and the nonce its form carries. */
  enrollment: { secret: string; uri: string; svg: string; nonce: string } | null;
  /** Recovery codes, only on the response right after they were made. */
  recoveryCodes: string[] | null;
  sessions: SessionRow[];
}

interface AccountView {
  csrf: string;
  email: string;
  status: string;
  verified: boolean;
  createdAtSec: number;
  token: { accessKey: string; createdAtSec: number } | null;
  /** The full token, only on the response right after it was made. */
  revealedToken: string | null;
  webhook: { url: string; thresholds: number[] } | null;
  /** The webhook's signing secret, only on the response right after it was set. */
  revealedWebhookSecret: string | null;
  sessionCount: number;
  /** The account's target rules, canonical items. */
  rules: { deny: string[]; allow: string[] };
  security: SecurityView;
  /** The API keys card (its csrf is the page's). */
  apiKeys: ApiKeysView;
  flash?: Flash | undefined;
}

const msUtc = (ms: number | null) => (ms === null ? '—' : utc(Math.floor(ms / 1000)));

function twoFactorCard(v: AccountView): Html {
  const s = v.security;
  const codes = s.recoveryCodes
    ? html`<div class="notice warn" role="status"><p><strong>Save your recovery codes now.</strong> They are shown only this once. Each works once, in place of a code from your app, if you lose your phone.</p></div>
<ol class="codes" id="recovery-codes" data-testid="recovery-codes">${s.recoveryCodes.map((c) => html`<li><code>${c}</code></li>`)}</ol>
<button type="button" class="btn secondary" data-copy-target="recovery-codes" data-copy-status="codes-copy-status" hidden>Copy</button>
<p id="codes-copy-status" class="visually-hidden" role="status" aria-live="polite"></p>`
    : '';
  const enroll = s.enrollment
    ? html`<div data-testid="totp-enrollment">
<p>Scan this code with your authenticator app (or enter the secret by hand), then type the 6-digit code it shows.</p>
<div class="qr" data-testid="totp-qr" role="img" aria-label="QR code of the authenticator secret">${raw(s.enrollment.svg)}</div>
<p class="muted small">Secret: <code data-testid="totp-secret">${s.enrollment.secret.match(/.{1,4}/g)!.join(' ')}</code></p>
<form method="post" action="/console/2fa/totp/enable">
${csrfField(v.csrf)}
<input type="hidden" name="enroll" value="${s.enrollment.nonce}">
<div class="field"><label for="totp_code">Code from your app</label><input type="text" id="totp_code" name="code" inputmode="numeric" autocomplete="one-time-code" required data-testid="totp-code"></div>
<div class="form-actions"><button class="btn" type="submit">Turn on</button></div>
</form>
<form method="post" action="/console/2fa/totp/cancel" class="form-actions">${csrfField(v.csrf)}<button class="btn secondary" type="submit">Cancel</button></form>
</div>`
    : '';
  const totp =
    s.totpSinceMs !== null
      ? html`<p data-testid="totp-status"><span class="badge ok">On</span> Authenticator app, since ${msUtc(s.totpSinceMs)}.</p>`
      : s.enrollment
        ? enroll
        : html`<form method="post" action="/console/2fa/totp/start" class="form-actions">${csrfField(v.csrf)}<button class="btn secondary" type="submit">Set up an authenticator app</button></form>`;
  const passkeys = html`<h3>Passkeys</h3>
${
  s.passkeys.length
    ? html`<ul class="plain" data-testid="passkeys">${s.passkeys.map(
        (
          p,
        ) => html`<li data-testid="passkey-row-${p.id}">${p.name} <span class="muted small">added ${msUtc(p.createdAtMs)}${p.lastUsedAtMs ? html`, last used ${msUtc(p.lastUsedAtMs)}` : ''}</span>
<form method="post" action="/console/2fa/passkey/${p.id}/remove" class="inline">${csrfField(v.csrf)}<button class="btn ghost-danger sm" type="submit">Remove</button></form></li>`,
      )}</ul>`
    : html`<p class="muted small">No passkey yet. A passkey (your device's screen lock or a security key) can be your second factor instead of codes.</p>`
}
<div class="field"><label for="passkey_name">Name of the new passkey</label><input type="text" id="passkey_name" maxlength="64" placeholder="Laptop"></div>
<div class="form-actions"><button type="button" class="btn secondary" hidden data-passkey="register" data-csrf="${v.csrf}" data-options-url="/console/2fa/passkey/options" data-verify-url="/console/2fa/passkey/register" data-name="passkey_name" data-status="passkey-status" data-testid="add-passkey">Add a passkey</button></div>
<p id="passkey-status" class="muted small" role="status" aria-live="polite" hidden></p>
<noscript><p class="muted small">Adding a passkey needs JavaScript.</p></noscript>`;
  return html`<section class="card" id="two-factor" aria-labelledby="tfa-title" data-testid="two-factor-card">
<div class="card-head"><div><h2 id="tfa-title">Two-factor authentication</h2><p class="muted">After your password, signing in asks for a code from an authenticator app, a recovery code, or a passkey.</p></div>
<span class="badge ${s.on ? 'ok' : 'warn'}" data-testid="two-factor-state">${s.on ? 'On' : 'Off'}</span></div>
${s.lockedUntilMs ? html`<div class="notice error" role="status"><p>Too many wrong codes: the second step is locked until ${msUtc(s.lockedUntilMs)}.</p></div>` : ''}
${codes}
<h3>Authenticator app</h3>
${totp}
${passkeys}
${
  s.on
    ? html`<h3>Recovery codes</h3><p class="muted small"><span data-testid="recovery-codes-left">${s.recoveryCodesLeft}</span> unused.</p>
<form method="post" action="/console/2fa/recovery-codes" class="form-actions">${csrfField(v.csrf)}<button class="btn secondary" type="submit">Make new recovery codes</button></form>
<form method="post" action="/console/2fa/disable" class="form-actions">${csrfField(v.csrf)}<button class="btn ghost-danger" type="submit">Turn off two-factor authentication</button><span class="muted small">Asks for a second factor first.</span></form>`
    : ''
}
</section>`;
}

function sessionsCard(v: AccountView): Html {
  return html`<section class="card" id="sessions" aria-labelledby="sess-title" data-testid="sessions-card">
<div class="card-head"><div><h2 id="sess-title">Sessions</h2><p class="muted small">You are signed in on <span data-testid="session-count">${v.sessionCount}</span> ${v.sessionCount === 1 ? 'browser' : 'browsers'}. Signing one out ends it at once, on every server.</p></div></div>
<div class="table-wrap"><table class="stack-sm" data-testid="sessions-table">
<thead><tr><th scope="col">Browser</th><th scope="col">Source IP</th><th scope="col">Signed in</th><th scope="col">Last seen</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>${v.security.sessions.map(
    (
      s,
    ) => html`<tr data-testid="session-row-${s.handle}"${s.current ? raw(' data-current="true"') : ''}><td data-label="Browser">${s.browser}${s.current ? html` <span class="badge ok">This browser</span>` : ''}</td><td data-label="Source IP"><code>${s.ip ?? '—'}</code></td><td data-label="Signed in">${msUtc(s.createdAtMs)}</td><td data-label="Last seen">${msUtc(s.seenAtMs)}</td>
<td class="actions">${s.current ? '' : html`<form method="post" action="/console/sessions/${s.handle}/end" class="inline">${csrfField(v.csrf)}<button class="btn ghost-danger sm" type="submit">Sign out</button></form>`}</td></tr>`,
  )}</tbody></table></div>
<div class="form-actions">
<form method="post" action="/console/sessions/end-others" class="inline">${csrfField(v.csrf)}<button class="btn secondary" type="submit">Sign out everywhere else</button></form>
<form method="post" action="/console/sessions/end-all" class="inline">${csrfField(v.csrf)}<button class="btn ghost-danger" type="submit">Log out everywhere</button></form>
</div>
</section>`;
}

const statusBadge = (s: string) =>
  html`<span class="badge ${s === 'active' ? 'ok' : 'bad'}" data-testid="account-status">${s[0]!.toUpperCase() + s.slice(1)}</span>`;

function tokenCard(v: AccountView): Html {
  if (v.revealedToken) {
    return html`<section class="card" aria-labelledby="token-title" data-testid="token-card">
<div class="card-head"><div><h2 id="token-title">API token</h2><p class="muted">Use it as <code>api_key</code> with the whitelist API or store it with <code>proxyctl login</code>.</p></div></div>
<div class="notice warn" role="status"><p><strong>Copy your token now.</strong> It is shown only this once; leaving or reloading this page hides it for good.</p></div>
<label for="api-token">Your new API token</label>
<div class="secret">
<code id="api-token" data-testid="api-token">${v.revealedToken}</code>
<button type="button" class="btn secondary" data-copy-target="api-token" data-copy-status="copy-status" hidden>Copy</button>
</div>
<p id="copy-status" class="visually-hidden" role="status" aria-live="polite"></p>
<div class="form-actions"><a class="btn" href="/console/account">I have copied it</a></div>
</section>`;
  }
  if (v.token) {
    return html`<section class="card" aria-labelledby="token-title" data-testid="token-card">
<div class="card-head"><div><h2 id="token-title">API token</h2><p class="muted">For the whitelist API and <code>proxyctl</code>. The secret part is shown only once, when the token is made.</p></div></div>
<dl class="facts">
<dt>Access key</dt><dd><code data-testid="access-key">${v.token.accessKey}</code></dd>
<dt>Created</dt><dd>${utc(v.token.createdAtSec)}</dd>
</dl>
<form method="get" action="/console/token/confirm" class="form-actions">
<button class="btn secondary" type="submit">Reset token</button>
<span class="muted small">Lost the secret? Reset makes a new token; the current one stops working at once.</span>
</form>
</section>`;
  }
  return html`<section class="card" aria-labelledby="token-title" data-testid="token-card">
<div class="card-head"><div><h2 id="token-title">API token</h2><p class="muted">For the whitelist API and <code>proxyctl</code>.</p></div></div>
<p data-testid="no-token">You have no API token yet.</p>
<form method="get" action="/console/token/confirm" class="form-actions">
<button class="btn" type="submit">Create token</button>
</form>
</section>`;
}

function webhookCard(v: AccountView): Html {
  return html`<section class="card" aria-labelledby="webhook-title" data-testid="webhook-card">
<div class="card-head"><div><h2 id="webhook-title">Usage webhook</h2><p class="muted">We POST a signed JSON event to your HTTPS URL when your traffic passes a share of your plan's limit, and when your plan expires.</p></div></div>
${
  v.revealedWebhookSecret
    ? html`<div class="notice warn" role="status"><p><strong>Copy the signing secret now.</strong> It is shown only this once. Check each request's <code>Proxyd-Signature</code> with it.</p></div>
<div class="secret"><code id="webhook-secret" data-testid="webhook-secret">${v.revealedWebhookSecret}</code>
<button type="button" class="btn secondary" data-copy-target="webhook-secret" data-copy-status="webhook-copy-status" hidden>Copy</button></div>
<p id="webhook-copy-status" class="visually-hidden" role="status" aria-live="polite"></p>`
    : ''
}
${v.webhook ? html`<dl class="facts"><dt>URL</dt><dd><code data-testid="webhook-url">${v.webhook.url}</code></dd><dt>Thresholds</dt><dd data-testid="webhook-thresholds">${v.webhook.thresholds.map((t) => `${t} %`).join(', ')}</dd></dl>` : ''}
<form method="post" action="/console/webhook">
${csrfField(v.csrf)}
<div class="field"><label for="webhook_url">HTTPS URL</label><input type="url" id="webhook_url" name="url" required value="${v.webhook?.url ?? ''}" placeholder="https://example.com/proxyd-events"></div>
<div class="field"><label for="webhook_thresholds">Thresholds (% of the plan's traffic limit)</label><input type="text" id="webhook_thresholds" name="thresholds" value="${(v.webhook?.thresholds ?? [80, 100]).join(',')}" inputmode="numeric" aria-describedby="webhook_thresholds_hint"><span class="hint" id="webhook_thresholds_hint">Whole percentages, comma-separated. Saving makes a new signing secret.</span></div>
<div class="form-actions"><button class="btn secondary" type="submit">Save webhook</button></div>
</form>
<div class="signing" data-testid="webhook-signing">
<h3>Checking a request</h3>
<p class="small">Each request carries <code>Proxyd-Signature: t=UNIX,v1=HEX</code>, where <code>HEX</code> is the HMAC-SHA256, in lower-case hex, of <code>t</code>, a dot and the raw request body, keyed with your whole signing secret, <code>whsec_</code> prefix included:</p>
<pre class="small"><code>HEX = hex(HMAC-SHA256(key = "whsec_…", message = t + "." + body))</code></pre>
<p class="small muted">Compare in constant time and refuse a <code>t</code> more than 5 minutes old. A retry carries the same <code>Proxyd-Event-Id</code> and body: use the id to drop duplicates.</p>
</div>
${
  v.webhook
    ? html`<form method="post" action="/console/webhook/remove" class="form-actions">${csrfField(v.csrf)}<button class="btn ghost-danger" type="submit">Remove webhook</button></form>`
    : ''
}
</section>`;
}

/** The account's target rules (docs/gateway.md, "Target rules"): one item per line, both lists saved at once. */
function rulesCard(v: AccountView): Html {
  return html`<section class="card" aria-labelledby="rules-title" data-testid="rules-card">
<div class="card-head"><div><h2 id="rules-title">Target rules</h2><p class="muted">Which targets your proxy users and whitelisted IPs may reach through the gateway. One item per line (or separated by commas): a domain (<code>example.com</code>: it and its subdomains; <code>*.example.com</code>: subdomains only) or a network (<code>10.0.0.0/8</code>, <code>2001:db8::/32</code>, a single address).</p></div></div>
<form method="post" action="/console/target-rules">
${csrfField(v.csrf)}
<div class="grid-2">
<div class="field"><label for="rules_deny">Denied targets</label><textarea id="rules_deny" name="deny" rows="6" spellcheck="false" aria-describedby="rules_deny_hint" data-testid="rules-deny">${v.rules.deny.join('\n')}</textarea><span class="hint" id="rules_deny_hint">Always refused.</span></div>
<div class="field"><label for="rules_allow">Allowed targets only</label><textarea id="rules_allow" name="allow" rows="6" spellcheck="false" aria-describedby="rules_allow_hint" data-testid="rules-allow">${v.rules.allow.join('\n')}</textarea><span class="hint" id="rules_allow_hint">Empty: every target not denied. Otherwise only these.</span></div>
</div>
<div class="form-actions"><button class="btn secondary" type="submit">Save target rules</button><span class="muted small">Every gateway applies them to new connections within a second.</span></div>
</form>
</section>`;
}

export function accountPage(v: AccountView) {
  return shell({
    title: 'Account',
    signedIn: { nav: 'account', csrf: v.csrf, email: v.email },
    flash: v.flash,
    copyScript: !!v.revealedToken || !!v.revealedWebhookSecret || !!v.security.recoveryCodes || !!v.apiKeys.revealed,
    passkeyScript: true,
    body: html`<div class="page-head"><h1>Account</h1><p class="lead">Your account details, API token and keys, and sign-in security.</p></div>
<div class="stack">
<section class="card" aria-labelledby="acct-title">
<h2 id="acct-title" class="visually-hidden">Account details</h2>
<dl class="facts">
<dt>Email</dt><dd data-testid="account-email">${v.email}</dd>
<dt>Status</dt><dd>${statusBadge(v.status)}</dd>
<dt>Real-name verification</dt><dd>${
      v.verified
        ? html`<span class="badge ok" data-testid="account-verified">Verified</span>`
        : html`<span class="badge warn" data-testid="account-verified">Not verified</span> <span class="muted small">Adding whitelist IPs needs a verified account; contact support.</span>`
    }</dd>
<dt>Customer since</dt><dd>${utc(v.createdAtSec).slice(0, 10)}</dd>
</dl>
</section>
${tokenCard(v)}
${apiKeysCard({ ...v.apiKeys, csrf: v.csrf })}
${twoFactorCard(v)}
${webhookCard(v)}
${rulesCard(v)}
<div class="grid-2">
<section class="card" aria-labelledby="pw-title">
<h2 id="pw-title">Change password</h2>
<p class="muted small">Every other signed-in browser is logged out.</p>
<form method="post" action="/console/password">
${csrfField(v.csrf)}
<input type="text" name="username" autocomplete="username" value="${v.email}" hidden>
<div class="field"><label for="current_password">Current password</label><input type="password" id="current_password" name="current_password" autocomplete="current-password" required></div>
<div class="field"><label for="new_password">New password</label><input type="password" id="new_password" name="new_password" autocomplete="new-password" minlength="${MIN_PASSWORD_CHARS}" required aria-describedby="new_password_hint"><span class="hint" id="new_password_hint">At least ${MIN_PASSWORD_CHARS} characters.</span></div>
<div class="form-actions"><button class="btn secondary" type="submit">Change password</button></div>
</form>
</section>
<section class="card" aria-labelledby="email-title">
<h2 id="email-title">Change email</h2>
<p class="muted small">The email you sign in with. Asks for your password again when your last sign-in is older than 10 minutes.</p>
<form method="post" action="/console/email">
${csrfField(v.csrf)}
<div class="field"><label for="new_email">New email</label><input type="email" id="new_email" name="email" autocomplete="email" required maxlength="320"></div>
<div class="form-actions"><button class="btn secondary" type="submit">Change email</button></div>
</form>
</section>
</div>
${sessionsCard(v)}
</div>`,
  });
}

interface TokenConfirmView {
  csrf: string;
  email: string;
  existingAccessKey: string | null;
}

export function tokenConfirmPage(v: TokenConfirmView) {
  const reset = v.existingAccessKey !== null;
  return shell({
    title: reset ? 'Reset API token' : 'Create API token',
    signedIn: { nav: 'account', csrf: v.csrf, email: v.email },
    body: html`<div class="page-head"><h1>${reset ? 'Reset your API token?' : 'Create an API token?'}</h1></div>
<section class="card" aria-labelledby="confirm-title">
<h2 id="confirm-title" class="visually-hidden">Confirm</h2>
${
  reset
    ? html`<div class="notice warn"><p><strong>The current token stops working at once.</strong> Scripts and <code>proxyctl</code> using access key <code>${v.existingAccessKey}</code> get 401 until you give them the new token.</p></div>`
    : html`<p>A new token lets scripts and <code>proxyctl</code> manage your whitelist.</p>`
}
<p class="muted">The full token is shown once on the next page. Keep it somewhere safe, such as a password manager.</p>
<form method="post" action="/console/token" class="form-actions">
${csrfField(v.csrf)}
<button class="btn${reset ? ' danger' : ''}" type="submit">Confirm</button>
<a class="btn secondary" href="/console/account">Cancel</a>
</form>
</section>`,
  });
}
