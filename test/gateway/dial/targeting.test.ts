// Targeting in the username on a `both` node (SPEC 13): it is its own exit, so a country or city other than
// its --location gets 502 destination_unavailable / SOCKS 0x03 at once, and a match dials as usual.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient, basic, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';

describe('targeting on a node that is its own exit', () => {
  let g: TestGateway;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  beforeAll(async () => {
    echo = await startTcpEcho();
    g = await startTestGateway({ location: { country: 'us', city: 'nyc' } });
  });
  afterAll(async () => {
    await g.gw.close(0);
    echo.server.close();
  });

  async function connectAs(user: string): Promise<string> {
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic(user, 's3cret:pw')}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    c.socket.destroy();
    return head;
  }

  it('a matching country and city dial here', async () => {
    expect(await connectAs('alice-country-us')).toMatch(/^HTTP\/1\.1 200 /);
    expect(await connectAs('alice-country-US-city-NYC-session-a1')).toMatch(/^HTTP\/1\.1 200 /);
    expect(await connectAs('alice')).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('another country or city: 502 destination_unavailable naming it; SOCKS5 0x03', async () => {
    const de = await connectAs('alice-country-de');
    expect(de).toMatch(/^HTTP\/1\.1 502 /);
    expect(de).toContain('Proxy-Status: proxyd; error=destination_unavailable; details="no exit for country de"');
    expect(await connectAs('alice-country-us-city-la')).toContain('details="no exit for city la"');
    const c = await RawClient.connect(g.socksPort);
    c.write(Buffer.from([5, 1, 2]));
    await c.read(2);
    const u = Buffer.from('alice-country-fr');
    const p = Buffer.from('s3cret:pw');
    c.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
    expect([...(await c.read(2))]).toEqual([1, 0]);
    c.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, echo.port >> 8, echo.port & 255]));
    expect((await c.read(2))[1]).toBe(3);
    c.socket.destroy();
  });

  it('malformed targeting is refused like wrong credentials', async () => {
    expect(await connectAs('alice-country-usa')).toMatch(/^HTTP\/1\.1 407 /);
  });
});
