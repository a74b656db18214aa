#!/usr/bin/env node
// The floor under the entry → exit hop's byte path (bench/hop.mjs, "raw Node TLS"): the same relay work with
// Node's TLS and nothing of proxyd. Two processes: an `entry` taking plain TCP and carrying each connection
// over a TLS 1.3 connection of its own to the `exit`, which connects to the target and relays the bytes on.
// Both relay with stream.pipe() both ways. The exit's certificate is made as the hop's is (a P-256 key,
// makeHopIdentity in dist/gateway/hop/identity.js; `npm run build` first), so the cipher suite and the
// handshake are the hop's: TLS 1.3, Node's defaults (TLS_AES_256_GCM_SHA384). No frames, no windows, no mux:
// one TLS connection per tunnel. Prints one JSON line ({"port": N}) once it listens.
//
//   node bench/peers/tls-pair.mjs --role exit --host 127.0.0.1 --target 127.0.0.1:PORT
//   node bench/peers/tls-pair.mjs --role entry --host 127.0.0.1 --exit 127.0.0.1:PORT
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const ROLE = opt('role', 'exit');
const HOST = opt('host', '127.0.0.1');
const hostPort = (s) => ({ host: s.slice(0, s.lastIndexOf(':')), port: Number(s.slice(s.lastIndexOf(':') + 1)) });

/** Both ways, each side's FIN passed on (pipe ends the other, allowHalfOpen); either side's error ends both. */
function join(a, b) {
  a.pipe(b);
  b.pipe(a);
  const kill = () => (a.destroy(), b.destroy());
  a.on('error', kill);
  b.on('error', kill);
}

let server;
if (ROLE === 'exit') {
  const { makeHopIdentity } = await import(path.join(ROOT, 'dist/gateway/hop/identity.js'));
  const id = makeHopIdentity(24 * 3600_000);
  const target = hostPort(opt('target', ''));
  const context = tls.createSecureContext({ key: id.key, cert: id.cert, minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' });
  server = net.createServer({ allowHalfOpen: true, noDelay: true }, (raw) => {
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext: context });
    s.on('error', () => s.destroy());
    s.once('secure', () => {
      const up = net.connect({ ...target, noDelay: true, allowHalfOpen: true });
      join(s, up);
    });
  });
} else {
  const exit = hostPort(opt('exit', ''));
  const context = tls.createSecureContext({ minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' });
  server = net.createServer({ allowHalfOpen: true, noDelay: true }, (c) => {
    c.pause();
    const s = tls.connect({ ...exit, secureContext: context, rejectUnauthorized: false, allowHalfOpen: true });
    s.setNoDelay(true);
    s.once('secureConnect', () => (join(c, s), c.resume()));
    s.on('error', () => c.destroy());
    c.on('error', () => s.destroy());
  });
}
server.listen(0, HOST, () => console.log(JSON.stringify({ port: server.address().port })));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
