// The gateway's side of the connection log, in process: what it reports when admission or a name lookup
// outlasts the header deadline, the client's own address behind a trusted PROXY header (IPv6 too), and a
// record for a connection cut while admission ran.
import { afterEach, describe, expect, it } from 'vitest';
import type { AdmitResult, ConnectionLogSink, ConnectionRecord } from '../../src/gateway/types.js';
import { RawClient, TestAdmitter, basic, startTcpEcho, startTestGateway, type TestGateway } from './helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';

class Records implements ConnectionLogSink {
  all: ConnectionRecord[] = [];
  record(r: ConnectionRecord): void {
    this.all.push(r);
  }
}

/** Admission that answers after `delayMs` (a slow view, a queued password check). */
class SlowAdmitter extends TestAdmitter {
  constructor(private readonly delayMs: number) {
    super();
  }
  override async admitByCredentials(u: string, p: string, b?: string): Promise<AdmitResult> {
    await sleep(this.delayMs);
    return super.admitByCredentials(u, p, b);
  }
}

const open: TestGateway[] = [];
afterEach(async () => {
  for (const g of open.splice(0)) await g.gw.close(100);
});

describe('connection log: the gateway side', () => {
  it('admission slower than the header deadline: HTTP 503 proxy_internal_error, logged as admission_unavailable', async () => {
    const log = new Records();
    const g = await startTestGateway({
      admission: new SlowAdmitter(1_000),
      connectionLog: log,
      limits: { headerTimeoutMs: 300 },
    });
    open.push(g);
    g.admission.users.set('alice', { password: 's3cret:pw', accountId: 1 });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 503 /);
    expect(head).toContain(
      'Proxy-Status: proxyd; error=proxy_internal_error; details="admission did not answer in time"',
    );
    const id = /X-Request-Id: ([^\r]+)/.exec(head)![1];
    await sleep(1_200); // admission answers (admitted) after the answer went out: no second record, no slot kept
    expect(log.all.filter((r) => r.requestId === id)).toEqual([
      expect.objectContaining({ reason: 'admission_unavailable', username: 'alice' }),
    ]);
    expect(log.all).toHaveLength(1);
    expect(g.gw.stats().connectionsOpen).toBe(0);
  });

  it('a name that does not resolve within the header deadline: 504 dns_timeout, logged as dns_error', async () => {
    const log = new Records();
    const g = await startTestGateway({
      connectionLog: log,
      limits: { headerTimeoutMs: 300 },
      lookup: () => new Promise(() => {}),
    });
    open.push(g);
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT slow-name.example:443 HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 504 /);
    expect(head).toContain('error=dns_timeout');
    await waitFor('record', () => log.all.length === 1);
    expect(log.all[0]).toMatchObject({ reason: 'dns_error', accountId: 1, target: 'slow-name.example:443' });
  });

  it('over the total connection limit: the 503 (and the SOCKS5 close) each get a record, the 503 under its X-Request-Id', async () => {
    const log = new Records();
    const g = await startTestGateway({ connectionLog: log, limits: { maxConnectionsTotal: 1, headerTimeoutMs: 5000 } });
    open.push(g);
    const hold = await RawClient.connect(g.httpPort);
    await waitFor('one open', () => g.gw.stats().connectionsOpen === 1);
    const over = await RawClient.connect(g.httpPort);
    const res = (await over.readToEnd()).toString();
    expect(res).toMatch(/^HTTP\/1\.1 503 /);
    const id = /\r\nX-Request-Id: ([^\r]+)\r\n/i.exec(res)?.[1];
    const s = await RawClient.connect(g.socksPort);
    await s.readToEnd();
    await waitFor('records', () => log.all.length === 2);
    expect(log.all[0]).toMatchObject({
      requestId: id,
      protocol: 'http',
      reason: 'connection_limit',
      accountId: -1,
      sourceIp: '127.0.0.1',
    });
    expect(log.all[1]).toMatchObject({ protocol: 'socks5', reason: 'connection_limit', accountId: -1 });
    hold.socket.destroy();
  });

  it('behind a trusted PROXY header the record has the client address, IPv6 included', async () => {
    const log = new Records();
    const echo = await startTcpEcho();
    const g = await startTestGateway({ connectionLog: log, proxyProtocolFrom: ['127.0.0.1'] });
    open.push(g);
    for (const [family, src] of [
      ['TCP4', '198.51.100.23'],
      ['TCP6', '2001:db8::17'],
    ] as const) {
      const c = await RawClient.connect(g.httpPort);
      const dst = family === 'TCP4' ? '127.0.0.1' : '::1';
      c.write(
        `PROXY ${family} ${src} ${dst} 40000 ${g.httpPort}\r\nCONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 'wrong')}\r\n\r\n`,
      );
      expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 407 /);
      await waitFor('record', () => log.all.some((r) => r.sourceIp === src));
    }
    echo.server.close();
  });

  it('a username of kilobytes in Basic credentials is recorded cut to 255 characters (as long as a SOCKS5 username can be), never inside a surrogate pair', async () => {
    const log = new Records();
    const g = await startTestGateway({ connectionLog: log });
    open.push(g);
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: ${basic('u'.repeat(12_000), 'pw')}\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 407 /);
    await waitFor('record', () => log.all.length === 1);
    expect(log.all[0]!.username).toBe('u'.repeat(255));
    // Never cut inside a surrogate pair (a lone half is no text: PostgreSQL would store U+FFFD).
    const d = await RawClient.connect(g.httpPort);
    d.write(
      `CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: ${basic(`${'u'.repeat(254)}${'😀'.repeat(10)}`, 'pw')}\r\n\r\n`,
    );
    expect(await d.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 407 /);
    await waitFor('record', () => log.all.length === 2);
    expect(log.all[1]!.username).toBe('u'.repeat(254));
  });

  it('a PROXY header from a peer not trusted for it, or a malformed one from a trusted peer: closed, and recorded as malformed', async () => {
    const log = new Records();
    const g = await startTestGateway({ connectionLog: log });
    const trusting = await startTestGateway({ connectionLog: log, proxyProtocolFrom: ['127.0.0.1'] });
    open.push(g, trusting);
    const sends: Array<[number, string, 'http' | 'socks5']> = [
      [
        g.httpPort,
        `PROXY TCP4 198.51.100.23 127.0.0.1 40000 ${g.httpPort}\r\nCONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n`,
        'http',
      ],
      [g.socksPort, `PROXY TCP4 198.51.100.23 127.0.0.1 40000 ${g.socksPort}\r\n\x05\x01\x00`, 'socks5'],
      [
        trusting.httpPort,
        'PROXY TCP4 not-an-address 127.0.0.1 40000 80\r\nCONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n',
        'http',
      ],
    ];
    for (const [port, bytes, protocol] of sends) {
      const before = log.all.length;
      const c = await RawClient.connect(port);
      c.write(bytes);
      expect((await c.readToEnd()).length).toBe(0); // closed without a reply
      await waitFor('record', () => log.all.length === before + 1);
      expect(log.all.at(-1)).toMatchObject({ protocol, sourceIp: '127.0.0.1', reason: 'malformed', accountId: -1 });
    }
  });

  it('a connection cut while admission runs still gets its record (admitted, no bytes)', async () => {
    const log = new Records();
    const g = await startTestGateway({ admission: new SlowAdmitter(200), connectionLog: log });
    open.push(g);
    g.admission.users.set('alice', { password: 's3cret:pw', accountId: 7 });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    await sleep(50);
    c.socket.resetAndDestroy(); // RST: gone (a FIN alone would let the CONNECT go on, as it may)
    await waitFor('record', () => log.all.length === 1, 2_000);
    expect(log.all[0]).toMatchObject({ reason: null, accountId: 7, bytesUp: 0, bytesDown: 0 });
    expect(g.gw.stats().connectionsOpen).toBe(0);
  });
});
