import { MAX_BATCH_ITEMS } from '../../../contract/paths.js';
import type { WhitelistItem } from '../../../contract/schemas.js';
import { html, type Html } from '../html.js';
import { csrfField, pager, shell } from '../layout.js';
import type { AddResult, Flash } from '../session.js';

export interface WhitelistFilter {
  status: 'all' | 'active' | 'disabled';
  ip: string;
  page: number;
}

interface WhitelistView {
  csrf: string;
  email: string;
  verified: boolean;
  filter: WhitelistFilter;
  /** Set when the filter was not understood (shown instead of the list). */
  filterError?: string | undefined;
  items: WhitelistItem[];
  total: number;
  pageSize: number;
  addResult?: AddResult | undefined;
  /** Values to put back in the add form after a failure. */
  addForm?: { ip: string; remark: string } | undefined;
  flash?: Flash | undefined;
}

function query(f: WhitelistFilter, page: number): string {
  const p = new URLSearchParams();
  if (f.status !== 'all') p.set('status', f.status);
  if (f.ip) p.set('ip', f.ip);
  if (page > 1) p.set('page', String(page));
  const s = p.toString();
  return `/console/whitelist${s ? `?${s}` : ''}`;
}

function addResultNotice(r: AddResult | undefined): Html {
  if (!r) return html``;
  const failed = r.failedItems.length;
  if (failed === 0) {
    return html`<div class="notice success" role="status" data-testid="add-result"><p>Added ${r.successCount} ${r.successCount === 1 ? 'IP address' : 'IP addresses'}. The gateway accepts ${r.successCount === 1 ? 'it' : 'them'} within a second.</p></div>`;
  }
  return html`<div class="notice error" role="alert" data-testid="add-result">
<p><strong>${r.successCount} succeeded, ${failed} failed.</strong> ${failed === 1 ? 'This item was' : 'These items were'} not added:</p>
<div class="table-wrap"><table class="stack-sm" data-testid="failed-items">
<thead><tr><th scope="col">IP</th><th scope="col">Code</th><th scope="col">Reason</th></tr></thead>
<tbody>
${r.failedItems.map(
  (f) =>
    html`<tr data-testid="failed-item"><td data-label="IP" class="wrap-any"><code>${f.ip}</code></td><td data-label="Code" data-testid="failed-code">${f.code}</td><td data-label="Reason" data-testid="failed-reason">${f.reason}</td></tr>`,
)}
</tbody></table></div>
</div>`;
}

function row(item: WhitelistItem, csrf: string): Html {
  const active = item.status === 1;
  return html`<tr data-testid="whitelist-row" data-ip="${item.ip}">
<td data-label="IP address"><code data-testid="whitelist-ip">${item.ip}</code></td>
<td data-label="Remark" class="remark">${item.remark || html`<span aria-hidden="true">—</span><span class="visually-hidden">none</span>`}</td>
<td data-label="Status"><span class="badge ${active ? 'ok' : 'off'}" data-testid="whitelist-status">${active ? 'Active' : 'Disabled'}</span></td>
<td data-label="Added"><time datetime="${item.created_at}">${item.created_at.replace('T', ' ').replace(/:\d\dZ$/, ' UTC')}</time></td>
<td class="actions">
<form method="post" action="/console/whitelist/status">${csrfField(csrf)}<input type="hidden" name="ip" value="${item.ip}"><input type="hidden" name="status" value="${active ? 'disabled' : 'active'}"><button class="btn secondary sm" type="submit" aria-label="${active ? 'Disable' : 'Enable'} ${item.ip}">${active ? 'Disable' : 'Enable'}</button></form>
<form method="post" action="/console/whitelist/delete">${csrfField(csrf)}<input type="hidden" name="ip" value="${item.ip}"><button class="btn ghost-danger sm" type="submit" aria-label="Delete ${item.ip}">Delete</button></form>
</td>
</tr>`;
}

export function whitelistPage(v: WhitelistView) {
  const f = v.filter;
  const filtered = f.status !== 'all' || f.ip !== '';
  const sel = (s: string) => (f.status === s ? html` selected` : '');
  return shell({
    title: 'Whitelist',
    signedIn: { nav: 'whitelist', csrf: v.csrf, email: v.email },
    flash: v.flash,
    body: html`<div class="page-head"><h1>Whitelist</h1><p class="lead">Source IPv4 addresses that may use the gateway without a username and password.</p></div>
<div class="stack">
<section class="card" aria-labelledby="add-title">
<div class="card-head"><div><h2 id="add-title">Add IP addresses</h2><p class="muted small">Public IPv4 only. Several addresses may be separated by spaces or commas (up to ${MAX_BATCH_ITEMS}).</p></div></div>
${v.verified ? '' : html`<div class="notice warn" role="status"><p>Your account is not real-name verified yet, so new IPs are refused (code 10403). Contact support to verify it.</p></div>`}
${addResultNotice(v.addResult)}
<form method="post" action="/console/whitelist/add" class="form-row">
${csrfField(v.csrf)}
<div class="field"><label for="ip">IPv4 address</label><input type="text" id="ip" name="ip" inputmode="decimal" autocomplete="off" spellcheck="false" required placeholder="203.0.113.7" value="${v.addForm?.ip ?? ''}"></div>
<div class="field"><label for="remark">Remark <span class="muted">(optional)</span></label><input type="text" id="remark" name="remark" maxlength="255" autocomplete="off" placeholder="Office router" value="${v.addForm?.remark ?? ''}"></div>
<button class="btn" type="submit">Add</button>
</form>
</section>

<section class="card flush" aria-labelledby="list-title">
<div class="card-head"><div><h2 id="list-title">Entries</h2><p class="muted small" data-testid="whitelist-total">${v.total} ${v.total === 1 ? 'entry' : 'entries'}${filtered ? ' match the filter' : ''}</p></div></div>
<form method="get" action="/console/whitelist" class="form-row filters" role="search" aria-label="Filter entries">
<div class="field narrow"><label for="f-status">Status</label><select id="f-status" name="status"><option value="all"${sel('all')}>All</option><option value="active"${sel('active')}>Active</option><option value="disabled"${sel('disabled')}>Disabled</option></select></div>
<div class="field"><label for="f-ip">Exact IP</label><input type="text" id="f-ip" name="ip" inputmode="decimal" spellcheck="false" value="${f.ip}" placeholder="Any"></div>
<button class="btn secondary" type="submit">Filter</button>
${filtered ? html`<a class="btn secondary" href="/console/whitelist">Clear</a>` : ''}
</form>
${
  v.filterError
    ? html`<div class="empty" role="alert">${v.filterError}</div>`
    : v.items.length === 0
      ? html`<div class="empty" data-testid="whitelist-empty">${filtered ? 'No entries match this filter.' : 'No IP addresses yet. Add the public IPv4 address of each machine that should use the gateway.'}</div>`
      : html`<div class="table-wrap"><table class="stack-sm" data-testid="whitelist-table">
<caption class="visually-hidden">Whitelisted IP addresses, newest first</caption>
<thead><tr><th scope="col">IP address</th><th scope="col">Remark</th><th scope="col">Status</th><th scope="col">Added</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${v.items.map((i) => row(i, v.csrf))}</tbody>
</table></div>`
}
${pager(f.page, v.pageSize, v.total, (page) => query(f, page))}
</section>
</div>`,
  });
}
