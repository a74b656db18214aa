// The hop carrier: an entry's UDP association over one hop stream to its exit (after `UDP …` → `OK udp`, wire.ts),
// its datagrams in frames both ways (udp.ts). What HopDialer.associate gives, as its dial gives a stream for a tunnel.
// The exit sends each datagram with its own resolver, target policy and egress (hop/server.ts, a UdpOut there).
import type net from 'node:net';
import type { AssociateRequest } from '../dial/dialer.js';
import type { UdpCarrier, UdpSender } from '../dial/udp-out.js';
import { readFrames, writeFrame } from './udp.js';

export class HopUdpCarrier implements UdpCarrier {
  private onEnd: (() => void) | null = null;

  constructor(
    /** The hop stream the exit answered `OK udp` on. */
    private readonly stream: net.Socket,
    private readonly req: Pick<AssociateRequest, 'judge' | 'ownTarget' | 'drop'>,
  ) {}

  /**
   * The account's target rules here, on the target as asked, and this node's own sockets (the exit knows neither):
   * such a datagram never leaves. The exit judges what a name resolves to.
   */
  send(host: string, port: number, data: Buffer): boolean {
    const judged = this.req.judge?.(host) ?? null;
    if ((judged !== null && 'denied' in judged) || this.req.ownTarget?.(host, port) === true) {
      this.req.drop('policy');
      return false;
    }
    return writeFrame(this.stream, { host, port }, data);
  }

  receive(onAnswer: (from: UdpSender, data: Buffer) => void, onEnd: () => void): void {
    // An exit answers from addresses only; a named sender is not a frame it makes.
    readFrames(this.stream, (f) =>
      f.family === null
        ? this.req.drop('malformed')
        : onAnswer({ address: f.host, family: f.family, port: f.port }, f.data),
    );
    if (this.stream.destroyed) return onEnd();
    this.onEnd = onEnd;
    this.stream.once('close', onEnd);
  }

  close(): void {
    if (this.onEnd !== null) this.stream.removeListener('close', this.onEnd);
    this.stream.destroy();
  }
}
