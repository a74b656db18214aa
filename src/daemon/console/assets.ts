// The console's only static files, served from /console/assets/ (CSP forbids inline styles and scripts).

/** The product mark: header logo and favicon. */
export const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 28 28">' +
  '<rect width="28" height="28" rx="7" fill="#1f4fd1"/>' +
  '<path d="M8 9.5h7a4 4 0 0 1 0 8h-4.2V21H8z" fill="none" stroke="#fff" stroke-width="2.4" stroke-linejoin="round"/>' +
  '<circle cx="19.5" cy="20" r="1.8" fill="#8fb0ff"/></svg>';

export const CONSOLE_CSS = `
:root {
  --bg: #f5f6f8;
  --surface: #ffffff;
  --border: #dfe3e8;
  --border-strong: #c5ccd5;
  --text: #17202a;
  --muted: #556270;
  --primary: #1f4fd1;
  --primary-hover: #183fa8;
  --primary-soft: #eaf0fd;
  --danger: #b42318;
  --danger-hover: #912018;
  --danger-soft: #fef3f2;
  --success: #067647;
  --success-soft: #ecfdf3;
  --warning: #93370d;
  --warning-soft: #fffaeb;
  --radius: 10px;
  --shadow: 0 1px 2px rgba(16, 24, 40, .05), 0 1px 3px rgba(16, 24, 40, .06);
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
  color-scheme: light;
}
*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body {
  margin: 0;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif;
  font-size: 16px;
  line-height: 1.5;
  color: var(--text);
  background: var(--bg);
}
a { color: var(--primary); text-underline-offset: 2px; }
a:hover { color: var(--primary-hover); }
:focus-visible { outline: 3px solid #7ea2f7; outline-offset: 2px; border-radius: 4px; }
code, .mono { font-family: var(--mono); font-size: .92em; }
.skip {
  position: absolute; left: 8px; top: -48px; z-index: 10;
  background: var(--surface); padding: 8px 12px; border-radius: 6px; border: 1px solid var(--border);
}
.skip:focus { top: 8px; }
.visually-hidden {
  position: absolute !important; width: 1px; height: 1px; overflow: hidden;
  clip: rect(0 0 0 0); clip-path: inset(50%); white-space: nowrap;
}
.wrap { max-width: 1040px; margin: 0 auto; padding: 0 24px; }

/* Header */
.topbar { background: var(--surface); border-bottom: 1px solid var(--border); }
.topbar .wrap { display: flex; align-items: center; gap: 24px; min-height: 64px; }
.brand {
  display: inline-flex; align-items: center; gap: 10px;
  font-weight: 700; font-size: 1.15rem; letter-spacing: -.01em; color: var(--text); text-decoration: none;
}
.brand:hover { color: var(--text); }
.brand svg { flex: none; }
.brand small { font-weight: 500; color: var(--muted); font-size: .8rem; letter-spacing: 0; }
.nav { display: flex; align-items: center; gap: 4px; margin-left: auto; flex-wrap: wrap; }
.nav a, .nav button {
  display: inline-block; padding: 8px 12px; border-radius: 8px;
  color: var(--muted); text-decoration: none; font: inherit; font-weight: 500; font-size: .95rem;
  background: none; border: 0; cursor: pointer;
}
.nav a:hover, .nav button:hover { background: var(--bg); color: var(--text); }
.nav a[aria-current="page"] { color: var(--primary); background: var(--primary-soft); }
.nav form { margin: 0; }

/* Page */
main.wrap { padding-top: 36px; padding-bottom: 56px; }
.page-head { margin-bottom: 24px; }
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 6px; letter-spacing: -.015em; }
h2 { font-size: 1.1rem; margin: 0 0 4px; letter-spacing: -.005em; }
.lead { color: var(--muted); margin: 0; }
.muted { color: var(--muted); }
.small { font-size: .875rem; }
.stack > * + * { margin-top: 20px; }
.grid-2 { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; align-items: start; }

.card {
  background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius);
  box-shadow: var(--shadow); padding: 24px;
}
.card-head { display: flex; align-items: flex-start; justify-content: space-between; gap: 16px; margin-bottom: 16px; }
.card-head p { margin: 0; }
.card > p:last-child { margin-bottom: 0; }

dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 12px 24px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; font-weight: 500; overflow-wrap: anywhere; }

/* Badges */
.badge {
  display: inline-flex; align-items: center; gap: 6px; padding: 2px 10px; border-radius: 999px;
  font-size: .8rem; font-weight: 600; line-height: 1.6; white-space: nowrap;
  background: #f0f2f5; color: #344054;
}
.badge::before { content: ""; width: 6px; height: 6px; border-radius: 50%; background: currentColor; }
.badge.ok { background: var(--success-soft); color: var(--success); }
.badge.warn { background: var(--warning-soft); color: var(--warning); }
.badge.bad { background: var(--danger-soft); color: var(--danger); }
.badge.off { background: #f0f2f5; color: #475467; }

/* Forms */
label { display: block; font-weight: 600; font-size: .9rem; margin-bottom: 6px; }
.field + .field { margin-top: 16px; }
.grid-2 > .field + .field { margin-top: 0; }
.hint { display: block; color: var(--muted); font-size: .85rem; margin-top: 6px; font-weight: 400; }
input[type=text], input[type=email], input[type=password], input[type=url], input[type=date], select {
  display: block; width: 100%; font: inherit; color: var(--text);
  padding: 0 12px; border: 1px solid var(--border-strong); border-radius: 8px; background: var(--surface);
  height: 44px;
}
.form-row + .hint { margin-top: 8px; }
fieldset { border: 0; padding: 0; margin: 16px 0 0; min-width: 0; }
legend { font-weight: 600; font-size: .9rem; margin-bottom: 6px; padding: 0; }
label.check { display: flex; gap: 8px; align-items: baseline; font-weight: 400; margin: 6px 0; }
label.check input { flex: none; width: 18px; height: 18px; }
textarea {
  display: block; width: 100%; font: .9rem/1.5 ui-monospace, monospace; color: var(--text);
  padding: 8px 12px; border: 1px solid var(--border-strong); border-radius: 8px; background: var(--surface); resize: vertical;
}
textarea:focus-visible { outline: 3px solid #7ea2f7; outline-offset: 0; border-color: var(--primary); }
input:focus-visible, select:focus-visible { outline: 3px solid #7ea2f7; outline-offset: 0; border-color: var(--primary); }
.form-row { display: flex; gap: 12px; align-items: flex-end; flex-wrap: wrap; }
.form-row .field { flex: 1 1 200px; margin: 0; }
.form-row .field.narrow { flex: 0 1 170px; }
.form-actions { display: flex; gap: 12px; align-items: center; flex-wrap: wrap; margin-top: 20px; }
.inline { display: inline; margin: 0; }

/* Buttons */
.btn {
  display: inline-flex; align-items: center; justify-content: center; gap: 8px;
  min-height: 44px; padding: 10px 18px; border-radius: 8px; border: 1px solid transparent;
  font: inherit; font-weight: 600; font-size: .95rem; line-height: 1.2; text-decoration: none; cursor: pointer;
  background: var(--primary); color: #fff; white-space: nowrap;
}
.btn:hover { background: var(--primary-hover); color: #fff; }
.btn.secondary { background: var(--surface); color: var(--text); border-color: var(--border-strong); }
.btn.secondary:hover { background: var(--bg); color: var(--text); }
.btn.danger { background: var(--danger); }
.btn.danger:hover { background: var(--danger-hover); }
.btn.ghost-danger { background: var(--surface); color: var(--danger); border-color: #f5c2bd; }
.btn.ghost-danger:hover { background: var(--danger-soft); color: var(--danger-hover); }
.btn.sm { min-height: 36px; padding: 6px 12px; font-size: .875rem; }
.btn.block { width: 100%; }

/* Notices */
.notice {
  border: 1px solid var(--border); border-left-width: 4px; border-radius: 8px;
  padding: 12px 16px; background: var(--surface); margin-bottom: 20px;
}
.notice p { margin: 0; }
.notice p + p, .notice p + table, .notice .table-wrap { margin-top: 8px; }
.notice.success { background: var(--success-soft); border-color: #abefc6; border-left-color: var(--success); }
.notice.error { background: var(--danger-soft); border-color: #fecdca; border-left-color: var(--danger); }
.notice.warn { background: var(--warning-soft); border-color: #fedf89; border-left-color: #dc6803; }
.notice.info { background: var(--primary-soft); border-color: #c7d7fb; border-left-color: var(--primary); }
.notice strong { font-weight: 650; }

/* Secrets shown once */
.secret {
  display: flex; align-items: stretch; gap: 8px; margin: 12px 0;
}
.secret code {
  flex: 1; min-width: 0; display: block; padding: 12px 14px; border-radius: 8px;
  background: #0f172a; color: #e2e8f0; font-size: .9rem; overflow-wrap: anywhere; word-break: break-all;
  user-select: all;
}
.secret .btn { flex: none; }

/* Tables */
.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-size: .95rem; }
th, td { text-align: left; padding: 12px; border-bottom: 1px solid var(--border); vertical-align: middle; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; background: #fafbfc; }
tbody tr:last-child td { border-bottom: 0; }
td.actions { text-align: right; white-space: nowrap; }
td.actions form { display: inline; margin: 0 0 0 6px; }
td.actions .btn { min-width: 84px; }
.notice th { background: transparent; }
.notice td, .notice th { border-color: #f7d4d0; }
.remark { color: var(--muted); overflow-wrap: anywhere; }
.empty { text-align: center; padding: 40px 16px; color: var(--muted); }
.usage-period { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 420px); gap: 24px 32px; align-items: start; }
.usage-chart { display: block; width: 100%; height: auto; }
.usage-chart .bar { fill: var(--primary); }
.usage-chart .bar:hover { opacity: 0.75; }
.usage-chart .axis { stroke: #d0d5dd; stroke-width: 1; }
.usage-chart .tick, .usage-chart .chart-title { font: 11px system-ui, sans-serif; fill: #667085; }
.usage-chart .chart-title { font-weight: 600; fill: #344054; }
form.limits { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: flex-start; }
form.limits label { display: flex; flex-direction: column; align-items: flex-start; gap: 3px; font-size: 13px; color: var(--muted); margin: 0; }
form.limits input { width: auto; min-width: 0; height: 34px; padding: 4px 8px; font-size: 13px; }
form.limits .fmt { font-size: 12px; font-weight: 400; }
form.limits .btn { margin-top: 22px; }
dl.user-policy { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 8px 0 0; }
dl.user-policy > div { display: contents; }
dl.user-policy dt { color: var(--muted); }
dl.user-policy dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
.signing { margin-top: 20px; padding-top: 16px; border-top: 1px solid var(--border); }
.signing h3 { font-size: 1rem; margin: 0 0 6px; }
.signing p { margin: 0 0 8px; }
.signing pre { margin: 0 0 8px; padding: 10px 12px; border-radius: 8px; background: var(--bg); white-space: pre-wrap; overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.nowrap { white-space: nowrap; }
/* Names without a break (an IPv6 literal, a long host or username) wrap anywhere rather than widen the table; the
   column keeps room for a short name on one line (anywhere alone would let it shrink to a letter a line). */
td.wrap-any { overflow-wrap: anywhere; min-width: 10em; }
.card.flush { padding: 0; overflow: hidden; }
.card.flush .card-head { padding: 20px 24px 0; }
.card.flush .filters { padding: 0 24px 20px; border-bottom: 1px solid var(--border); }
.pager { display: flex; align-items: center; justify-content: space-between; gap: 12px; padding: 14px 24px; border-top: 1px solid var(--border); flex-wrap: wrap; }
.pager nav { display: flex; gap: 8px; }

/* Log in */
.auth { min-height: 100vh; display: flex; flex-direction: column; align-items: center; justify-content: center; padding: 32px 16px; }
.auth .brand { margin-bottom: 24px; font-size: 1.35rem; }
.auth .card { width: 100%; max-width: 420px; padding: 32px; }
.auth h1 { font-size: 1.4rem; }
.auth .lead { margin-bottom: 24px; }
.auth footer { margin-top: 24px; color: var(--muted); font-size: .85rem; text-align: center; }

.site-foot { color: var(--muted); font-size: .85rem; padding: 0 24px 32px; }

/* Phones: one column, tables become stacked rows */
@media (max-width: 720px) {
  .wrap { padding: 0 16px; }
  .topbar .wrap { flex-wrap: wrap; gap: 4px 12px; padding-top: 10px; padding-bottom: 6px; min-height: 0; }
  /* Every link and "Log out" on screen: the nav wraps to a second line rather than scrolling sideways. */
  .nav { margin-left: -10px; width: calc(100% + 10px); gap: 0; }
  .nav a, .nav button { padding: 8px 10px; font-size: .9rem; white-space: nowrap; }
  main.wrap { padding-top: 24px; padding-bottom: 40px; }
  h1 { font-size: 1.45rem; }
  .card { padding: 18px; }
  .card.flush .card-head { padding: 16px 18px 0; }
  .card.flush .filters { padding: 0 18px 16px; }
  .pager { padding: 12px 18px; }
  .grid-2, .usage-period { grid-template-columns: 1fr; }
  .card-head { flex-direction: column; }
  dl.facts { grid-template-columns: 1fr; gap: 2px; }
  dl.facts dd { margin-bottom: 10px; }
  .form-row .field, .form-row .field.narrow { flex: 1 1 100%; }
  .form-row .btn { width: 100%; }
  .secret { flex-direction: column; }
  table.stack-sm thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  table.stack-sm, table.stack-sm tbody, table.stack-sm tr, table.stack-sm td { display: block; width: 100%; }
  table.stack-sm tr { padding: 12px 18px; border-bottom: 1px solid var(--border); }
  table.stack-sm tbody tr:last-child { border-bottom: 0; }
  .notice table.stack-sm tr { padding: 8px 0; }
  /* A cell's label floats left and its content flows beside it, right-aligned: a cell of several parts (a badge, a
     reason and its code) stays one text, not a row of squeezed columns. */
  table.stack-sm td { border: 0; padding: 3px 0; text-align: right; overflow-wrap: anywhere; }
  table.stack-sm td::before { content: attr(data-label); float: left; margin-right: 12px; color: var(--muted); font-size: .85rem; text-align: left; }
  table.stack-sm td::after { content: ""; display: block; clear: both; }
  table.stack-sm td.actions { display: flex; justify-content: flex-start; padding-top: 10px; flex-wrap: wrap; gap: 8px; }
  table.stack-sm td.actions::after { content: none; }
  table.stack-sm td.actions::before { content: none; }
  table.stack-sm td.actions form { margin: 0; }
  .auth .card { padding: 24px; }
}
.qr svg { width: 200px; height: 200px; background: #fff; }
.codes { columns: 2; font-size: 0.95rem; padding-left: 1.5rem; }
ul.plain { list-style: none; padding: 0; }
ul.plain li { margin: 0.4rem 0; }
.card h3 { font-size: 1rem; margin: 1rem 0 0.4rem; }
`;

export const COPY_JS = `'use strict';
// Copy buttons for secrets shown once. Without JavaScript the buttons stay hidden and the value can be selected.
(function () {
  var buttons = document.querySelectorAll('[data-copy-target]');
  Array.prototype.forEach.call(buttons, function (btn) {
    var target = document.getElementById(btn.getAttribute('data-copy-target'));
    var status = document.getElementById(btn.getAttribute('data-copy-status'));
    if (!target) return;
    btn.hidden = false;
    btn.addEventListener('click', function () {
      var text = target.textContent.trim();
      var done = function (ok) {
        btn.textContent = ok ? 'Copied' : 'Select and copy';
        if (status) status.textContent = ok ? 'Copied to the clipboard.' : 'Copy failed: select the text and copy it.';
        setTimeout(function () { btn.textContent = 'Copy'; }, 2500);
      };
      var fallback = function () {
        var range = document.createRange();
        range.selectNodeContents(target);
        var sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        var ok = false;
        try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
        done(ok);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
      } else {
        fallback();
      }
    });
  });
})();
`;

/**
 * Passkeys (WebAuthn) need the browser's navigator.credentials: each `[data-passkey]` button (hidden without
 * JavaScript) asks the console for options, lets the browser make or use a credential, and posts its answer (JSON,
 * with the form's CSRF token); then it submits `data-form` (the step that completes a log-in or an action) or
 * reloads. A failure is shown in `data-status`.
 */
export const PASSKEY_JS = `'use strict';
(function () {
  function enc(buf) {
    var b = new Uint8Array(buf), s = '';
    for (var i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
    return btoa(s).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
  }
  function dec(s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/');
    while (s.length % 4) s += '=';
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }
  function creationOptions(o) {
    o.challenge = dec(o.challenge);
    o.user.id = dec(o.user.id);
    (o.excludeCredentials || []).forEach(function (c) { c.id = dec(c.id); });
    return o;
  }
  function requestOptions(o) {
    o.challenge = dec(o.challenge);
    (o.allowCredentials || []).forEach(function (c) { c.id = dec(c.id); });
    return o;
  }
  function answer(c) {
    var r = c.response;
    var out = { id: c.id, rawId: enc(c.rawId), type: c.type, clientExtensionResults: c.getClientExtensionResults ? c.getClientExtensionResults() : {}, response: { clientDataJSON: enc(r.clientDataJSON) } };
    if (c.authenticatorAttachment) out.authenticatorAttachment = c.authenticatorAttachment;
    if (r.attestationObject) {
      out.response.attestationObject = enc(r.attestationObject);
      if (r.getTransports) out.response.transports = r.getTransports();
    }
    if (r.authenticatorData) {
      out.response.authenticatorData = enc(r.authenticatorData);
      out.response.signature = enc(r.signature);
      if (r.userHandle) out.response.userHandle = enc(r.userHandle);
    }
    return out;
  }
  function post(url, body) {
    return fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      .then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (j) {
          if (!res.ok) throw new Error(j.message || ('The console answered ' + res.status + '.'));
          return j;
        });
      });
  }
  Array.prototype.forEach.call(document.querySelectorAll('[data-passkey]'), function (btn) {
    if (!window.PublicKeyCredential) return;
    btn.hidden = false;
    btn.addEventListener('click', function (ev) {
      ev.preventDefault();
      var status = document.getElementById(btn.getAttribute('data-status'));
      var csrf = btn.getAttribute('data-csrf');
      var kind = btn.getAttribute('data-passkey');
      var nameField = btn.getAttribute('data-name') ? document.getElementById(btn.getAttribute('data-name')) : null;
      btn.disabled = true;
      if (status) { status.textContent = 'Waiting for your passkey…'; status.hidden = false; }
      post(btn.getAttribute('data-options-url'), { _csrf: csrf })
        .then(function (opts) {
          return kind === 'register' ? navigator.credentials.create({ publicKey: creationOptions(opts) }) : navigator.credentials.get({ publicKey: requestOptions(opts) });
        })
        .then(function (cred) {
          var body = { _csrf: csrf, response: answer(cred) };
          if (nameField) body.name = nameField.value;
          return post(btn.getAttribute('data-verify-url'), body);
        })
        .then(function (j) {
          var form = btn.getAttribute('data-form');
          if (form) return document.getElementById(form).submit();
          // The same page again (a fragment alone would not reload it): reload, so it shows what changed.
          var next = new URL(j.next || location.href, location.href);
          if (next.pathname + next.search === location.pathname + location.search) location.reload();
          else location.assign(next.href);
        })
        .catch(function (e) {
          btn.disabled = false;
          if (status) status.textContent = (e && e.message) || String(e);
        });
    });
  });
})();
`;
