// The Account page's "API keys" card (docs/console.md): the keys with a revoke button each, the form that makes one
// (name, scopes, expiry, allowed sources), the key shown once; and the revocation's confirmation page.
import { MAX_KEYS_PER_ACCOUNT, MAX_KEY_NAME, SCOPES, type Scope } from '../../../contract/scopes.js';
import type { ApiKeyJson } from '../../services/api-keys.js';
import { html, type Html } from '../html.js';
import { csrfField, shell } from '../layout.js';

/** What each scope opens, as the card says it. */
const SCOPE_TEXT: Record<Scope, string> = {
  'usage:read': 'read usage (summary, series, domains)',
  'users:read': 'list and show proxy users',
  'users:write': 'create, change, rotate and delete proxy users',
  'rules:read': 'read target rules',
  'rules:write': 'change target rules',
  'audit:read': 'read the audit log',
};

/** A scope's checkbox field name (`scope_usage_read`): one field per box, so a plain form post carries them all. */
export const scopeField = (s: Scope): string => `scope_${s.replace(':', '_')}`;

const when = (iso: string | null) => (iso === null ? '—' : iso.replace('T', ' ').replace(/Z$/, ' UTC'));

export interface ApiKeysView {
  csrf: string;
  keys: ApiKeyJson[];
  /** The whole key, only on the response right after it was made. */
  revealed: { id: string; key: string } | null;
}

function keyRow(k: ApiKeyJson): Html {
  return html`<tr data-testid="api-key-row-${k.id}" data-key-id="${k.id}">
<td data-label="Name" class="wrap-any">${k.name}<br><code class="small muted">pxk_${k.id}_…</code></td>
<td data-label="Scopes" class="small">${k.scopes.map((s, i) => html`${i ? ', ' : ''}<code>${s}</code>`)}</td>
<td data-label="Created" class="small">${when(k.created_at)}</td>
<td data-label="Expires" class="small">${k.state === 'expired' ? html`<span class="badge bad">Expired</span> ` : ''}${k.expires_at === null ? 'never' : when(k.expires_at)}</td>
<td data-label="Sources" class="small wrap-any">${k.allowed_ips.length ? k.allowed_ips.join(', ') : 'anywhere'}</td>
<td data-label="Last used" class="small">${k.last_used_at === null ? 'never' : html`${when(k.last_used_at)}<br><span class="muted">${k.last_used_ip ?? ''}</span>`}</td>
<td class="actions"><form method="get" action="/console/api-keys/${k.id}/revoke"><button class="btn ghost-danger sm" type="submit" data-testid="api-key-revoke-${k.id}" aria-label="Revoke key ${k.name}">Revoke</button></form></td>
</tr>`;
}

export function apiKeysCard(v: ApiKeysView): Html {
  const live = v.keys.filter((k) => k.state !== 'revoked');
  const reveal = v.revealed
    ? html`<div class="notice warn" role="status"><p><strong>Copy your API key now.</strong> It is shown only this once; leaving or reloading this page hides it for good. Send it as <code>Authorization: Bearer …</code>.</p></div>
<label for="api-key-value">Your new API key</label>
<div class="secret"><code id="api-key-value" data-testid="api-key-value">${v.revealed.key}</code>
<button type="button" class="btn secondary" data-copy-target="api-key-value" data-copy-status="api-key-copy-status" hidden>Copy</button></div>
<p id="api-key-copy-status" class="visually-hidden" role="status" aria-live="polite"></p>`
    : '';
  const table = live.length
    ? html`<div class="table-wrap"><table class="stack-sm" data-testid="api-keys-table">
<caption class="visually-hidden">API keys</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Works from</th><th scope="col">Last used</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${live.map(keyRow)}</tbody>
</table></div>`
    : html`<p data-testid="api-keys-empty">You have no API keys yet.</p>`;
  return html`<section class="card" id="api-keys" aria-labelledby="keys-title" data-testid="api-keys-card">
<div class="card-head"><div><h2 id="keys-title">API keys</h2><p class="muted">For every API endpoint but the whitelist (which takes the API token): usage, proxy users, target rules, the audit log. Each key holds only the scopes you tick, and is shown once. At most ${MAX_KEYS_PER_ACCOUNT}.</p></div></div>
${reveal}
${table}
<form method="post" action="/console/api-keys" data-testid="api-key-form">
${csrfField(v.csrf)}
<h3>Make a key</h3>
<div class="field"><label for="api_key_name">Name</label><input type="text" id="api_key_name" name="name" required maxlength="${MAX_KEY_NAME}" autocomplete="off" placeholder="reporting script" aria-describedby="api_key_name_hint"><span class="hint" id="api_key_name_hint">1–${MAX_KEY_NAME} characters, for you.</span></div>
<fieldset class="field"><legend>Scopes</legend>
${SCOPES.map((s) => html`<label class="check"><input type="checkbox" name="${scopeField(s)}" value="1" data-testid="api-key-scope-${s}"> <code>${s}</code> <span class="muted small">${SCOPE_TEXT[s]}</span></label>`)}
</fieldset>
<div class="grid-2">
<div class="field"><label for="api_key_expires">Expires (optional, UTC)</label><input type="date" id="api_key_expires" name="expires" aria-describedby="api_key_expires_hint"><span class="hint" id="api_key_expires_hint">The key stops working at the start of that day, UTC. Empty: never.</span></div>
<div class="field"><label for="api_key_ips">Works only from (optional)</label><input type="text" id="api_key_ips" name="allowed_ips" autocomplete="off" spellcheck="false" placeholder="203.0.113.7, 10.0.0.0/8" aria-describedby="api_key_ips_hint"><span class="hint" id="api_key_ips_hint">IPv4/IPv6 addresses and networks, comma-separated. Empty: anywhere.</span></div>
</div>
<div class="form-actions"><button class="btn secondary" type="submit">Make key</button><span class="muted small">Asks for your password again when your last sign-in is older than 10 minutes.</span></div>
</form>
</section>`;
}

export function revokeKeyPage(v: { csrf: string; email: string; key: ApiKeyJson }) {
  return shell({
    title: 'Revoke API key',
    signedIn: { nav: 'account', csrf: v.csrf, email: v.email },
    body: html`<div class="page-head"><h1>Revoke the API key “${v.key.name}”?</h1></div>
<section class="card" aria-labelledby="confirm-title" data-testid="api-key-revoke-confirm">
<h2 id="confirm-title" class="visually-hidden">Confirm</h2>
<div class="notice warn"><p><strong>The key stops working at once</strong>, on every server: scripts using <code>pxk_${v.key.id}_…</code> get 401 from then on. This cannot be undone.</p></div>
<form method="post" action="/console/api-keys/${v.key.id}/revoke" class="form-actions">
${csrfField(v.csrf)}
<button class="btn danger" type="submit" data-testid="api-key-revoke-confirm-button">Confirm and revoke</button>
<a class="btn secondary" href="/console/account#api-keys">Cancel</a>
</form>
</section>`,
  });
}
