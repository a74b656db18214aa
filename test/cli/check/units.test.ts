// Pure helpers of the check: URL parsing and redaction, echo parsing, SOCKS5 encoding, heads, TLS reasons, diagnosis.
import * as commander from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../../src/cli/main.js';
import { diagnose } from '../../../src/cli/check/diagnosis.js';
import { parseEgressIp } from '../../../src/cli/check/egress-ip.js';
import { parseProxyReply, peerText, realmOf } from '../../../src/cli/check/reader.js';
import { connectRequest, greeting, socksReplyName, userPassRequest } from '../../../src/cli/check/socks5.js';
import { classifyTlsError } from '../../../src/cli/check/tls.js';
import { STAGE_NAMES, type FailureCause } from '../../../src/cli/check/types.js';
import { CheckUsageError, parseProxyUrl, parseTargetUrl, redactUrl, scrub } from '../../../src/cli/check/urls.js';

describe('proxy URL', () => {
  it('refuses an API token pasted as the proxy or the target: never looked up in DNS, never printed', () => {
    const token = `ak${'0a'.repeat(10)}.${'Ab9_-'.repeat(8)}xyz`;
    for (const raw of [token, `http://${token}:3128`, `socks5h://${token}`, `http://u:${token}@127.0.0.1:3128`]) {
      expect(() => parseProxyUrl(raw), raw).toThrow(CheckUsageError);
      try {
        parseProxyUrl(raw);
      } catch (err) {
        expect((err as Error).message).toMatch(/API token/);
        expect((err as Error).message.toLowerCase()).not.toContain(token.split('.')[1]!.toLowerCase());
      }
    }
    expect(() => parseTargetUrl(`https://${token}/`)).toThrow(/API token/);
    expect(() => parseTargetUrl(token)).toThrow(/API token/);
    // In the query it is a request the target may expect: sent, and shown redacted (the e2e report test).
    expect(parseTargetUrl(`https://example.com/?api_key=${token}`).host).toBe('example.com');
  });

  it('parses http and socks URLs with credentials and redacts the password', () => {
    const p = parseProxyUrl('http://alice:p%40ss@gw.example.com:3128');
    expect(p).toMatchObject({
      protocol: 'http',
      host: 'gw.example.com',
      port: 3128,
      username: 'alice',
      password: 'p@ss',
      redacted: 'http://alice:****@gw.example.com:3128',
    });
    expect(parseProxyUrl('socks5h://u:p@[::1]:1080')).toMatchObject({
      protocol: 'socks5h',
      host: '::1',
      redacted: 'socks5h://u:****@[::1]:1080',
    });
    expect(parseProxyUrl('socks5://127.0.0.1')).toMatchObject({
      port: 1080,
      username: null,
      password: null,
      redacted: 'socks5://127.0.0.1:1080',
    });
    expect(parseProxyUrl('127.0.0.1:3128')).toMatchObject({ protocol: 'http', port: 3128 });
  });

  it('rejects unsupported schemes and never echoes the password', () => {
    for (const raw of ['https://u:hunter2@h:1', 'socks4://u:hunter2@h:1', 'http://u:hunter2@', 'ftp://u:hunter2@x']) {
      try {
        parseProxyUrl(raw);
        expect.unreachable(raw);
      } catch (err) {
        expect(err).toBeInstanceOf(CheckUsageError);
        expect((err as Error).message).not.toContain('hunter2');
      }
    }
  });

  it('redactUrl and scrub', () => {
    expect(redactUrl('connect to http://bob:secret@1.2.3.4:8080 failed')).toBe(
      'connect to http://bob:****@1.2.3.4:8080 failed',
    );
    expect(redactUrl('socks5h://:pw@h')).toBe('socks5h://:****@h');
    expect(scrub('bad pass p@ss and p%40ss', 'p@ss')).toBe('bad pass **** and ****');
  });

  it('scrub masks the password where it stands alone, not inside words (masking there would reveal it)', () => {
    // A password "ok" used to turn the dns detail into "no lo****up", and "1" every digit 1 of an address.
    expect(scrub('127.0.0.1 (IP literal, no lookup)', 'ok')).toBe('127.0.0.1 (IP literal, no lookup)');
    expect(scrub('connected to 127.0.0.1:3128', 'connect')).toBe('connected to 127.0.0.1:3128');
    expect(scrub('wrong password "ok" for alice:ok', 'ok')).toBe('wrong password "****" for alice:****');
    expect(scrub('x=S3cret|Pass.', 'S3cret|Pass')).toBe('x=****.');
  });

  it('target URL', () => {
    expect(parseTargetUrl('https://api.ipify.org/?format=json')).toMatchObject({
      protocol: 'https',
      host: 'api.ipify.org',
      port: 443,
      path: '/?format=json',
      hostHeader: 'api.ipify.org',
    });
    expect(parseTargetUrl('http://[::1]:81/ip')).toMatchObject({ host: '::1', port: 81, hostHeader: '[::1]:81' });
    expect(() => parseTargetUrl('ftp://x')).toThrow(CheckUsageError);
  });
});

describe('egress IP parsing', () => {
  it.each([
    ['{"ip":"203.0.113.7"}', '203.0.113.7'],
    ['{"origin":"203.0.113.7, 10.0.0.1"}', '203.0.113.7'],
    ['203.0.113.7\n', '203.0.113.7'],
    ['  2001:db8::1 ', '2001:db8::1'],
    ['{"ip":"nope"}', null],
    ['<html>203.0.113.7</html>', null],
    ['', null],
    ['{broken', null],
  ])('%j -> %s', (body, ip) => expect(parseEgressIp(body)).toBe(ip));
});

describe('SOCKS5 encoding', () => {
  it('greeting offers exactly one method', () => {
    expect([...greeting(true)]).toEqual([5, 1, 2]);
    expect([...greeting(false)]).toEqual([5, 1, 0]);
  });
  it('RFC 1929 request', () => {
    expect([...userPassRequest('ab', 'xyz')]).toEqual([1, 2, 97, 98, 3, 120, 121, 122]);
  });
  it('CONNECT request for IPv4, domain and IPv6', () => {
    expect([...connectRequest('10.1.2.3', 443)]).toEqual([5, 1, 0, 1, 10, 1, 2, 3, 1, 187]);
    expect([...connectRequest('ab.c', 80)]).toEqual([5, 1, 0, 3, 4, 97, 98, 46, 99, 0, 80]);
    const v6 = connectRequest('2001:db8::1', 1);
    expect(v6[3]).toBe(4);
    expect(v6.subarray(4, 20).toString('hex')).toBe('20010db8000000000000000000000001');
    expect(connectRequest('::ffff:1.2.3.4', 1).subarray(4, 20).toString('hex')).toBe(
      '00000000000000000000ffff01020304',
    );
  });
  it('reply codes are named', () => {
    expect(socksReplyName(2)).toBe('connection not allowed by ruleset');
    expect(socksReplyName(4)).toBe('host unreachable');
    expect(socksReplyName(5)).toBe('connection refused');
    expect(socksReplyName(0x42)).toBe('unassigned reply code');
  });
});

describe('HTTP heads', () => {
  it('parses status, reason and headers', () => {
    const h = parseProxyReply(
      'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="proxy"\r\nX: 1',
    );
    expect(h?.status).toBe(407);
    expect(h?.reason).toBe('Proxy Authentication Required');
    expect(realmOf(h?.headers.get('proxy-authenticate')?.[0])).toBe('proxy');
    expect(parseProxyReply('SSH-2.0-OpenSSH')).toBeNull();
    expect(realmOf('Basic realm=corp, charset="UTF-8"')).toBe('corp');
    expect(realmOf('Basic')).toBeNull();
    expect(peerText(Buffer.from([0x05, 0xff, 0x41]))).toBe('A');
  });
});

describe('TLS error reasons', () => {
  it.each([
    ['CERT_HAS_EXPIRED', 'expired'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'self_signed'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'self_signed'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'untrusted'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'wrong_host'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'handshake'],
    ['SOMETHING_ELSE', 'other'],
  ])('%s -> %s', (code, reason) => {
    expect(classifyTlsError(Object.assign(new Error('x'), { code }), 'h').reason).toBe(reason);
  });

  it("a handshake failure names OpenSSL's reason, not its error queue line", () => {
    // What Node 22/24 throw for an http:// port reached as https://.
    const message =
      '40BD64ADC87F0000:error:0A00010B:SSL routines:tls_validate_record_header:wrong version number:../deps/openssl/openssl/ssl/record/methods/tlsany_meth.c:77:\n';
    expect(
      classifyTlsError(
        Object.assign(new Error(message), { code: 'ERR_SSL_WRONG_VERSION_NUMBER', reason: 'wrong version number' }),
        'h',
      ).text,
    ).toBe('handshake failed: wrong version number');
    expect(
      classifyTlsError(Object.assign(new Error(message), { code: 'ERR_SSL_WRONG_VERSION_NUMBER' }), 'h').text,
    ).toBe('handshake failed: wrong version number');
    expect(classifyTlsError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }), 'h').text).toBe(
      'handshake failed: socket hang up',
    );
  });
});

describe('diagnosis', () => {
  const proxy = parseProxyUrl('http://u:pw@gw:3128');
  const target = parseTargetUrl('https://t.example/');
  const causes: Array<[(typeof STAGE_NAMES)[number], FailureCause]> = [
    ['dns', { kind: 'dns', code: 'ENOTFOUND' }],
    ['dns', { kind: 'dns', code: 'EAI_AGAIN' }],
    ['tcp', { kind: 'tcp', code: 'ECONNREFUSED' }],
    ['tcp', { kind: 'tcp', code: 'EHOSTUNREACH' }],
    ['auth', { kind: 'proxy_auth_required', realm: 'proxy', withCredentials: true }],
    ['auth', { kind: 'proxy_auth_required', realm: 'proxy', withCredentials: false }],
    ['auth', { kind: 'socks_no_method', withCredentials: false }],
    ['auth', { kind: 'socks_auth_failed', status: 1 }],
    ['auth', { kind: 'closed', during: 'x' }],
    ['connect', { kind: 'http_connect_status', status: 429, reason: '', body: '' }],
    ['connect', { kind: 'socks_reply', code: 1 }],
    ['connect', { kind: 'socks_reply', code: 8 }],
    ['tls', { kind: 'tls', code: 'X', reason: 'handshake' }],
    ['status', { kind: 'target_status', status: 404 }],
    ...STAGE_NAMES.map((s) => [s, { kind: 'timeout', ms: 5 }] as [typeof s, FailureCause]),
  ];
  it.each(causes)('%s %j gives one line', (stage, cause) => {
    const line = diagnose({
      failed: { stage, cause },
      proxy,
      target,
      egressIp: null,
      directIp: null,
      direct: 'skipped',
    });
    expect(line).toMatch(/^[A-Z].+[.:].*$/);
    expect(line).not.toContain('\n');
    expect(line).not.toContain('pw');
  });
  it("a gateway's 403 is diagnosed by what it says (target rules, plan, traffic), not always as a private target", () => {
    const line = (body: string) =>
      diagnose({
        failed: { stage: 'connect', cause: { kind: 'http_connect_status', status: 403, reason: 'Forbidden', body } },
        proxy,
        target,
        egressIp: null,
        directIp: null,
        direct: 'skipped',
      });
    expect(line('target denied by account policy')).toMatch(/^The account's target rules deny t\.example/);
    expect(line('target denied by service policy')).toMatch(/^The provider's own target rules deny/);
    expect(line('the plan has expired')).toMatch(/^The account's plan has expired/);
    expect(line('the traffic limit for this period is used up')).toMatch(/^The account has used up its traffic/);
    expect(line('target address not allowed')).toMatch(/blocks private, loopback and reserved addresses/);
    expect(line('')).toMatch(/blocks private, loopback and reserved addresses/);
    const socks = diagnose({
      failed: { stage: 'connect', cause: { kind: 'socks_reply', code: 2 } },
      proxy,
      target,
      egressIp: null,
      directIp: null,
      direct: 'skipped',
    });
    expect(socks).toMatch(/target rules, an expired plan, a used-up traffic limit/);
  });

  it('names an IPv6 proxy as [HOST]:PORT, not ::1:1080', () => {
    const v6 = parseProxyUrl('socks5h://[::1]:1080');
    const base = { proxy: v6, target, egressIp: null, directIp: null, direct: 'skipped' } as const;
    const notSocks = diagnose({ ...base, failed: { stage: 'auth', cause: { kind: 'not_socks5', firstByte: 0x48 } } });
    const notProxy = diagnose({ ...base, failed: { stage: 'status', cause: { kind: 'not_a_proxy', status: 200 } } });
    const noVia = diagnose({ ...base, failed: null, egressIp: '1.1.1.1', viaMissing: true });
    for (const line of [notSocks, notProxy, noVia]) {
      expect(line).toContain('[::1]:1080');
      expect(line).not.toMatch(/(^|[^[])::1:1080/);
    }
  });

  it('egress comparisons', () => {
    const base = { failed: null, proxy, target };
    expect(diagnose({ ...base, egressIp: '1.1.1.1', directIp: '1.1.1.1', direct: 'ok' })).toMatch(/^Warning/);
    expect(diagnose({ ...base, egressIp: '1.1.1.1', directIp: '2.2.2.2', direct: 'ok' })).toMatch(/^All stages passed/);
    expect(diagnose({ ...base, egressIp: '1.1.1.1', directIp: null, direct: { error: 'ECONNREFUSED' } })).toMatch(
      /direct request failed \(ECONNREFUSED\)/,
    );
  });
});

describe('the check command', () => {
  it('has its options; --direct and --no-direct both parse', () => {
    const program = buildProgram(commander, async () => {}, {
      stdout: { write: () => true },
      stderr: { write: () => true },
    });
    const check = program.commands.find((c) => c.name() === 'check')!;
    expect(check.options.map((o) => o.long)).toEqual([
      '--proxy',
      '--target',
      '--timeout',
      '--ca',
      '--direct',
      '--no-direct',
      '--repeat',
      '--interval',
      '--report',
    ]);
    check.action(() => {}); // parse only
    program.parse(['check', '--proxy', 'http://h:1', '--no-direct'], { from: 'user' });
    expect(check.opts()).toMatchObject({ proxy: 'http://h:1', direct: false, timeout: 5000 });
    program.parse(['check', '--proxy', 'http://h:1', '--direct'], { from: 'user' });
    expect(check.opts().direct).toBe(true);
  });
});
