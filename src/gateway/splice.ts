// The tunnel pump shared by CONNECT and SOCKS5: bytes both ways with backpressure, half-close
// passed through (a FIN one way keeps the other way delivering until it ends), an idle timeout,
// and both sockets released on every path.
//
// Listeners are module-level functions that find their tunnel through the socket (`this`), so an
// idle tunnel costs one small object instead of a dozen closures: memory per tunnel is the product.
import type net from 'node:net';
import { detachHandshakeListeners, type ClientConn } from './conn.js';
import { destroySelf } from './dialer.js';

// Bytes one side may have queued in user space before the other side is paused. Above the stream
// high-water mark (64 KiB) so a full 64 KiB read does not stop reading every time: that round trip
// halves throughput. Only a stalled peer ever fills it.
const MAX_PENDING = 256 * 1024;

const kTunnel = Symbol('tunnel');

interface Tunnel {
  conn: ClientConn;
  client: TunnelSocket;
  upstream: TunnelSocket;
}

type TunnelSocket = net.Socket & { [kTunnel]?: Tunnel };

function onData(this: TunnelSocket, chunk: Buffer): void {
  const t = this[kTunnel] as Tunnel;
  const n = chunk.length;
  const stats = t.conn.core.stats;
  let dst: net.Socket;
  if (this === t.client) {
    t.conn.bytesUp += n;
    stats.bytesUp += n;
    dst = t.upstream;
  } else {
    t.conn.bytesDown += n;
    stats.bytesDown += n;
    dst = t.client;
  }
  dst.write(chunk);
  if (dst.writableLength >= MAX_PENDING) this.pause();
}

function onDrain(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  (this === t.client ? t.upstream : t.client).resume();
}

// Half-close: pass each FIN on; each socket closes itself once both of its directions are done.
function onEnd(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  (this === t.client ? t.upstream : t.client).end();
}

// An error or reset on either side, or the idle timeout, ends the tunnel at once.
function destroyBoth(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  t.client.destroy();
  t.upstream.destroy();
}

function onClientClose(this: TunnelSocket, hadError: boolean): void {
  const t = this[kTunnel] as Tunnel;
  if (hadError || !t.upstream.readableEnded) t.upstream.destroy();
  // Upstream may still flush the client's last bytes: it gets its own idle limit for that.
  else {
    t.upstream.setTimeout(t.conn.core.limits.idleTimeoutMs);
    t.upstream.on('timeout', destroyBoth);
  }
}

function onUpstreamClose(this: TunnelSocket, hadError: boolean): void {
  const t = this[kTunnel] as Tunnel;
  if (hadError || !t.client.readableEnded) t.client.destroy();
}

export function splice(conn: ClientConn, upstream: net.Socket, earlyData: Buffer): void {
  const client = conn.socket as TunnelSocket;
  const up = upstream as TunnelSocket;
  conn.spliced = true;
  conn.upstream = upstream;
  const t: Tunnel = { conn, client, upstream: up };
  client[kTunnel] = t;
  up[kTunnel] = t;

  detachHandshakeListeners(client);
  up.removeListener('error', destroySelf);
  for (const s of [client, up]) {
    s.on('data', onData);
    s.on('drain', onDrain);
    s.on('end', onEnd);
    s.on('error', destroyBoth);
  }
  client.on('close', onClientClose);
  up.on('close', onUpstreamClose);

  // No bytes either way for the idle time: both go. One timer is enough: every byte up is a read on
  // the client socket and every byte down a write to it, and both refresh its timer.
  // (`on('timeout')` rather than setTimeout's callback argument, which wraps it in a closure.)
  client.setTimeout(conn.core.limits.idleTimeoutMs);
  client.on('timeout', destroyBoth);

  if (earlyData.length > 0) {
    conn.bytesUp += earlyData.length;
    conn.core.stats.bytesUp += earlyData.length;
    up.write(earlyData);
  }
  client.resume();
  // The client's FIN came with its request, before the pump existed: pass it on now.
  if (conn.eof) up.end();
  up.resume();
}
