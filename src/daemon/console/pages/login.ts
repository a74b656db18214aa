import { html } from '../html.js';
import { authShell, csrfField, noticeBox } from '../layout.js';
import type { Flash } from '../session.js';
import { secondFactorFields } from './confirm.js';

interface LoginView {
  csrf: string;
  email?: string;
  /** A problem with the last attempt, or why the session ended. */
  notice?: Flash | undefined;
}

export function loginPage(v: LoginView) {
  const n = v.notice;
  return authShell(
    'Log in',
    html`<section class="card" aria-labelledby="login-title">
<h1 id="login-title">Log in to your account</h1>
<p class="lead">Manage your API token, IP whitelist and proxy users.</p>
${noticeBox(n, 'login-message')}
<form method="post" action="/console/login" novalidate>
${csrfField(v.csrf)}
<div class="field">
<label for="email">Email</label>
<input type="email" id="email" name="email" autocomplete="username" required value="${v.email ?? ''}" ${v.email ? '' : 'autofocus'}>
</div>
<div class="field">
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required ${v.email ? 'autofocus' : ''}>
</div>
<div class="form-actions"><button class="btn block" type="submit">Log in</button></div>
</form>
</section>`,
  );
}

interface SecondStepView {
  csrf: string;
  totp: boolean;
  passkeys: boolean;
  notice?: Flash | undefined;
}

/** After the password, when a second factor is on: a code, a recovery code, or a passkey. */
export function secondStepPage(v: SecondStepView) {
  const n = v.notice;
  return authShell(
    'Two-factor authentication',
    html`<section class="card" aria-labelledby="second-title">
<h1 id="second-title">Two-factor authentication</h1>
<p class="lead">Your password was right. Now confirm it is you with your second factor.</p>
${noticeBox(n, 'login-message')}
<form method="post" action="/console/login/2fa" id="second-step-form" novalidate>
${csrfField(v.csrf)}
${secondFactorFields({ csrf: v.csrf, totp: v.totp, passkeys: v.passkeys, formId: 'second-step-form', optionsUrl: '/console/login/passkey/options', verifyUrl: '/console/login/passkey' })}
<div class="form-actions"><button class="btn block" type="submit">Verify</button></div>
</form>
<p class="muted small"><a href="/console/login">Start again</a></p>
</section>`,
    v.passkeys,
  );
}
