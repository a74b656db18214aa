// A tiny typed HTML template: every interpolated value is escaped unless it is already Html.
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// Control characters other than tab and line breaks (C0, DEL, C1) and Unicode's bidirectional controls: text from
// elsewhere (a remark, a username) would make the page invalid (NUL) or reorder what it shows (U+202E).
// The plain marks of right-to-left text (U+200E, U+200F, U+061C) stay: they reorder nothing around them.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * The console's one HTML escaper (`'` too, so a value is safe in either quote); the template below uses it. A control
 * character shows as its escape, `\u{202e}`, as proxyctl shows it.
 */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!).replace(CONTROL, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);
}

function render(v: HtmlValue): string {
  if (v instanceof Html) return v.value;
  if (v === null || v === undefined || v === false) return '';
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

/** Marks trusted markup (only for constants written in this codebase). */
export const raw = (s: string): Html => new Html(s);
