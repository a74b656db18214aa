#!/usr/bin/env node
// The ceiling of any relay on this machine: 512 MiB up and down through the gateway's CONNECT, and
// through the simplest possible Node relay (`a.pipe(b); b.pipe(a)`, RELAY=pipe), each paired with a
// direct loopback transfer. If the bare relay gets no more than the gateway, the gateway's pump costs
// nothing and the ratio is the price of the relay process itself (two extra kernel copies per byte and a
// third process on two cores). Run after `npm run build`:
//   node bench/gateway-ceiling.mjs            # the gateway
//   RELAY=pipe node bench/gateway-ceiling.mjs # the bare relay
import net from 'node:net';
import { fork } from 'node:child_process';
const role = process.argv[2];
if (role === 'pipe') {
  const srv = net.createServer((c) => {
    c.once('data', (head) => {
      const port = Number(/:(\d+)/.exec(head.toString())[1]);
      const u = net.connect(port, '127.0.0.1', () => {
        c.write('HTTP/1.1 200 OK\r\n\r\n');
        c.pipe(u);
        u.pipe(c);
      });
      u.on('error', () => c.destroy());
      c.on('error', () => u.destroy());
    });
  });
  srv.listen(0, '127.0.0.1', () => process.send(srv.address().port));
} else if (role === 'gw') {
  const { startGateway } = await import('../dist/gateway/index.js');
  const gw = await startGateway({
    httpProxyListen: { host: '127.0.0.1', port: 0 },
    socksListen: null,
    allowPrivateTargets: true,
    proxyProtocolFrom: [],
    ownListeners: () => [],
    admission: {
      admitByCredentials: async () => ({ ok: true, accountId: 1 }),
      admitBySourceIp: async () => ({ ok: true, accountId: 1 }),
    },
  });
  process.send(gw.httpProxyAddress().port);
} else if (role === 'target') {
  const srv = net.createServer((s) => {
    s.on('data', () => {});
    s.on('error', () => {});
    s.once('data', (b) => {
      if (b[0] === 0x44) {
        const c = Buffer.alloc(65536, 1);
        let left = 512 * 1024 * 1024;
        const pump = () => {
          while (left > 0) {
            left -= c.length;
            if (!s.write(c)) return;
          }
          s.end();
        };
        s.on('drain', pump);
        pump();
      }
    });
  });
  srv.listen(0, '127.0.0.1', () => process.send(srv.address().port));
} else {
  const start = (r) =>
    new Promise((res) => {
      const c = fork(new URL(import.meta.url).pathname, [r], { execArgv: ['--max-semi-space-size=8'] });
      c.once('message', (p) => res({ c, p }));
    });
  const gw = await start(process.env.RELAY ?? 'gw');
  const tg = await start('target');
  const SIZE = 512 * 1024 * 1024;
  async function conn(viaProxy) {
    const s = net.connect(viaProxy ? gw.p : tg.p, '127.0.0.1');
    await new Promise((r) => s.once('connect', r));
    if (viaProxy) {
      s.write(`CONNECT 127.0.0.1:${tg.p} HTTP/1.1\r\nHost: x\r\n\r\n`);
      await new Promise((r) => s.once('data', r));
    }
    return s;
  }
  async function up(viaProxy) {
    const s = await conn(viaProxy);
    const chunk = Buffer.alloc(65536, 0x55);
    let left = SIZE;
    const t0 = performance.now();
    await new Promise((res) => {
      const pump = () => {
        while (left > 0) {
          left -= chunk.length;
          if (!s.write(chunk)) return;
        }
        s.end(res);
      };
      s.on('drain', pump);
      pump();
    });
    // Done when the far side has read everything and closed.
    await new Promise((r) => {
      s.on('close', r);
      s.resume();
    });
    return SIZE / ((performance.now() - t0) / 1000) / 1e6;
  }
  async function down(viaProxy) {
    const s = await conn(viaProxy);
    let got = 0;
    const t0 = performance.now();
    s.write('D');
    await new Promise((res) => {
      s.on('data', (b) => {
        got += b.length;
      });
      s.on('end', res);
    });
    s.destroy();
    return got / ((performance.now() - t0) / 1000) / 1e6;
  }
  for (let i = 0; i < 3; i++) {
    const du = await up(false),
      pu = await up(true),
      dd = await down(false),
      pd = await down(true);
    console.log(
      `up direct ${du.toFixed(0)} proxy ${pu.toFixed(0)} (${(pu / du).toFixed(2)})   down direct ${dd.toFixed(0)} proxy ${pd.toFixed(0)} (${(pd / dd).toFixed(2)})`,
    );
  }
  gw.c.kill();
  tg.c.kill();
}
