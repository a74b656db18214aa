// The page shell: head, header with the product name and navigation, flash message, content.
import { html, raw, type Html } from './html.js';
import { LOGO_SVG } from './assets.js';
import type { Flash } from './session.js';

type NavKey = 'account' | 'whitelist' | 'proxy-users' | 'ips' | 'usage' | 'connections' | 'activity';

interface ShellOptions {
  title: string;
  /** Signed-in pages: the navigation and the Log out form (which needs a CSRF token). */
  signedIn?: { nav: NavKey | null; csrf: string; email: string };
  flash?: Flash | undefined;
  /** Load the copy-button script (pages that show a secret once). */
  copyScript?: boolean;
  /** Load the passkey script (pages with a passkey button). */
  passkeyScript?: boolean;
  body: Html;
}

const LOGO = raw(LOGO_SVG.replace('<svg ', '<svg width="28" height="28" aria-hidden="true" focusable="false" '));

export const brand = (href: string) =>
  html`<a class="brand" href="${href}">${LOGO}<span>proxyd</span><small>console</small></a>`;

const NAV: Array<{ key: NavKey; href: string; label: string }> = [
  { key: 'account', href: '/console/account', label: 'Account' },
  { key: 'whitelist', href: '/console/whitelist', label: 'Whitelist' },
  { key: 'proxy-users', href: '/console/proxy-users', label: 'Proxy users' },
  { key: 'ips', href: '/console/ips', label: 'IPs' },
  { key: 'usage', href: '/console/usage', label: 'Usage' },
  { key: 'connections', href: '/console/connections', label: 'Connections' },
  { key: 'activity', href: '/console/activity', label: 'Activity' },
];

export function csrfField(csrf: string): Html {
  return html`<input type="hidden" name="_csrf" value="${csrf}">`;
}

/** A message box (an error is an alert, anything else a status), or nothing. */
export function noticeBox(flash: Flash | undefined, testid: string): Html {
  if (!flash) return html``;
  const role = flash.kind === 'error' ? 'alert' : 'status';
  return html`<div class="notice ${flash.kind}" role="${role}" data-testid="${testid}"><p>${flash.text}</p></div>`;
}

const flashNotice = (flash: Flash | undefined): Html => noticeBox(flash, 'flash');

function head(title: string, copyScript: boolean, passkeyScript = false): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
<title>${title} · proxyd console</title>
<link rel="icon" href="/console/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/console/assets/console.css">
${copyScript ? html`<script src="/console/assets/copy.js" defer></script>` : ''}
${passkeyScript ? html`<script src="/console/assets/passkey.js" defer></script>` : ''}
</head>`;
}

export function shell(o: ShellOptions): Html {
  const s = o.signedIn;
  const nav = s
    ? html`<nav class="nav" aria-label="Main">
${NAV.map((n) => html`<a href="${n.href}"${n.key === s.nav ? raw(' aria-current="page"') : ''}>${n.label}</a>`)}
<form method="post" action="/console/logout">${csrfField(s.csrf)}<button type="submit">Log out</button></form>
</nav>`
    : '';
  return html`${head(o.title, !!o.copyScript, !!o.passkeyScript)}
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="topbar"><div class="wrap">${brand(s ? '/console/account' : '/console/login')}${nav}</div></header>
<main id="main" class="wrap" tabindex="-1">
${flashNotice(o.flash)}
${o.body}
</main>
${s ? html`<footer class="site-foot wrap"><p>Signed in as <span data-testid="signed-in-as">${s.email}</span></p></footer>` : ''}
</body>
</html>
`;
}

/** The log-in page has no header navigation: a centred card. */
export function authShell(title: string, body: Html, passkeyScript = false): Html {
  return html`${head(title, false, passkeyScript)}
<body>
<main id="main" class="auth">
${brand('/console/login')}
${body}
<footer>Proxy access, whitelists and API tokens for your account.</footer>
</main>
</body>
</html>
`;
}

/** ISO date-time in UTC without milliseconds, for tables. */
export function utc(sec: number): string {
  return new Date(sec * 1000)
    .toISOString()
    .replace('T', ' ')
    .replace(/:\d\d\.\d{3}Z$/, ' UTC');
}

/** The last page of `total` items, `pageSize` a page (1 when there are none). */
export function lastPage(total: number, pageSize: number): number {
  return Math.max(1, Math.ceil(total / pageSize));
}

/** Previous and next links with the range shown, for page `page` of `total` items; nothing when one page holds them all. */
export function pager(page: number, pageSize: number, total: number, href: (page: number) => string): Html | '' {
  const pages = lastPage(total, pageSize);
  if (pages <= 1) return '';
  const first = (page - 1) * pageSize + 1;
  const last = Math.min(total, page * pageSize);
  return html`<div class="pager"><span class="muted small">Showing ${first}–${last} of ${total}</span><nav aria-label="Pages">
${page > 1 ? html`<a class="btn secondary sm" href="${href(page - 1)}" rel="prev">Previous</a>` : ''}
${page < pages ? html`<a class="btn secondary sm" href="${href(page + 1)}" rel="next">Next</a>` : ''}
</nav></div>`;
}
