import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteQueue } from '../../../src/gateway/wire/byte-queue.js';
import {
  parseAbsoluteHttpUrl,
  parseAuthority,
  parseProxyAuthorization,
  parseRequestHead,
  parseResponseHead,
} from '../../../src/gateway/wire/http-head.js';
import { originRequestHead, requestFraming } from '../../../src/gateway/listen/forward.js';
import { expectByteByByte, expectTotal, expectWithTrailer } from './parse-harness.js';

const MAX = 16 * 1024;
const req = (b: Buffer) => parseRequestHead(b, MAX);

describe('request head', () => {
  const head = Buffer.from(
    'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Basic YTpi\r\n\r\n',
  );
  it('parses byte by byte, and stops at the head when the tunnel bytes follow', () => {
    const want = {
      method: 'CONNECT',
      target: 'example.com:443',
      version: '1.1',
      headers: [
        ['Host', 'example.com:443'],
        ['Proxy-Authorization', 'Basic YTpi'],
      ],
    };
    expect(expectByteByByte(req, head)).toEqual(want);
    expect(expectWithTrailer(req, head, Buffer.from([0x16, 0x03, 0x01, 0, 0xff]))).toEqual(want);
  });
  it('incremental scanning (scanFrom) finds the same end as a full scan', () => {
    let scanned = 0;
    for (let i = 1; i <= head.length; i++) {
      const r = parseRequestHead(head.subarray(0, i), MAX, scanned);
      if (i < head.length) {
        expect(r.kind).toBe('incomplete');
        scanned = i;
      } else expect(r).toMatchObject({ kind: 'ok', consumed: head.length });
    }
  });
  it('keeps header bytes as sent (latin1 round trip, inner spaces, obs-text)', () => {
    const r = req(Buffer.from('GET http://a/ HTTP/1.0\r\nX-A:  v  a l\xe9 \r\n\r\n', 'latin1'));
    expect(r).toMatchObject({ kind: 'ok', value: { version: '1.0', headers: [['X-A', 'v  a l\xe9']] } });
  });
  it('rejects what could smuggle or confuse', () => {
    const bad = [
      'GET http://a/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n', // obs-fold
      'GET http://a/ HTTP/1.1\r\nX : a\r\n\r\n', // space before colon
      'GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n', // bare CR
      'GET http://a/ HTTP/1.1\r\nX: a\nY: b\r\n\r\n', // bare LF
      'GET  http://a/ HTTP/1.1\r\n\r\n',
      'GET http://a/ HTTP/1.1 \r\n\r\n',
      'G(T http://a/ HTTP/1.1\r\n\r\n',
      'GET http://a/\x7f HTTP/1.1\r\n\r\n',
      'X: y\r\n\r\n',
      '\r\n\r\n',
    ];
    for (const s of bad) expect(req(Buffer.from(s, 'latin1')).kind, JSON.stringify(s)).toBe('error');
    expect(req(Buffer.from('GET http://a/ HTTP/2\r\n\r\n'))).toEqual({ kind: 'error', error: 'bad_version' });
    expect(req(Buffer.from('GET http://a/ HTTP/2.0\r\n\r\n'))).toEqual({ kind: 'error', error: 'bad_version' });
    // Not an HTTP-version at all (it is case-sensitive, one digit each side): a malformed request line, 400.
    for (const v of ['http/1.1', 'HTTP/1.10', 'HTTP/1.', 'HTTPS/1.1'])
      expect(req(Buffer.from(`GET http://a/ ${v}\r\n\r\n`)), v).toEqual({ kind: 'error', error: 'bad_start_line' });
    expect(req(Buffer.from('GET / HTTP/1.1\n\n'))).toEqual({ kind: 'error', error: 'bad_start_line' });
  });
  it('enforces the size limit with and without a complete head', () => {
    expect(parseRequestHead(Buffer.from(`GET http://a/ HTTP/1.1\r\nX: ${'a'.repeat(100)}`), 64)).toEqual({
      kind: 'error',
      error: 'too_large',
    });
    expect(parseRequestHead(Buffer.from(`GET http://a/ HTTP/1.1\r\nX: ${'a'.repeat(100)}\r\n\r\n`), 64)).toEqual({
      kind: 'error',
      error: 'too_large',
    });
  });
  it('never throws on junk', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.boolean(), (bytes, withEnd) => {
        const buf = Buffer.concat([Buffer.from(bytes), withEnd ? Buffer.from('\r\n\r\n') : Buffer.alloc(0)]);
        expectTotal(req, buf);
        expectTotal((b) => parseResponseHead(b, MAX), buf);
      }),
      { numRuns: 3000 },
    );
  });
  it('random well-formed heads parse the same whole or split', () => {
    const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/);
    const value = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,30}[\x21-\x7e])?$/);
    fc.assert(
      fc.property(token, fc.array(fc.tuple(token, value), { maxLength: 8 }), fc.nat(), (method, headers, cut) => {
        const text = `${method} http://h/p HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`;
        const buf = Buffer.from(text, 'latin1');
        const whole = req(buf);
        expect(whole).toMatchObject({ kind: 'ok', consumed: buf.length, value: { method, headers } });
        expect(req(buf.subarray(0, cut % buf.length)).kind).toBe('incomplete');
      }),
    );
  });
});

describe('response head', () => {
  it('status line with and without a reason', () => {
    expect(parseResponseHead(Buffer.from('HTTP/1.1 204\r\n\r\n'), MAX)).toMatchObject({
      kind: 'ok',
      value: { status: 204, reason: '' },
    });
    expect(parseResponseHead(Buffer.from('HTTP/1.0 404 Not  Found\r\nA: b\r\n\r\nbody'), MAX)).toMatchObject({
      kind: 'ok',
      consumed: 33,
      value: { version: '1.0', status: 404, reason: 'Not  Found' },
    });
    expect(parseResponseHead(Buffer.from('HTTP/1.1 20 OK\r\n\r\n'), MAX).kind).toBe('error');
  });

  it('bare LF line ends from an origin are taken as line ends (RFC 9112 2.2), a bare CR is not', () => {
    const crlf = parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nok'), MAX);
    for (const text of [
      'HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok',
      'HTTP/1.1 200 OK\r\nContent-Length: 2\nX-A: b\r\n\nok',
      'HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\r\nok',
    ]) {
      const buf = Buffer.from(text);
      const r = parseResponseHead(buf, MAX);
      expect(r, JSON.stringify(text)).toMatchObject({ kind: 'ok', consumed: buf.length - 2 });
      if (r.kind === 'ok' && crlf.kind === 'ok') expect(r.value).toEqual(crlf.value);
      expect(parseResponseHead(buf.subarray(0, buf.length - 3), MAX).kind).toBe('incomplete');
    }
    expect(parseResponseHead(Buffer.from('HTTP/1.1 200 OK\rX-A: b\n\n'), MAX).kind).toBe('error');
    expect(parseResponseHead(Buffer.from(`HTTP/1.1 200 OK\nX: ${'a'.repeat(100)}\n\n`), 64)).toEqual({
      kind: 'error',
      error: 'too_large',
    });
    // A bare CR right before a line break is a bare CR too (each line loses exactly one CR before its LF).
    for (const text of ['HTTP/1.1 200 OK\r\nX-A: b\r\r\n\r\n', 'HTTP/1.1 200 OK\r\r\n\r\n']) {
      expect(parseResponseHead(Buffer.from(text), MAX).kind, JSON.stringify(text)).toBe('error');
    }
  });

  it('a head fed a byte at a time, each call scanning only what is new (scanFrom), is found whole wherever its end splits', () => {
    for (const text of [
      'HTTP/1.1 200 OK\r\nX-A: b\r\n\r\nok',
      'HTTP/1.1 200 OK\nX-A: b\n\nok',
      'HTTP/1.1 200 OK\nX-A: b\n\r\nok',
      'HTTP/1.1 200 OK\r\nX-A: b\r\n\nok',
    ]) {
      const all = Buffer.from(text);
      let scanned = 0;
      let found = -1;
      for (let n = 1; n <= all.length && found < 0; n++) {
        const r = parseResponseHead(all.subarray(0, n), MAX, scanned);
        if (r.kind === 'incomplete') scanned = n;
        else {
          expect(r, JSON.stringify(text)).toMatchObject({
            kind: 'ok',
            consumed: all.length - 2,
            value: { status: 200, headers: [['X-A', 'b']] },
          });
          found = n;
        }
      }
      expect(found, JSON.stringify(text)).toBe(all.length - 2);
    }
  });
});

describe('targets', () => {
  it('authorities', () => {
    expect(parseAuthority('example.com:443')).toEqual({ host: 'example.com', port: 443 });
    expect(parseAuthority('[2001:db8::1]:8080')).toEqual({ host: '2001:db8::1', port: 8080 });
    expect(parseAuthority('1.2.3.4:1')).toEqual({ host: '1.2.3.4', port: 1 });
    for (const bad of [
      'example.com',
      'example.com:0',
      'example.com:65536',
      'a b:1',
      ':80',
      '[::1]80',
      'ex_ample..com:1',
      'a:+1',
      '[zz]:1',
      'a@b:1',
    ]) {
      expect(parseAuthority(bad), bad).toBeNull();
    }
  });
  it('absolute http URLs', () => {
    expect(parseAbsoluteHttpUrl('http://example.com/a?b#c')).toEqual({
      host: 'example.com',
      port: 80,
      authority: 'example.com',
      path: '/a?b',
    });
    expect(parseAbsoluteHttpUrl('HTTP://[::1]:81')).toEqual({
      host: '::1',
      port: 81,
      authority: '[::1]:81',
      path: '/',
    });
    expect(parseAbsoluteHttpUrl('http://h?x=1')).toMatchObject({ path: '/?x=1' });
    for (const bad of ['https://example.com/', '/relative', 'http://user:pw@h/', 'http:///x', 'ftp://h/']) {
      expect(parseAbsoluteHttpUrl(bad), bad).toBeNull();
    }
  });
});

describe('Proxy-Authorization', () => {
  it('Basic credentials, colon in the password, UTF-8', () => {
    const enc = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;
    expect(parseProxyAuthorization([enc('alice:pa:ss')])).toEqual({ username: 'alice', password: 'pa:ss' });
    expect(parseProxyAuthorization([`basic  ${Buffer.from('ü:ö').toString('base64')}`])).toEqual({
      username: 'ü',
      password: 'ö',
    });
    expect(parseProxyAuthorization([])).toBeNull();
    for (const bad of [
      [enc('nocolon')],
      ['Bearer abc'],
      ['Basic !!!'],
      ['Basic YTpi', 'Basic YTpi'],
      ['Basic YTpiYw'],
    ]) {
      expect(parseProxyAuthorization(bad)).toBe('invalid');
    }
  });

  it('credentials that are not UTF-8 are ISO-8859-1 (Python requests, Java encode Basic so without a charset)', () => {
    const latin1 = (s: string) => `Basic ${Buffer.from(s, 'latin1').toString('base64')}`;
    expect(parseProxyAuthorization([latin1('dora:pässwörd-lang')])).toEqual({
      username: 'dora',
      password: 'pässwörd-lang',
    });
    expect(parseProxyAuthorization([latin1('jürgen:geheim')])).toEqual({ username: 'jürgen', password: 'geheim' });
    // Valid UTF-8 stays UTF-8, even where its bytes would also read as ISO-8859-1.
    expect(parseProxyAuthorization([`Basic ${Buffer.from('dora:pässwörd-lang').toString('base64')}`])).toEqual({
      username: 'dora',
      password: 'pässwörd-lang',
    });
  });

  it('accepts exactly padded base64 (RFC 4648): every string of its alphabet and a few strays, against the grammar', () => {
    // The grammar as a regular expression (the parser checks it with a loop instead, once per connection).
    const grammar = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
    const alphabet = ['Y', 'T', 'p', 'i', '0', '+', '/', '=', '-', '_', '.', '\u00e9'];
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 5000; i++) {
      let b64 = '';
      for (let n = rand(13); n > 0; n--) b64 += alphabet[rand(alphabet.length)];
      const got = parseProxyAuthorization([`Basic ${b64}`]);
      const decodesToPair = grammar.test(b64) && Buffer.from(b64, 'base64').toString('utf8').includes(':');
      expect(got !== 'invalid', b64).toBe(decodesToPair);
    }
    for (const b64 of ['YTpi', 'YTpiYw==', 'YTpiY2Q='])
      expect(parseProxyAuthorization([`Basic ${b64}`])).not.toBe('invalid');
    for (const b64 of ['====', 'YTp=Yw==', 'YTpiY===', 'YTpiYw=', 'YTpiYw=x'])
      expect(parseProxyAuthorization([`Basic ${b64}`])).toBe('invalid');
  });
});

describe('forwarding helpers', () => {
  const head = (h: Array<[string, string]>, version: '1.0' | '1.1' = '1.1') => ({
    method: 'POST',
    target: 'http://x/',
    version,
    headers: h,
  });
  it('request framing refuses smuggling shapes', () => {
    expect(requestFraming(head([['Content-Length', '5']]))).toMatchObject({ kind: 'length', remaining: 5 });
    expect(requestFraming(head([['Content-Length', '5, 5']]))).toMatchObject({ kind: 'length', remaining: 5 });
    expect(requestFraming(head([['Transfer-Encoding', 'gzip, chunked']]))).toMatchObject({ kind: 'chunked' });
    expect(requestFraming(head([]))).toEqual({ kind: 'none' });
    for (const h of [
      [
        ['Content-Length', '5'],
        ['Transfer-Encoding', 'chunked'],
      ],
      [['Content-Length', '5, 6']],
      [['Content-Length', '-1']],
      [['Content-Length', '0x10']],
      [['Transfer-Encoding', 'chunked, gzip']],
    ] as Array<Array<[string, string]>>) {
      expect(requestFraming(head(h)), JSON.stringify(h)).toHaveProperty('error');
    }
    expect(requestFraming(head([['Transfer-Encoding', 'chunked']], '1.0'))).toHaveProperty('error');
  });
  it('origin head drops hop-by-hop and proxy headers, sets Host and Connection: close', () => {
    const out = originRequestHead(
      {
        method: 'GET',
        target: 'http://h:8/p',
        version: '1.1',
        headers: [
          ['Host', 'other'],
          ['Connection', 'keep-alive, X-Secret'],
          ['X-Secret', '1'],
          ['Proxy-Authorization', 'Basic YTpi'],
          ['Proxy-Connection', 'keep-alive'],
          ['Keep-Alive', '300'],
          ['TE', 'trailers'],
          ['Upgrade', 'websocket'],
          ['Accept', '*/*'],
          ['Content-Length', '0'],
        ],
      },
      'h:8',
      '/p',
    ).toString('latin1');
    expect(out).toBe(
      'GET /p HTTP/1.1\r\nHost: h:8\r\nAccept: */*\r\nContent-Length: 0\r\nVia: 1.1 proxyd\r\nConnection: close\r\n\r\n',
    );
  });
});

describe('ByteQueue', () => {
  it('keeps every byte across appends and consumes', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.uint8Array({ maxLength: 50 }), fc.nat(60))), (ops) => {
        const q = new ByteQueue();
        let model = Buffer.alloc(0);
        for (const [chunk, take] of ops) {
          q.append(Buffer.from(chunk));
          model = Buffer.concat([model, Buffer.from(chunk)]);
          const n = Math.min(take, model.length);
          q.consume(n);
          model = model.subarray(n);
          expect(q.view().equals(model)).toBe(true);
        }
      }),
    );
  });
});

describe('request head: line breaks and field whitespace', () => {
  const parse = (s: string) => parseRequestHead(Buffer.from(s, 'latin1'), 8192);
  it.each([
    'CONNECT a:1 HTTP/1.1\r\nHost: a\rb\r\n\r\n',
    'CONNECT a:1 HTTP/1.1\r\nHost: a\nb\r\n\r\n',
    'CONNECT a:1 HTTP/1.1\r\nHost: a\r\r\n\r\n',
    'CONNECT a:1 HTTP/1.1\r\nX: 1\r\n\nY: 2\r\n\r\n',
  ])('refuses a CR or LF that is not part of a CRLF: %j', (head) => {
    expect(parse(head)).toMatchObject({ kind: 'error', error: 'bad_header' });
  });
  it('trims spaces and tabs around a value, and only those', () => {
    const r = parse('CONNECT a:1 HTTP/1.1\r\nA: \t x y \t\r\nB:\r\nC:   \r\nD:z\r\n\r\n');
    expect(r.kind).toBe('ok');
    if (r.kind === 'ok')
      expect(r.value.headers).toEqual([
        ['A', 'x y'],
        ['B', ''],
        ['C', ''],
        ['D', 'z'],
      ]);
  });
});
