#!/usr/bin/env node
// Event-loop turns a tunnel set-up takes, counted in one process (client, gateway and target share a
// loop, so every wait shows as turns, not as scheduling noise): connect, handshake, first echoed byte,
// direct against CONNECT and SOCKS5. Run after `npm run build`:  node bench/gateway-turns.mjs
import net from 'node:net';
const { startGateway } = await import('../dist/gateway/index.js');
const gw = await startGateway({
  httpProxyListen: { host: '127.0.0.1', port: 0 },
  socksListen: { host: '127.0.0.1', port: 0 },
  allowPrivateTargets: true,
  proxyProtocolFrom: [],
  ownListeners: () => [],
  admission: {
    admitByCredentials: async () => ({ ok: true, accountId: 1 }),
    admitBySourceIp: async () => ({ ok: true, accountId: 1 }),
  },
});
const tgt = net.createServer((s) => s.pipe(s));
await new Promise((r) => tgt.listen(0, '127.0.0.1', r));
const tp = tgt.address().port;
let turns = 0;
let on = true;
const tick = () => {
  turns++;
  if (on) setImmediate(tick);
};
tick();
async function once(kind) {
  const t0 = turns;
  const h0 = process.hrtime.bigint();
  const s = net.connect(
    kind === 'socks' ? gw.socksAddress().port : kind === 'direct' ? tp : gw.httpProxyAddress().port,
    '127.0.0.1',
  );
  await new Promise((r) => s.once('connect', r));
  if (kind === 'connect') {
    s.write(`CONNECT 127.0.0.1:${tp} HTTP/1.1\r\n\r\n`);
    await new Promise((r) => s.once('data', r));
  }
  if (kind === 'socks') {
    s.write(Buffer.from([5, 1, 0]));
    await new Promise((r) => s.once('data', r));
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, tp >> 8, tp & 255]));
    await new Promise((r) => s.once('data', r));
  }
  s.write('x');
  await new Promise((r) => s.once('data', r));
  const us = Number(process.hrtime.bigint() - h0) / 1000;
  s.destroy();
  return [turns - t0, us];
}
for (const k of ['direct', 'connect', 'socks']) {
  const res = [];
  for (let i = 0; i < 400; i++) res.push(await once(k));
  const tu = res
    .slice(100)
    .map((r) => r[0])
    .sort((a, b) => a - b);
  const us = res
    .slice(100)
    .map((r) => r[1])
    .sort((a, b) => a - b);
  console.log(k, 'loop turns p50', tu[150], 'us p50', us[150].toFixed(0), 'p99', us[297].toFixed(0));
}
on = false;
await gw.close(10);
tgt.close();
