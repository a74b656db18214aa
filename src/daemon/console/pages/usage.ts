// Usage page (docs/console.md): the current period's totals and the plan's limit, a server-drawn SVG chart of the last 24
// hours and 30 days, a row per proxy user, the top domains, and a CSV download. Works without JavaScript; the chart's bars
// carry their figures in <title> (hover, screen readers) and the table repeats them.
import { formatSize } from '../../../contract/size.js';
import { subjectIp } from '../../../rules/usage-key.js';
import { escapeHtml as esc, html, raw, type Html } from '../html.js';
import { shell } from '../layout.js';
import type { Flash } from '../session.js';
import type { UsageDomainsData } from '../../../contract/schemas.js';
import type { UsageReport } from '../../services/usage.js';

interface UsageView {
  csrf: string;
  email: string;
  periodLabel: string;
  /** The plan's traffic limit in words, or "No limit". */
  limit: string;
  byUser: UsageReport;
  hours: UsageReport;
  days: UsageReport;
  /** The period's top domains and the rest. */
  domains: UsageDomainsData;
  /** Bucket starts (ms) of the chart's 24 hours and 30 days, oldest first. */
  hourStarts: number[];
  dayStarts: number[];
  flash?: Flash | undefined;
}

// The chart's panels are stacked in one SVG 360 units wide: on a phone's ~320 px its 11-unit text is still ~10 px
// on screen (side by side, the two panels shrank it to 5 px); on a wide screen the chart sits beside the totals.
const CHART_WIDTH = 360;
const PANEL_HEIGHT = 160;
const PANEL_GAP = 20;

/** One panel: a bar per bucket (up + down), tallest scaled to the panel's height; `y0`: its top. */
function panel(
  title: string,
  starts: number[],
  report: UsageReport,
  label: (ms: number) => string,
  y0: number,
): string {
  const byStart = new Map(report.rows.map((r) => ['time' in r ? Date.parse(r.time) : 0, r.bytes_up + r.bytes_down]));
  const values = starts.map((s) => byStart.get(s) ?? 0);
  const max = Math.max(1, ...values);
  const width = CHART_WIDTH;
  const h = 110;
  const top = y0 + 28;
  const gap = 2;
  const bw = (width - gap * (starts.length - 1)) / starts.length;
  const bars = values
    .map((v, i) => {
      const bh = v === 0 ? 0 : Math.max(1, (v / max) * h);
      const x = i * (bw + gap);
      return `<rect class="bar" x="${x.toFixed(1)}" y="${(top + h - bh).toFixed(1)}" width="${bw.toFixed(1)}" height="${bh.toFixed(1)}"><title>${esc(`${label(starts[i]!)}: ${formatSize(v)}`)}</title></rect>`;
    })
    .join('');
  return `<g><text class="chart-title" x="0" y="${y0 + 16}">${esc(title)} · peak ${esc(formatSize(values.length ? Math.max(...values) : 0))}</text>
<line class="axis" x1="0" y1="${top + h + 0.5}" x2="${width}" y2="${top + h + 0.5}"/>${bars}
<text class="tick" x="0" y="${top + h + 16}">${esc(label(starts[0]!))}</text><text class="tick" x="${width}" y="${top + h + 16}" text-anchor="end">${esc(label(starts[starts.length - 1]!))}</text></g>`;
}

function chart(v: UsageView): Html {
  const hourLabel = (ms: number) => new Date(ms).toISOString().slice(11, 16) + ' UTC';
  const dayLabel = (ms: number) => new Date(ms).toISOString().slice(5, 10);
  const svg = `<svg data-testid="usage-chart" class="usage-chart" viewBox="0 0 ${CHART_WIDTH} ${2 * PANEL_HEIGHT + PANEL_GAP}" role="img" aria-label="Traffic in the last 24 hours and the last 30 days" xmlns="http://www.w3.org/2000/svg">
${panel('Last 24 hours, per hour', v.hourStarts, v.hours, hourLabel, 0)}
${panel('Last 30 days, per day', v.dayStarts, v.days, dayLabel, PANEL_HEIGHT + PANEL_GAP)}
</svg>`;
  return raw(svg);
}

function row(r: UsageReport['rows'][number]): Html {
  const user = 'user' in r ? r.user : '';
  const ip = subjectIp(user);
  return html`<tr data-testid="usage-row-${user}">
<td data-label="User" class="wrap-any">${ip !== null ? html`<span class="muted">whitelist</span> <code>${ip}</code>` : html`<code>${user}</code>`}</td>
<td data-label="Up" class="num">${formatSize(r.bytes_up)}</td>
<td data-label="Down" class="num">${formatSize(r.bytes_down)}</td>
<td data-label="Total" class="num" data-testid="usage-row-total">${formatSize(r.bytes_up + r.bytes_down)}</td>
<td data-label="Connections" class="num">${r.connections}</td>
</tr>`;
}

/** A domain's row; its share is of `all`, the period's traffic over every domain and the rest (not of the largest). */
function domainRow(
  r: { domain: string; bytes_up: number; bytes_down: number; connections: number },
  all: number,
  other = false,
): Html {
  const total = r.bytes_up + r.bytes_down;
  const percent = (100 * total) / all;
  return html`<tr data-testid="${other ? 'usage-domain-other' : 'usage-domain-row'}" data-domain="${other ? '' : r.domain}">
<td data-label="Domain" class="wrap-any">${other ? html`<span class="muted">Other</span>` : html`<code>${r.domain}</code>`}</td>
<td data-label="Up" class="num">${formatSize(r.bytes_up)}</td>
<td data-label="Down" class="num">${formatSize(r.bytes_down)}</td>
<td data-label="Total" class="num" data-testid="usage-domain-total">${formatSize(total)}</td>
<td data-label="Share" class="share"><meter min="0" max="${String(all)}" value="${String(total)}" aria-label="share of all traffic"></meter> <span class="small muted" data-testid="usage-domain-share">${percent < 1 && total > 0 ? '<1' : String(Math.round(percent))} %</span></td>
</tr>`;
}

function domainsCard(v: UsageView): Html {
  const { domains, other } = v.domains;
  const hasOther = other.bytes_up + other.bytes_down + other.connections > 0;
  const all = Math.max(
    1,
    domains.reduce((n, d) => n + d.bytes_up + d.bytes_down, 0) + other.bytes_up + other.bytes_down,
  );
  return html`<section class="card flush" aria-labelledby="domains-title" data-testid="usage-domains">
<div class="card-head"><div><h2 id="domains-title">Top domains</h2><p class="muted small">${v.periodLabel}, by the site's registrable domain (<code>a.b.example.co.uk</code> counts under <code>example.co.uk</code>; an IP address under itself).</p></div></div>
${
  domains.length === 0 && !hasOther
    ? html`<div class="empty">No traffic in this period yet.</div>`
    : html`<div class="table-wrap"><table class="stack-sm">
<thead><tr><th scope="col">Domain</th><th scope="col" class="num">Up</th><th scope="col" class="num">Down</th><th scope="col" class="num">Total</th><th scope="col">Share</th></tr></thead>
<tbody>${domains.map((d) => domainRow(d, all))}${hasOther ? domainRow({ domain: '', ...other }, all, true) : ''}</tbody>
</table></div>`
}
</section>`;
}

export function usagePage(v: UsageView) {
  const t = v.byUser.total;
  return shell({
    title: 'Usage',
    signedIn: { nav: 'usage', csrf: v.csrf, email: v.email },
    flash: v.flash,
    body: html`<div class="page-head"><h1>Usage</h1><p class="lead">Traffic relayed for your account, counted while connections are open (up: from you to the target; down: back to you). Figures are at most a few seconds old.</p></div>
<div class="stack">
<section class="card" aria-labelledby="period-title">
<div class="card-head"><div><h2 id="period-title">${v.periodLabel}</h2></div><a class="btn secondary sm" href="/console/usage.csv" data-testid="usage-csv" download>Download CSV</a></div>
<div class="usage-period">
<dl class="facts">
<dt>Used</dt><dd data-testid="usage-total" data-bytes="${String(t.bytes_up + t.bytes_down)}">${formatSize(t.bytes_up + t.bytes_down)}</dd>
<dt>Limit</dt><dd data-testid="usage-limit">${v.limit}</dd>
<dt>Connections</dt><dd>${t.connections}</dd>
</dl>
${chart(v)}
</div>
</section>
<section class="card flush" aria-labelledby="users-title">
<div class="card-head"><div><h2 id="users-title">By proxy user</h2><p class="muted small">${v.periodLabel}. Traffic admitted by your IP whitelist is listed under its IP address.</p></div></div>
${
  v.byUser.rows.length === 0
    ? html`<div class="empty" data-testid="usage-empty">No traffic in this period yet.</div>`
    : html`<div class="table-wrap"><table class="stack-sm" data-testid="usage-table">
<thead><tr><th scope="col">User</th><th scope="col" class="num">Up</th><th scope="col" class="num">Down</th><th scope="col" class="num">Total</th><th scope="col" class="num">Connections</th></tr></thead>
<tbody>${v.byUser.rows.map(row)}</tbody>
</table></div>`
}
</section>
${domainsCard(v)}
</div>`,
  });
}
