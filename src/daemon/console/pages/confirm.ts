// The re-authentication page before a sensitive action: the password (when the last entry is older than 10 min),
// then a second factor (when on): a code, a recovery code, or a passkey. Then the action waiting is carried out.
import { html, type Html } from '../html.js';
import { csrfField, noticeBox, shell } from '../layout.js';
import type { Flash } from '../session.js';

interface ConfirmView {
  csrf: string;
  email: string;
  label: string;
  askPassword: boolean;
  askSecondFactor: boolean;
  totp: boolean;
  passkeys: boolean;
  notice?: Flash | undefined;
}

/** The second step's inputs (log-in and confirmation alike): a code field, and a passkey button that completes `formId`. */
export function secondFactorFields(o: {
  csrf: string;
  totp: boolean;
  passkeys: boolean;
  formId: string;
  optionsUrl: string;
  verifyUrl: string;
}): Html {
  return html`<div class="field"><label for="code">${o.totp ? 'Code from your authenticator app, or a recovery code' : 'A recovery code'}</label>
<input type="text" id="code" name="code" inputmode="${o.totp ? 'numeric' : 'text'}" autocomplete="one-time-code" spellcheck="false" autofocus aria-describedby="code_hint" data-testid="second-factor-code">
<span class="hint" id="code_hint">${o.totp ? 'Six digits from your app. Lost your phone? Use one of your recovery codes.' : 'Each recovery code works once.'}</span></div>
${
  o.passkeys
    ? html`<div class="form-actions"><button type="button" class="btn secondary" hidden data-passkey="login" data-csrf="${o.csrf}" data-options-url="${o.optionsUrl}" data-verify-url="${o.verifyUrl}" data-form="${o.formId}" data-status="passkey-status" data-testid="use-passkey">Use a passkey</button></div>
<p id="passkey-status" class="muted small" role="status" aria-live="polite" hidden></p>`
    : ''
}`;
}

export function confirmPage(v: ConfirmView) {
  const n = v.notice;
  return shell({
    title: 'Confirm it is you',
    signedIn: { nav: 'account', csrf: v.csrf, email: v.email },
    passkeyScript: v.askSecondFactor && v.passkeys,
    body: html`<div class="page-head"><h1>Confirm it is you</h1><p class="lead">${v.label} is a sensitive action: enter your ${v.askPassword ? 'password' : 'second factor'} again to continue.</p></div>
<section class="card" aria-labelledby="confirm-title">
<h2 id="confirm-title" class="visually-hidden">Confirm</h2>
${noticeBox(n, 'confirm-message')}
<form method="post" action="/console/confirm" id="confirm-form" data-testid="confirm-form">
${csrfField(v.csrf)}
<input type="text" name="username" autocomplete="username" value="${v.email}" hidden>
${
  v.askPassword
    ? html`<div class="field"><label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password" required autofocus></div>`
    : v.askSecondFactor
      ? secondFactorFields({
          csrf: v.csrf,
          totp: v.totp,
          passkeys: v.passkeys,
          formId: 'confirm-form',
          optionsUrl: '/console/confirm/passkey/options',
          verifyUrl: '/console/confirm/passkey',
        })
      : ''
}
<div class="form-actions"><button class="btn" type="submit">Confirm</button></div>
</form>
<form method="post" action="/console/confirm/cancel" class="form-actions">${csrfField(v.csrf)}<button class="btn secondary" type="submit">Cancel</button></form>
<p class="muted small">You are asked again when your last sign-in is more than 10 minutes old.</p>
</section>`,
  });
}
