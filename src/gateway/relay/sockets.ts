// Socket helpers every room that holds a socket shares.
import type net from 'node:net';

/** A shared listener (no closure, so it retains nothing of the socket's owner). */
export function destroySelf(this: net.Socket): void {
  this.destroy();
}
