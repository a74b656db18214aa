#!/usr/bin/env node
// The floor of a CONNECT relay written on Node's `net` (bench/setup.mjs's "node floor" peer): no credentials,
// no admission, no metering or log, no timers; the request head read up to its blank line, the target dialled,
// the `200` written and both sides piped, a FIN either way passed on (half-close, as proxyd does). What it costs per tunnel is what Node's two `net.Socket`s, their
// streams and handles cost, below which no relay on `net` goes; proxyd's figure minus this is proxyd's own.
// With `socks=PORT` it also serves SOCKS5 there, the same way: the client's three messages read as they come
// (greeting, RFC 1929 username/password taken unchecked, CONNECT to an IPv4 address), the target dialled, the
// reply written and both sides piped; what SOCKS5's extra round trips cost a relay on `net`, beside proxyd's.
//
//   node --max-semi-space-size=8 bench/peers/node-floor.mjs PORT [reuse] [socks=PORT]
//
// `reuse`: listen with SO_REUSEPORT (`reusePort`), so several of these on one port stand for workers that
// each accept on their own socket. Prints "ready" on stdout once listening.
import net from 'node:net';

const port = Number(process.argv[2]);
const reusePort = process.argv.includes('reuse');
const socksPort = Number(process.argv.find((a) => a.startsWith('socks='))?.slice(6) ?? 0);
const OK = Buffer.from('HTTP/1.1 200 Connection established\r\n\r\n');

const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (client) => {
  let head = null;
  client.on('error', () => {});
  const onData = (chunk) => {
    head = head === null ? chunk : Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return head.length > 8192 && client.destroy();
    client.removeListener('data', onData);
    client.pause();
    const m = /^CONNECT \[?([^\]\s]+?)\]?:(\d+) HTTP\/1\.[01]\r\n/.exec(head.toString('latin1', 0, end + 2));
    if (!m) return client.destroy();
    const rest = head.subarray(end + 4);
    const target = net.connect({ host: m[1], port: Number(m[2]), noDelay: true, allowHalfOpen: true }, () => {
      client.write(OK);
      splice(client, target, rest);
    });
    target.on('error', () => client.destroy());
    target.on('close', () => client.destroy());
    client.on('close', () => target.destroy());
  };
  client.on('data', onData);
});

/** Both sides piped once the target is connected (and whatever the client sent early passed on). */
function splice(client, target, rest) {
  if (rest.length > 0) target.write(rest);
  client.pipe(target);
  target.pipe(client);
  client.resume();
}

// SOCKS5: greeting (method 2 chosen), RFC 1929 (any username and password: success), CONNECT to IPv4.
const SOCKS_METHOD = Buffer.from([5, 2]);
const SOCKS_AUTH_OK = Buffer.from([1, 0]);
const SOCKS_OK = Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
const socks = net.createServer({ noDelay: true, allowHalfOpen: true }, (client) => {
  let buf = Buffer.alloc(0);
  let step = 0;
  client.on('error', () => {});
  const onData = (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    for (;;) {
      if (step === 0) {
        if (buf.length < 2 || buf.length < 2 + buf[1]) return;
        buf = buf.subarray(2 + buf[1]);
        step = 1;
        client.write(SOCKS_METHOD);
      } else if (step === 1) {
        if (buf.length < 2 || buf.length < 3 + buf[1] || buf.length < 3 + buf[1] + buf[2 + buf[1]]) return;
        buf = buf.subarray(3 + buf[1] + buf[2 + buf[1]]);
        step = 2;
        client.write(SOCKS_AUTH_OK);
      } else {
        if (buf.length < 10) return;
        if (buf[1] !== 1 || buf[3] !== 1) return client.destroy();
        client.removeListener('data', onData);
        client.pause();
        const host = `${buf[4]}.${buf[5]}.${buf[6]}.${buf[7]}`;
        const rest = buf.subarray(10);
        const target = net.connect({ host, port: buf.readUInt16BE(8), noDelay: true, allowHalfOpen: true }, () => {
          client.write(SOCKS_OK);
          splice(client, target, rest);
        });
        target.on('error', () => client.destroy());
        target.on('close', () => client.destroy());
        client.on('close', () => target.destroy());
        return;
      }
    }
  };
  client.on('data', onData);
});

server.listen({ port, host: '127.0.0.1', reusePort }, () => {
  if (!socksPort) return process.stdout.write('ready\n');
  socks.listen({ port: socksPort, host: '127.0.0.1', reusePort }, () => process.stdout.write('ready\n'));
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
