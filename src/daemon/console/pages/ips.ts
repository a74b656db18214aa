// IPs page (docs/console.md): the account's dedicated egress addresses (address, country, city, since when, bytes
// this period), how to pick one in a username, and a Replace button per address (a monthly allowance).
import { formatSize } from '../../../contract/size.js';
import type { CustomerIp } from '../../services/dedicated.js';
import { html, type Html } from '../html.js';
import { csrfField, shell } from '../layout.js';
import type { Flash } from '../session.js';

interface IpsView {
  csrf: string;
  email: string;
  periodStart: string;
  items: CustomerIp[];
  replacements: { used: number; max: number };
  flash?: Flash | undefined;
}

function row(r: CustomerIp, csrf: string, canReplace: boolean): Html {
  return html`<tr data-testid="ip-row-${r.address}">
<td data-label="Address"><code data-testid="ip-address">${r.address}</code></td>
<td data-label="Country">${r.country ? r.country.toUpperCase() : html`<span class="muted">—</span>`}</td>
<td data-label="City">${r.city ?? html`<span class="muted">—</span>`}</td>
<td data-label="Since" class="nowrap"><time datetime="${r.since}">${r.since.replace('T', ' ').replace(/Z$/, ' UTC')}</time></td>
<td data-label="This period" data-testid="ip-bytes">↑ ${formatSize(r.bytes_up)} ↓ ${formatSize(r.bytes_down)}</td>
<td data-label="" class="actions"><form method="post" action="/console/ips/replace">${csrfField(csrf)}<input type="hidden" name="address" value="${r.address}"><button class="btn secondary" type="submit"${canReplace ? '' : html` disabled`}>Replace</button></form></td>
</tr>`;
}

export function ipsPage(v: IpsView) {
  const left = Math.max(0, v.replacements.max - v.replacements.used);
  const example = v.items[0]?.address ?? 'A.B.C.D';
  return shell({
    title: 'IPs',
    signedIn: { nav: 'ips', csrf: v.csrf, email: v.email },
    flash: v.flash,
    body: html`<div class="page-head"><h1>IPs</h1><p class="lead">Your dedicated egress addresses: your connections leave only from them, and nobody else's ever does.</p></div>
<section class="card flush" aria-labelledby="ips-title">
<div class="card-head"><div><h2 id="ips-title">Addresses</h2><p class="muted small" data-testid="ip-count">${v.items.length} ${v.items.length === 1 ? 'address' : 'addresses'}; traffic since ${v.periodStart.slice(0, 10)} (UTC). Replacements left this month: <span data-testid="ip-replacements-left">${left}</span> of ${v.replacements.max}.</p></div></div>
${
  v.items.length === 0
    ? html`<div class="empty" data-testid="ip-empty">You have no dedicated addresses. Your connections leave from the shared pool.</div>`
    : html`<div class="table-wrap"><table class="stack-sm" data-testid="ip-table">
<caption class="visually-hidden">Dedicated addresses</caption>
<thead><tr><th scope="col">Address</th><th scope="col">Country</th><th scope="col">City</th><th scope="col">Since</th><th scope="col">This period</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${v.items.map((r) => row(r, v.csrf, left > 0))}</tbody>
</table></div>`
}
</section>
<section class="card" aria-labelledby="use-title">
<h2 id="use-title">Using them</h2>
<p>Every connection of your proxy users rotates among your addresses; a sticky session (<code>USER-session-ID</code>) keeps one. To leave from one address, add <code>-ip-</code> and the address to the username: <code class="wrap-any">USER-ip-${example}</code> (after <code>-country-</code> and <code>-city-</code>, before <code>-session-</code>). An address that is not yours is refused like a wrong password.</p>
<p class="muted small">Replacing an address swaps it for a free one on the same node (or in the same country); connections open from the old one end within seconds.</p>
</section>`,
  });
}
