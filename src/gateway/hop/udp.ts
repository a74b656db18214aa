// A UDP association carried over one hop stream (after `UDP <session> <minutes>` → `OK udp`): datagrams in
// frames both ways inside the TLS session.
//   entry → exit: u16 length, then ATYP (1 IPv4, 3 name, 4 IPv6), the address (a name: u8 length first), u16 port, data
//   exit → entry: u16 length, then ATYP (1 or 4), the sender's address, u16 port, data
// The address is src/rules/socks5-address.ts's both ways (an IPv6 one read as RFC 5952 text).
// The exit sends each datagram with its own resolver, target policy and egress (dial/udp-out.ts); the entry
// admits, meters and logs the association, its end of the stream a HopUdpCarrier (udp-carrier.ts). The lines
// themselves are wire.ts's (encodeHopRequest, parseHopRequest, encodeHopAnswer, parseHopAnswer).
import type net from 'node:net';
import { decodeSocksAddress, encodeSocksAddress } from '../../rules/socks5-address.js';

/** Bytes queued on a hop connection past which a datagram is dropped rather than buffered (UDP may lose it). */
export const MAX_QUEUED = 1 << 20;

export function encodeFrame(target: { host: string; port: number }, data: Buffer): Buffer | null {
  const addr = encodeSocksAddress(target.host, target.port);
  if (addr === null) return null;
  const len = addr.length + data.length;
  if (len > 0xffff) return null;
  const head = Buffer.allocUnsafe(2);
  head.writeUInt16BE(len);
  return Buffer.concat([head, addr, data]);
}

export interface UdpFrame {
  host: string;
  family: 4 | 6 | null;
  port: number;
  data: Buffer<ArrayBufferLike>;
}

/** A frame's body (its length taken off): the SOCKS5 address, then the datagram. Null: not a whole address. */
function decodeFrame(b: Buffer): UdpFrame | null {
  const a = decodeSocksAddress(b, 0);
  if (a === null || a === 'incomplete') return null;
  return { host: a.host, family: a.family, port: a.port, data: b.subarray(a.end) };
}

/** Reads frames off a hop connection; a frame it cannot read ends the connection. */
export function readFrames(s: net.Socket, onFrame: (f: UdpFrame) => void): void {
  let buf: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  s.on('data', (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= 2) {
      const len = buf.readUInt16BE(0);
      if (buf.length < 2 + len) break;
      const f = decodeFrame(buf.subarray(2, 2 + len));
      buf = buf.subarray(2 + len);
      if (!f) return void s.destroy();
      try {
        onFrame(f);
      } catch {
        return void s.destroy(); // a frame its reader cannot use: the peer is not speaking this wire
      }
    }
  });
  s.resume();
}

/** Writes one frame unless the connection is backed up (then the datagram is dropped: false). */
export function writeFrame(s: net.Socket, target: { host: string; port: number }, data: Buffer): boolean {
  if (s.destroyed || s.writableLength > MAX_QUEUED) return false;
  const frame = encodeFrame(target, data);
  if (!frame) return false;
  s.write(frame);
  return true;
}
