// Activity page (docs/console.md): the account's audit records, newest first: who did what, from where, in which
// request; filters by action and time, and the same selection as CSV.
import { AUDIT_ACTIONS, isAuditAction, type AuditRecordJson } from '../../services/audit.js';
import { html, type Html } from '../html.js';
import { pager, shell } from '../layout.js';
import type { Flash } from '../session.js';

export interface ActivityFilter {
  action: string;
  from: string;
  to: string;
  page: number;
}

interface ActivityView {
  csrf: string;
  email: string;
  filter: ActivityFilter;
  filterError?: string | undefined;
  items: AuditRecordJson[];
  total: number;
  pageSize: number;
  flash?: Flash | undefined;
}

const ACTOR_TEXT: Record<string, string> = {
  console: 'Console',
  token: 'API token',
  key: 'API key',
  operator: 'Operator',
  system: 'The service',
};

function detailsText(d: Record<string, unknown>): string {
  return Object.entries(d)
    .map(
      ([k, v]) =>
        `${k}: ${Array.isArray(v) ? v.join(', ') : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`,
    )
    .join('; ');
}

function row(r: AuditRecordJson): Html {
  return html`<tr data-testid="audit-row" data-action="${r.action}" data-request-id="${r.request_id ?? ''}">
<td data-label="Time"><time datetime="${r.time}">${r.time.replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC')}</time></td>
<td data-label="Action"><span data-testid="audit-action">${isAuditAction(r.action) ? AUDIT_ACTIONS[r.action] : r.action}</span><br><code class="small">${r.action}</code>${r.target ? html`<br><code class="small">${r.target}</code>` : ''}</td>
<td data-label="By">${ACTOR_TEXT[r.actor.type] ?? r.actor.type}${r.actor.id ? html`<br><code class="small">${r.actor.id}</code>` : ''}</td>
<td data-label="Source IP"><code>${r.source_ip ?? '—'}</code></td>
<td data-label="Details" class="small">${detailsText(r.details)}</td>
<td data-label="Request id"><code class="small">${r.request_id ?? '—'}</code></td>
</tr>`;
}

/** The page's filter as a query string (the CSV link and the pager keep it). */
export function activityQuery(f: ActivityFilter, page?: number): string {
  const q = new URLSearchParams();
  if (f.action) q.set('action', f.action);
  if (f.from) q.set('from', f.from);
  if (f.to) q.set('to', f.to);
  if (page && page > 1) q.set('page', String(page));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function activityPage(v: ActivityView) {
  const f = v.filter;
  const filtered = f.action !== '' || f.from !== '' || f.to !== '';
  const sel = (a: string, b: string) => (a === b ? html` selected` : '');
  const families = [...new Set(Object.keys(AUDIT_ACTIONS).map((a) => a.split('.')[0]!))];
  return shell({
    title: 'Activity',
    signedIn: { nav: 'activity', csrf: v.csrf, email: v.email },
    flash: v.flash,
    body: html`<div class="page-head"><h1>Activity</h1><p class="lead">Every change to your account, whoever made it: you in the console, your API token or keys, our operators, or the service itself. Each record is chained to the one before it, so none can be changed or removed unseen.</p></div>
<section class="card flush" aria-labelledby="list-title">
<div class="card-head"><div><h2 id="list-title">Records</h2><p class="muted small" data-testid="audit-count">${v.total} ${v.total === 1 ? 'record' : 'records'}${filtered ? ' match the filter' : ''}</p></div>
<a class="btn secondary sm" href="/console/activity.csv${activityQuery(f)}" data-testid="audit-csv" download>Download CSV</a></div>
<form method="get" action="/console/activity" class="form-row filters" role="search" aria-label="Filter records">
<div class="field"><label for="f-action">Action</label><select id="f-action" name="action"><option value=""${sel(f.action, '')}>All</option>
${families.map((fam) => html`<option value="${fam}"${sel(f.action, fam)}>${fam}: all</option>`)}
${Object.entries(AUDIT_ACTIONS).map(([a, text]) => html`<option value="${a}"${sel(f.action, a)}>${text} (${a})</option>`)}</select></div>
<div class="field narrow"><label for="f-from">From (UTC)</label><input type="date" id="f-from" name="from" value="${f.from}"></div>
<div class="field narrow"><label for="f-to">To (UTC, inclusive)</label><input type="date" id="f-to" name="to" value="${f.to}"></div>
<button class="btn secondary" type="submit">Filter</button>
${filtered ? html`<a class="btn secondary" href="/console/activity">Clear</a>` : ''}
</form>
${
  v.filterError
    ? html`<div class="empty" role="alert" data-testid="audit-filter-error">${v.filterError}</div>`
    : v.items.length === 0
      ? html`<div class="empty" data-testid="audit-empty">${filtered ? 'No records match this filter.' : 'No activity recorded yet.'}</div>`
      : html`<div class="table-wrap"><table class="stack-sm" data-testid="audit-table">
<caption class="visually-hidden">Activity records, newest first</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Action</th><th scope="col">By</th><th scope="col">Source IP</th><th scope="col">Details</th><th scope="col">Request id</th></tr></thead>
<tbody>${v.items.map(row)}</tbody>
</table></div>
${pager(f.page, v.pageSize, v.total, (p) => `/console/activity${activityQuery(f, p)}`)}`
}
</section>`,
  });
}
