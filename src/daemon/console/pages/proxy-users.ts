import { PROXY_USERNAME_PATTERN, RESERVED_MARKERS_HINT } from '../../../contract/proxy-username.js';
import type { ProxyUser, UserLimits } from '../../store/index.js';
import { formatSizeExact } from '../../../contract/size.js';
import { formatRate } from '../../../contract/rate.js';
import { html, type Html } from '../html.js';
import { csrfField, pager, shell, utc } from '../layout.js';
import type { Flash } from '../session.js';

interface ProxyUsersView {
  csrf: string;
  email: string;
  /** The page of users shown, of `total`. */
  users: ProxyUser[];
  total: number;
  page: number;
  pageSize: number;
  /** Each user's limits inside the account's plan, by username (absent: none). */
  limits: Map<string, UserLimits>;
  /** A password shown once, right after create or reset. */
  revealed: { username: string; password: string } | null;
  username?: string | undefined;
  flash?: Flash | undefined;
  /** The time an expiry is compared with (the daemon's clock). */
  nowMs?: number;
}

function revealCard(r: { username: string; password: string }): Html {
  return html`<section class="card" aria-labelledby="reveal-title" data-testid="proxy-password-card">
<h2 id="reveal-title">Password for <code data-testid="proxy-username">${r.username}</code></h2>
<div class="notice warn" role="status"><p><strong>Copy this password now.</strong> It is shown only once; reset it if you lose it.</p></div>
<label for="proxy-password">Password</label>
<div class="secret">
<code id="proxy-password" data-testid="proxy-password">${r.password}</code>
<button type="button" class="btn secondary" data-copy-target="proxy-password" data-copy-status="copy-status" hidden>Copy</button>
</div>
<p id="copy-status" class="visually-hidden" role="status" aria-live="polite"></p>
<p class="muted small">Use it with HTTP proxy Basic authentication or SOCKS5 username/password authentication.</p>
<div class="form-actions"><a class="btn" href="/console/proxy-users">I have copied it</a></div>
</section>`;
}

function limitsForm(u: ProxyUser, l: UserLimits | undefined, csrf: string): Html {
  // Exact (a rounded figure saved back unchanged would move the limit by a few bytes).
  const size = l?.trafficLimit != null ? formatSizeExact(l.trafficLimit) : '';
  // Each field says what it takes under it: the formats are not only in the aria-labels.
  return html`<form method="post" action="/console/proxy-users/${u.id}/limits" class="limits" data-testid="limits-form">${csrfField(csrf)}
<label>Traffic limit <input type="text" name="traffic_limit" value="${size}" placeholder="no limit" size="8" autocomplete="off" spellcheck="false" aria-label="Traffic limit of ${u.username} (for example 50GiB)"><span class="fmt" data-testid="limit-format">a size: 500MB, 50GiB</span></label>
<label>Max connections <input type="text" name="max_connections" inputmode="numeric" value="${l?.maxConnections != null ? String(l.maxConnections) : ''}" placeholder="no limit" size="5" autocomplete="off" aria-label="Max connections of ${u.username}"><span class="fmt" data-testid="limit-format">a number: 20</span></label>
<label>Rate limit <input type="text" name="rate_limit" value="${l?.rateLimit != null ? formatRate(l.rateLimit) : ''}" placeholder="no limit" size="8" autocomplete="off" spellcheck="false" aria-label="Rate limit of ${u.username} (for example 10mbit)"><span class="fmt" data-testid="limit-format">each way: 500kbit, 10mbit, 1gbit</span></label>
<button class="btn secondary sm" type="submit">Save limits</button>
</form>`;
}

/** The user's own expiry and target rules (set through the API: docs/api.md, "Proxy users"), read-only here. */
function policy(u: ProxyUser, l: UserLimits | undefined, nowMs: number): Html {
  const expires = l?.expiresAt ?? null;
  const expired = expires !== null && nowMs >= expires;
  const list = (items: string[] | undefined, none: string) =>
    items?.length ? html`<code class="wrap-any">${items.join(', ')}</code>` : html`<span class="muted">${none}</span>`;
  return html`<dl class="user-policy small" data-testid="user-policy" aria-label="Expiry and target rules of ${u.username}">
<div><dt>Expires</dt><dd data-testid="user-expires">${expires === null ? html`<span class="muted">never</span>` : html`<time datetime="${new Date(expires).toISOString()}">${utc(Math.floor(expires / 1000))}</time>${expired ? html` <span class="badge off" data-testid="user-expired">Expired</span>` : ''}`}</dd></div>
<div><dt>Allow</dt><dd data-testid="user-allow">${list(l?.allow, 'any target the account allows')}</dd></div>
<div><dt>Deny</dt><dd data-testid="user-deny">${list(l?.deny, 'none of its own')}</dd></div>
</dl>`;
}

function row(u: ProxyUser, l: UserLimits | undefined, csrf: string, nowMs: number): Html {
  return html`<tr data-testid="proxy-user-row" data-username="${u.username}">
<td data-label="Username" class="wrap-any"><code>${u.username}</code></td>
<td data-label="Status"><span class="badge ${u.status === 'active' ? 'ok' : 'off'}">${u.status === 'active' ? 'Active' : 'Disabled'}</span></td>
<td data-label="Created">${utc(u.created_at)}</td>
<td data-label="Limits">${limitsForm(u, l, csrf)}${policy(u, l, nowMs)}</td>
<td class="actions">
<form method="post" action="/console/proxy-users/${u.id}/reset">${csrfField(csrf)}<button class="btn secondary sm" type="submit" aria-label="Reset password of ${u.username}">Reset password</button></form>
<form method="post" action="/console/proxy-users/${u.id}/delete">${csrfField(csrf)}<button class="btn ghost-danger sm" type="submit" aria-label="Delete ${u.username}">Delete</button></form>
</td>
</tr>`;
}

export function proxyUsersPage(v: ProxyUsersView) {
  return shell({
    title: 'Proxy users',
    signedIn: { nav: 'proxy-users', csrf: v.csrf, email: v.email },
    flash: v.flash,
    copyScript: !!v.revealed,
    body: html`<div class="page-head"><h1>Proxy users</h1><p class="lead">Usernames and passwords for the gateway, for machines whose IP is not whitelisted.</p></div>
<div class="stack">
${v.revealed ? revealCard(v.revealed) : ''}
<section class="card" aria-labelledby="create-title">
<div class="card-head"><div><h2 id="create-title">Create a proxy user</h2><p class="muted small">The password is generated for you and shown once.</p></div></div>
<form method="post" action="/console/proxy-users" class="form-row">
${csrfField(v.csrf)}
<div class="field"><label for="username">Username</label><input type="text" id="username" name="username" required minlength="3" maxlength="64" pattern="${PROXY_USERNAME_PATTERN}" autocomplete="off" spellcheck="false" aria-describedby="username-hint" value="${v.username ?? ''}"></div>
<button class="btn" type="submit">Create</button>
</form>
<p class="hint" id="username-hint" data-testid="username-hint">3–64 characters: letters, digits, dot, underscore, hyphen. ${RESERVED_MARKERS_HINT}.</p>
</section>
<section class="card flush" aria-labelledby="users-title">
<div class="card-head"><div><h2 id="users-title">Your proxy users</h2><p class="muted small">${v.total} ${v.total === 1 ? 'user' : 'users'}</p></div></div>
${
  v.users.length === 0
    ? html`<div class="empty" data-testid="proxy-users-empty">No proxy users yet.</div>`
    : html`<div class="table-wrap"><table class="stack-sm" data-testid="proxy-users-table">
<caption class="visually-hidden">Proxy users</caption>
<thead><tr><th scope="col">Username</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Limits <span class="muted small">(in the account's period; empty: no limit; expiry and target rules are set with the API)</span></th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${v.users.map((u) => row(u, v.limits.get(u.username), v.csrf, v.nowMs ?? Date.now()))}</tbody>
</table></div>`
}
${pager(v.page, v.pageSize, v.total, (page) => `/console/proxy-users${page > 1 ? `?page=${page}` : ''}`)}
</section>
</div>`,
  });
}
