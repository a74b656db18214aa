// A cookie-keeping HTTP client for the console (no browser): GET pages, post forms with their CSRF token.

export interface Page {
  status: number;
  location: string | null;
  headers: Headers;
  body: string;
}

export class ConsoleClient {
  cookie: string | null = null;
  /** The CSRF token of the last page that had a form. */
  csrf: string | null = null;

  constructor(
    readonly base: string,
    private readonly extraHeaders: Record<string, string> = {},
  ) {}

  private async send(path: string, init: RequestInit): Promise<Page> {
    const headers = new Headers(init.headers);
    for (const [k, v] of Object.entries(this.extraHeaders)) headers.set(k, v);
    if (this.cookie) headers.set('cookie', this.cookie);
    const res = await fetch(`${this.base}${path}`, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const [name, value] = pair!.split('=');
      if (name !== 'proxyd_console') continue;
      this.cookie = value && !/Expires=Thu, 01 Jan 1970/i.test(c) ? `${name}=${value}` : null;
    }
    const body = await res.text();
    const m = /name="_csrf" value="([^"]+)"/.exec(body);
    if (m) this.csrf = m[1]!;
    return { status: res.status, location: res.headers.get('location'), headers: res.headers, body };
  }

  get(path: string): Promise<Page> {
    return this.send(path, { method: 'GET' });
  }

  /** Posts a form; the CSRF token of the last page is added unless `csrf: false` (or a value to send). */
  post(path: string, form: Record<string, string>, opts: { csrf?: boolean | string } = {}): Promise<Page> {
    const fields = new URLSearchParams(form);
    if (opts.csrf !== false) fields.set('_csrf', typeof opts.csrf === 'string' ? opts.csrf : (this.csrf ?? ''));
    return this.send(path, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: fields.toString() });
  }

  async login(email: string, password: string): Promise<Page> {
    await this.get('/console/login');
    return this.post('/console/login', { email, password });
  }
}

export function setCookieHeader(p: Page): string | undefined {
  return p.headers.getSetCookie().find((c) => c.startsWith('proxyd_console='));
}
