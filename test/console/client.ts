// A cookie-keeping HTTP client for the console (no browser): GET pages, post forms with their CSRF token; reading a
// value a page shows, and the next TOTP code of an authenticator (the tests' own phone).
import { base32Decode, hotp, totpStep } from '../../src/daemon/services/totp.js';

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
    return this.send(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: fields.toString(),
    });
  }

  async login(email: string, password: string): Promise<Page> {
    await this.get('/console/login');
    return this.post('/console/login', { email, password });
  }
}

export function setCookieHeader(p: Page): string | undefined {
  return p.headers.getSetCookie().find((c) => c.startsWith('proxyd_console='));
}

/** The text inside the element with this data-testid (its inner tags dropped); null when the page has none. */
export function testid(body: string, id: string): string | null {
  return (
    new RegExp(`data-testid="${id}"[^>]*>(.*?)</(?:div|span|code|p|dd|ol|td)>`, 's')
      .exec(body)?.[1]
      ?.replace(/<[^>]+>/g, '')
      .trim() ?? null
  );
}

/** A code of `secret` for a time step after every one `used` so far (the window allows now - 1 … now + 1). */
export function nextTotpCode(secret: string, used: { step: number }): string {
  used.step = Math.max(totpStep(Date.now()) - 1, used.step + 1);
  if (used.step > totpStep(Date.now()) + 1)
    throw new Error('no unused TOTP step in the window: the test used three in 30 s');
  return hotp(base32Decode(secret)!, used.step);
}
