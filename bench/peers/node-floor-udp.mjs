#!/usr/bin/env node
// The floor of a SOCKS5 UDP relay written on Node's `dgram` (bench/udp.mjs's "node floor" peer): no
// authentication, no admission, source check, target policy, metering or log; the method choice and the UDP
// ASSOCIATE answered at once, then per datagram less than RFC 1928 requires (no source check: the IPv4 header
// read, the payload sent on from one egress socket, an answer sent back behind the header naming its sender). What it costs per
// datagram is what Node's `message` event and `send` cost, below which no relay on `dgram` goes.
//
//   node --max-semi-space-size=8 bench/peers/node-floor-udp.mjs PORT
//
// Prints "ready" on stdout once listening.
import dgram from 'node:dgram';
import net from 'node:net';

const port = Number(process.argv[2]);
const literal = (address, family, cb) => cb(null, address, family === 6 ? 6 : 4);

function associate(control) {
  const relay = dgram.createSocket({ type: 'udp4', lookup: literal });
  const out = dgram.createSocket({ type: 'udp4', lookup: literal });
  let clientPort = 0;
  let clientHost = '';
  const headers = new Map();
  relay.on('message', (msg, rinfo) => {
    // IPv4 targets only (ATYP 1, FRAG 0): the bench sends nothing else.
    if (msg.length < 10 || msg[2] !== 0 || msg[3] !== 1) return;
    clientPort = rinfo.port;
    clientHost = rinfo.address;
    out.send(msg.subarray(10), msg.readUInt16BE(8), `${msg[4]}.${msg[5]}.${msg[6]}.${msg[7]}`);
  });
  out.on('message', (msg, rinfo) => {
    const key = `${rinfo.address}:${rinfo.port}`;
    let h = headers.get(key);
    if (h === undefined) {
      h = Buffer.from([0, 0, 0, 1, ...rinfo.address.split('.').map(Number), rinfo.port >> 8, rinfo.port & 255]);
      headers.set(key, h);
    }
    if (clientPort !== 0) relay.send([h, msg], clientPort, clientHost);
  });
  const end = () => {
    relay.close();
    out.close();
  };
  relay.on('error', () => control.destroy());
  out.on('error', () => control.destroy());
  control.once('close', end);
  out.bind(0, '127.0.0.1');
  relay.bind(0, '127.0.0.1', () => {
    const p = relay.address().port;
    control.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, p >> 8, p & 255]));
  });
}

const server = net.createServer((c) => {
  c.on('error', () => {});
  let buf = Buffer.alloc(0);
  let step = 0;
  c.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (step === 0 && buf.length >= 2 && buf.length >= 2 + buf[1]) {
      buf = buf.subarray(2 + buf[1]);
      step = 1;
      c.write(Buffer.from([5, 0]));
    }
    if (step === 1 && buf.length >= 10) {
      step = 2;
      if (buf[1] !== 3) return c.destroy();
      associate(c);
    }
  });
});
server.listen({ port, host: '127.0.0.1' }, () => process.stdout.write('ready\n'));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
