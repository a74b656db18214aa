// Connections page (docs/console.md): the account's own connection-log records, newest first, with their precise
// reasons (the client only ever heard a uniform 407), filters by user, source IP, decision and reason.
import { REASON_TEXT, isLogReason } from '../../services/connection-log.js';
import { formatSize } from '../../../contract/size.js';
import { html, type Html } from '../html.js';
import { shell } from '../layout.js';
import type { Flash } from '../session.js';

export interface ConnectionsFilter {
  user: string;
  ip: string;
  decision: '' | 'admitted' | 'refused';
  reason: string;
}

export interface ConnectionRowView {
  time: string;
  request_id: string;
  protocol: string;
  source_ip: string;
  username: string | null;
  target: string | null;
  decision: 'admitted' | 'refused';
  reason: string | null;
  bytes_up: number;
  bytes_down: number;
  duration_ms: number;
}

interface ConnectionsView {
  csrf: string;
  email: string;
  filter: ConnectionsFilter;
  filterError?: string | undefined;
  rows: ConnectionRowView[];
  limit: number;
  reasons: readonly string[];
  flash?: Flash | undefined;
}

function row(r: ConnectionRowView): Html {
  const refused = r.decision === 'refused';
  return html`<tr data-testid="conn-row" data-request-id="${r.request_id}" data-reason="${r.reason ?? ''}">
<td data-label="Time" class="nowrap"><time datetime="${r.time}">${r.time.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC')}</time></td>
<td data-label="Result"><span class="badge ${refused ? 'off' : 'ok'}" data-testid="conn-decision">${refused ? 'Refused' : 'Admitted'}</span>${
    refused
      ? html`<br><span class="small" data-testid="conn-reason" title="${r.reason ?? ''}">${r.reason !== null && isLogReason(r.reason) ? REASON_TEXT[r.reason] : (r.reason ?? '')}</span> <code class="small">${r.reason ?? ''}</code>`
      : ''
  }</td>
<td data-label="User / source" class="wrap-any"><span data-testid="conn-user">${r.username ?? html`<span class="muted">whitelist</span>`}</span><br><code class="small">${r.source_ip}</code></td>
<td data-label="Target" class="wrap-any"><code>${r.target ?? '—'}</code> <span class="muted small">${r.protocol}</span></td>
<td data-label="Traffic">${refused ? html`<span class="muted">—</span>` : html`↑ ${formatSize(r.bytes_up)} ↓ ${formatSize(r.bytes_down)}<br><span class="muted small">${r.duration_ms} ms</span>`}</td>
<td data-label="Request id" class="nowrap"><code class="small" data-testid="conn-request-id">${r.request_id}</code></td>
</tr>`;
}

export function connectionsPage(v: ConnectionsView) {
  const f = v.filter;
  const filtered = f.user !== '' || f.ip !== '' || f.decision !== '' || f.reason !== '';
  const sel = (a: string, b: string) => (a === b ? html` selected` : '');
  return shell({
    title: 'Connections',
    signedIn: { nav: 'connections', csrf: v.csrf, email: v.email },
    flash: v.flash,
    body: html`<div class="page-head"><h1>Connections</h1><p class="lead">What the gateway decided for your connections, and why: the ${v.limit} most recent records of the last 7 days (filters look through your newest 20,000). Give the request id to support when you ask about one.</p></div>
<section class="card flush" aria-labelledby="list-title">
<div class="card-head"><div><h2 id="list-title">Records</h2><p class="muted small" data-testid="conn-count">${v.rows.length} ${v.rows.length === 1 ? 'record' : 'records'}${filtered ? ' match the filter' : ''}</p></div></div>
<form method="get" action="/console/connections" class="form-row filters" role="search" aria-label="Filter records">
<div class="field"><label for="f-user">Proxy user</label><input type="text" id="f-user" name="user" spellcheck="false" autocomplete="off" value="${f.user}" placeholder="Any"></div>
<div class="field"><label for="f-ip">Source IP</label><input type="text" id="f-ip" name="ip" spellcheck="false" autocomplete="off" value="${f.ip}" placeholder="Any"></div>
<div class="field narrow"><label for="f-decision">Result</label><select id="f-decision" name="decision"><option value=""${sel(f.decision, '')}>All</option><option value="admitted"${sel(f.decision, 'admitted')}>Admitted</option><option value="refused"${sel(f.decision, 'refused')}>Refused</option></select></div>
<div class="field narrow"><label for="f-reason">Reason</label><select id="f-reason" name="reason"><option value=""${sel(f.reason, '')}>Any</option>${v.reasons.map((r) => html`<option value="${r}"${sel(f.reason, r)}>${r}</option>`)}</select></div>
<button class="btn secondary" type="submit">Filter</button>
${filtered ? html`<a class="btn secondary" href="/console/connections">Clear</a>` : ''}
</form>
${
  v.filterError
    ? html`<div class="empty" role="alert" data-testid="conn-filter-error">${v.filterError}</div>`
    : v.rows.length === 0
      ? html`<div class="empty" data-testid="conn-empty">${filtered ? 'No records match this filter.' : 'No connections recorded yet.'}</div>`
      : html`<div class="table-wrap"><table class="stack-sm" data-testid="conn-table">
<caption class="visually-hidden">Connection records, newest first</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Result</th><th scope="col">User / source</th><th scope="col">Target</th><th scope="col">Traffic</th><th scope="col">Request id</th></tr></thead>
<tbody>${v.rows.map(row)}</tbody>
</table></div>`
}
</section>`,
  });
}
