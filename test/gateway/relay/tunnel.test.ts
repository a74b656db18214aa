// The tunnel pump on real sockets: every byte arrives in order both ways (large random streams, tiny
// writes, bytes sent with the handshake), a slow reader holds the sender back instead of the relay
// buffering without bound, and a FIN after a burst still delivers the whole burst.
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient, basic, eventually, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';

const AUTH = basic('alice', 's3cret:pw');
let echo: Awaited<ReturnType<typeof startTcpEcho>>;
let t: TestGateway;

beforeAll(async () => {
  echo = await startTcpEcho();
  t = await startTestGateway({ limits: { maxConnectionsPerAccount: 50 } });
});
afterAll(async () => {
  await t.gw.close(100);
  echo.server.close();
});

async function connectTunnel(port: number, early = ''): Promise<RawClient> {
  const c = await RawClient.connect(t.httpPort);
  c.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n${early}`);
  expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  return c;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('tunnel pump', () => {
  it('echoes 24 MiB of random bytes, written in uneven pieces, unchanged and in order', async () => {
    const c = await connectTunnel(echo.port, 'AB');
    const data = randomBytes(24 * 1024 * 1024);
    // Collect the echo ourselves (RawClient's inbox concatenates per chunk).
    c.socket.removeAllListeners('data');
    const chunks: Buffer[] = [];
    let got = 0;
    const all = new Promise<void>((resolve) =>
      c.socket.on('data', (d: Buffer) => {
        chunks.push(d);
        got += d.length;
        if (got >= 2 + data.length) resolve();
      }),
    );
    let off = 0;
    let i = 0;
    while (off < data.length) {
      const n = Math.min(data.length - off, [1, 7, 1500, 65536, 300_000, 1_048_577][i++ % 6] as number);
      if (!c.socket.write(data.subarray(off, off + n))) await new Promise((r) => c.socket.once('drain', r));
      off += n;
    }
    await all;
    const back = Buffer.concat(chunks);
    expect(back.length).toBe(2 + data.length);
    expect(back.subarray(0, 2).toString()).toBe('AB');
    expect(sha(back.subarray(2))).toBe(sha(data));
    c.socket.destroy();
  });

  it('a slow reader holds the sender back: the relay does not buffer the stream', async () => {
    // Target: writes as fast as the tunnel takes, counting what write() accepted without queueing.
    let accepted = 0;
    let target: net.Socket | null = null;
    const srv = net.createServer((s) => {
      target = s;
      s.on('error', () => {});
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const pump = (): void => {
        while (accepted < 256 * 1024 * 1024) {
          accepted += chunk.length;
          if (!s.write(chunk)) return void s.once('drain', pump);
        }
      };
      pump();
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await connectTunnel((srv.address() as net.AddressInfo).port);
    c.socket.pause(); // the client reads nothing
    await new Promise((r) => setTimeout(r, 1500));
    const stalledAt = accepted;
    await new Promise((r) => setTimeout(r, 500));
    // Kernel buffers on both hops plus the relay's bounded queue: megabytes, not the whole stream.
    expect(accepted).toBe(stalledAt);
    expect(accepted).toBeLessThan(64 * 1024 * 1024);
    // Reading again lets the stream flow on.
    c.socket.resume();
    await eventually(() => accepted > stalledAt + 4 * 1024 * 1024, 10_000);
    c.socket.destroy();
    (target as net.Socket | null)?.destroy();
    srv.close();
  });

  it('half-close right after a burst: the target gets every byte, then the FIN, and its answer returns', async () => {
    const srv = net.createServer({ allowHalfOpen: true }, (s) => {
      const h = createHash('sha256');
      let n = 0;
      s.on('data', (d: Buffer) => {
        n += d.length;
        h.update(d);
      });
      s.on('end', () => s.end(`${n} ${h.digest('hex')}`));
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await connectTunnel((srv.address() as net.AddressInfo).port);
    const data = randomBytes(8 * 1024 * 1024);
    c.socket.end(data);
    expect((await c.readToEnd(20_000)).toString()).toBe(`${data.length} ${sha(data)}`);
    srv.close();
  });

  it('counts the relayed bytes once, in stats() while open and after close', async () => {
    const before = t.gw.stats();
    const c = await connectTunnel(echo.port);
    c.write(Buffer.alloc(100_000, 1));
    await c.read(100_000);
    await eventually(
      () => t.gw.stats().bytesUp - before.bytesUp === 100_000 && t.gw.stats().bytesDown - before.bytesDown === 100_000,
      3000,
    );
    c.socket.destroy();
    await eventually(() => t.gw.stats().connectionsOpen === 0, 3000);
    expect(t.gw.stats().bytesUp - before.bytesUp).toBe(100_000);
    expect(t.gw.stats().bytesDown - before.bytesDown).toBe(100_000);
  });
});
