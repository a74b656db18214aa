#!/usr/bin/env node
// The floor of a CONNECT relay written on Node's `net` (bench/setup.mjs's "node floor" peer): no credentials,
// no admission, no metering or log, no timers; the request head read up to its blank line, the target dialled,
// the `200` written and both sides piped, a FIN either way passed on (half-close, as proxyd does). What it costs per tunnel is what Node's two `net.Socket`s, their
// streams and handles cost, below which no relay on `net` goes; proxyd's figure minus this is proxyd's own.
//
//   node --max-semi-space-size=8 bench/peers/node-floor.mjs PORT [reuse]
//
// `reuse`: listen with SO_REUSEPORT (`reusePort`), so several of these on one port stand for workers that
// each accept on their own socket. Prints "ready" on stdout once listening.
import net from 'node:net';

const port = Number(process.argv[2]);
const reusePort = process.argv[3] === 'reuse';
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
      if (rest.length > 0) target.write(rest);
      client.pipe(target);
      target.pipe(client);
      client.resume();
    });
    target.on('error', () => client.destroy());
    target.on('close', () => client.destroy());
    client.on('close', () => target.destroy());
  };
  client.on('data', onData);
});
server.listen({ port, host: '127.0.0.1', reusePort }, () => process.stdout.write('ready\n'));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
