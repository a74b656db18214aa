import { html } from '../html.js';
import { authShell } from '../layout.js';

export function errorPage(o: { status: number; title: string; text: string; requestId?: string; signedIn: boolean }) {
  return authShell(
    o.title,
    html`<section class="card" aria-labelledby="err-title" data-testid="error-page">
<p class="muted small">Error ${o.status}</p>
<h1 id="err-title">${o.title}</h1>
<p class="lead">${o.text}</p>
${o.requestId ? html`<p class="muted small">Reference: <code>${o.requestId}</code></p>` : ''}
<div class="form-actions"><a class="btn" href="${o.signedIn ? '/console/account' : '/console/login'}">${o.signedIn ? 'Back to your account' : 'Go to log in'}</a></div>
</section>`,
  );
}
