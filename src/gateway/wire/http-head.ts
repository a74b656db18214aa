// Pure HTTP/1.x head parsing for the proxy listener: request heads (absolute-form, CONNECT),
// response heads (forward path), targets and Basic credentials. Never throws on junk.
import { isUtf8 } from 'node:buffer';
import { INCOMPLETE, fail, type ParseResult } from './parse-result.js';

export type HeadError = 'too_large' | 'bad_start_line' | 'bad_version' | 'bad_header';

export type Header = [name: string, value: string];

export interface RequestHead {
  method: string;
  target: string;
  version: '1.0' | '1.1';
  headers: Header[];
}

export interface ResponseHead {
  version: '1.0' | '1.1';
  status: number;
  reason: string;
  headers: Header[];
}

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
// RFC 9110 token characters.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** The bytes TOKEN allows, by value. */
const TOKEN_BYTE: readonly boolean[] = Array.from({ length: 256 }, (_, b) => TOKEN.test(String.fromCharCode(b)));
// Field value: visible ASCII, obs-text, SP and HTAB; no CR, LF, NUL or other controls.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// Request target: visible ASCII only (no spaces, controls or raw non-ASCII).
const TARGET = /^[\x21-\x7e]+$/;

/** Where the head ends (index just past the blank line), or -1. */
function headEnd(buf: Buffer, maxBytes: number, scanFrom: number): number | 'too_large' {
  const i = buf.indexOf(CRLFCRLF, Math.max(0, scanFrom - 3));
  if (i === -1) return buf.length > maxBytes ? 'too_large' : -1;
  const end = i + 4;
  return end > maxBytes ? 'too_large' : end;
}

function parseVersion(s: string): '1.0' | '1.1' | null {
  if (s === 'HTTP/1.1') return '1.1';
  if (s === 'HTTP/1.0') return '1.0';
  return null;
}

function parseFields(lines: string[]): Header[] | null {
  const headers: Header[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) return null; // also rejects obs-fold lines, which start with SP/HTAB
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return null; // no whitespace before the colon (RFC 9112 5.1)
    const value = trimOws(line.slice(colon + 1));
    if (!FIELD_VALUE.test(value)) return null;
    headers.push([name, value]);
  }
  return headers;
}

// A CR not before LF, or an LF not after CR: a line break other than CRLF.
const STRAY_BREAK = /\r(?!\n)|(?<!\r)\n/;

function splitLines(buf: Buffer, end: number): string[] | null {
  const text = buf.toString('latin1', 0, end - 4);
  return STRAY_BREAK.test(text) ? null : text.split('\r\n');
}

/** Without the optional whitespace (SP, HTAB) around a field value; no regex per header. */
function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/** `scanFrom`: bytes already known not to end the head (so byte-by-byte input stays linear). */
export function parseRequestHead(buf: Buffer, maxBytes: number, scanFrom = 0): ParseResult<RequestHead, HeadError> {
  const end = headEnd(buf, maxBytes, scanFrom);
  if (end === 'too_large') return fail('too_large');
  if (end === -1) {
    // A first byte no method starts with (a SOCKS5 greeting's 0x05, a TLS ClientHello's 0x16): not HTTP, and
    // never will be; answered at once instead of at the header deadline, so the client learns it is the HTTP port.
    if (buf.length > 0 && !TOKEN_BYTE[buf[0]!]) return fail('bad_start_line');
    // A bare LF line ending will never produce CRLFCRLF: say so early instead of waiting.
    const lf = buf.indexOf(0x0a);
    if (lf === 0 || (lf > 0 && buf[lf - 1] !== 0x0d)) return fail('bad_start_line');
    return INCOMPLETE;
  }
  const lines = splitLines(buf, end);
  if (!lines) return fail('bad_header');
  const start = lines[0] ?? '';
  const parts = start.split(' ');
  if (parts.length !== 3) return fail('bad_start_line');
  const [method, target, versionText] = parts as [string, string, string];
  if (!TOKEN.test(method) || !TARGET.test(target)) return fail('bad_start_line');
  const version = parseVersion(versionText);
  // HTTP-version is `HTTP/` DIGIT `.` DIGIT, case-sensitive (RFC 9112 2.3): another version (or `HTTP/2`) is 505, anything else 400.
  if (!version) return fail(/^HTTP\/[0-9](\.[0-9])?$/.test(versionText) ? 'bad_version' : 'bad_start_line');
  const headers = parseFields(lines.slice(1));
  if (!headers) return fail('bad_header');
  return { kind: 'ok', value: { method, target, version, headers }, consumed: end };
}

/**
 * Where a response head ends, its blank line ended by CRLF or a bare LF: an origin's bare LFs are line ends
 * (RFC 9112 2.2 allows it; some devices and old CGI send them). `text`: where the last field line's LF is (its
 * CR, if any, is still part of the text: each line loses exactly one). `scanFrom`: bytes already looked through.
 */
function responseHeadEnd(
  buf: Buffer,
  maxBytes: number,
  scanFrom: number,
): { end: number; text: number } | -1 | 'too_large' {
  for (let i = buf.indexOf(0x0a, Math.max(0, scanFrom - 2)); i !== -1; i = buf.indexOf(0x0a, i + 1)) {
    const j = buf[i + 1] === 0x0d ? i + 2 : i + 1;
    if (buf[j] !== 0x0a) continue;
    if (j + 1 > maxBytes) return 'too_large';
    return { end: j + 1, text: i };
  }
  return buf.length > maxBytes ? 'too_large' : -1;
}

export function parseResponseHead(buf: Buffer, maxBytes: number, scanFrom = 0): ParseResult<ResponseHead, HeadError> {
  const found = responseHeadEnd(buf, maxBytes, scanFrom);
  if (found === 'too_large') return fail('too_large');
  if (found === -1) return INCOMPLETE;
  const end = found.end;
  // Each line without its CR before the LF; a CR anywhere else is not a line end.
  const lines = buf
    .toString('latin1', 0, found.text)
    .split('\n')
    .map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (lines.some((l) => l.includes('\r'))) return fail('bad_header');
  const m = /^(HTTP\/1\.[01]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/.exec(lines[0] ?? '');
  if (!m) return fail('bad_start_line');
  const version = parseVersion(m[1] as string);
  if (!version) return fail('bad_version');
  const headers = parseFields(lines.slice(1));
  if (!headers) return fail('bad_header');
  return {
    kind: 'ok',
    value: { version, status: Number(m[2]), reason: m[3] ?? '', headers },
    consumed: end,
  };
}

/** Every value of a header (case-insensitive name). */
export function headerValues(headers: Header[], name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  for (const [n, v] of headers) if (n.toLowerCase() === lower) out.push(v);
  return out;
}

/** Comma-separated tokens of all values of a header, lower-cased. */
export function headerTokens(headers: Header[], name: string): string[] {
  return headerValues(headers, name)
    .flatMap((v) => v.split(','))
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t.length > 0);
}

export interface Authority {
  /** Host as given: a name, an IPv4 literal, or an IPv6 literal without brackets. */
  host: string;
  port: number;
}

const REG_NAME = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$/;
const IPV6_CHARS = /^[0-9A-Fa-f:.]+$/;

/** A host name (DNS name or IPv4 literal) the gateway is willing to resolve. */
export function isValidHostName(host: string): boolean {
  return host.length > 0 && host.length <= 253 && REG_NAME.test(host);
}

function parsePort(s: string): number | null {
  if (!/^[0-9]{1,5}$/.test(s)) return null;
  const n = Number(s);
  return n >= 1 && n <= 65535 ? n : null;
}

/** `host:port`, `[v6]:port`; port required unless defaultPort is given. */
export function parseAuthority(s: string, defaultPort?: number): Authority | null {
  let host: string;
  let portText: string | undefined;
  if (s.startsWith('[')) {
    const close = s.indexOf(']');
    if (close < 0) return null;
    host = s.slice(1, close);
    const rest = s.slice(close + 1);
    if (rest === '') portText = undefined;
    else if (rest.startsWith(':')) portText = rest.slice(1);
    else return null;
    if (!IPV6_CHARS.test(host) || !host.includes(':')) return null;
  } else {
    const colon = s.lastIndexOf(':');
    if (colon < 0) {
      host = s;
      portText = undefined;
    } else {
      host = s.slice(0, colon);
      portText = s.slice(colon + 1);
    }
    if (!isValidHostName(host)) return null;
  }
  let port: number | null;
  if (portText === undefined) port = defaultPort ?? null;
  else port = parsePort(portText);
  if (port === null) return null;
  return { host, port };
}

export interface AbsoluteTarget extends Authority {
  /** The authority as sent (for the Host header). */
  authority: string;
  /** origin-form: path and query, at least "/". */
  path: string;
}

/** `http://authority/path?query` (absolute-form, http scheme only, no userinfo). */
export function parseAbsoluteHttpUrl(target: string): AbsoluteTarget | null {
  const m = /^[Hh][Tt][Tt][Pp]:\/\/([^/?#]*)([^#]*)(?:#.*)?$/.exec(target);
  if (!m) return null;
  const authority = m[1] as string;
  if (authority.includes('@') || authority === '') return null;
  const parsed = parseAuthority(authority, 80);
  if (!parsed) return null;
  let path = m[2] as string;
  if (path === '') path = '/';
  else if (path.startsWith('?')) path = '/' + path;
  return { ...parsed, authority, path };
}

export interface Credentials {
  username: string;
  password: string;
}

/** Padded base64 (RFC 4648 section 4): groups of four of A-Z a-z 0-9 + /, `=` only as the last one or two. */
function isBase64(s: string): boolean {
  const n = s.length;
  if (n % 4 !== 0) return false;
  let end = n;
  if (n > 0 && s.charCodeAt(n - 1) === 0x3d) end = s.charCodeAt(n - 2) === 0x3d ? n - 2 : n - 1;
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2f;
    if (!ok) return false;
  }
  return true;
}

/**
 * Credentials' bytes as text (Basic and RFC 1929 alike): UTF-8 when they are UTF-8, else ISO-8859-1, what Python's
 * requests and Java send for a password with accents (bytes that are not UTF-8 cannot be a UTF-8 password). Only a
 * decoding that needed U+FFFD can have come from bytes that are not UTF-8.
 */
export function credentialText(b: Buffer, from: number, to: number): string {
  const s = b.toString('utf8', from, to);
  return s.includes('\ufffd') && !isUtf8(b.subarray(from, to)) ? b.toString('latin1', from, to) : s;
}

/**
 * Proxy-Authorization values -> credentials. `null`: none given; 'invalid': given but unusable
 * (several headers, another scheme, bad base64, no colon) — treated as wrong credentials.
 */
export function parseProxyAuthorization(values: string[]): Credentials | null | 'invalid' {
  if (values.length === 0) return null;
  if (values.length > 1) return 'invalid';
  const m = /^([A-Za-z]+) +([^ ]+) *$/.exec(values[0] as string);
  if (!m || (m[1] as string).toLowerCase() !== 'basic') return 'invalid';
  const b64 = m[2] as string;
  if (!isBase64(b64)) return 'invalid';
  const raw = Buffer.from(b64, 'base64');
  // RFC 7617 leaves the charset open.
  const decoded = credentialText(raw, 0, raw.length);
  const colon = decoded.indexOf(':');
  if (colon < 0) return 'invalid';
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
