// The hop's byte path keeps no allocation per record or frame (docs/decisions.md#d-077): reads into one buffer
// per connection, a turn's DATA in a slab used again the next turn, frames in recycled send buffers. These check
// what that must not break: every byte arrives once and in order on each stream whatever the readers do (a
// reader that pauses holds its bytes while the slab is used again by others; a 'data' listener may keep what
// it was given), and an idle connection gives its send buffer back.
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { makeHopIdentity } from '../../../src/gateway/hop/identity.js';
import { MuxSession, type MuxStream } from '../../../src/gateway/hop/mux.js';
import { waitFor } from '../../helpers/wait.js';

const ID = makeHopIdentity(24 * 3600_000);
const cleanup: (() => void)[] = [];
afterEach(() => {
  while (cleanup.length) cleanup.pop()!();
});

/** Two sessions on one TLS 1.3 connection: `entry` (client) and `exit` (server, its streams as they open). */
async function pair(): Promise<{ entry: MuxSession; exit: MuxSession; opened: MuxStream[] }> {
  const opened: MuxStream[] = [];
  let exit: MuxSession | null = null;
  const server = tls.createServer({ key: ID.key, cert: ID.cert, minVersion: 'TLSv1.3' }, (s) => {
    exit = new MuxSession(s, { onOpen: (st) => (opened.push(st), st.reply('OK 127.0.0.1')) });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const c = tls.connect({
    host: '127.0.0.1',
    port: (server.address() as net.AddressInfo).port,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.3',
  });
  await once(c, 'secureConnect');
  const entry = new MuxSession(c);
  cleanup.push(() => (c.destroy(), server.close()));
  await waitFor('the exit session', () => exit !== null);
  return { entry, exit: exit!, opened };
}

/** `n` bytes whose values say their offset (so a byte from elsewhere, or out of order, shows). */
function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + seed) & 0xff;
  return b;
}

describe('the hop mux byte path', () => {
  it('streams carry every byte in order while readers pause, take bytes by readWith or keep what data gave them', async () => {
    const { entry, opened } = await pair();
    const SIZE = 3 * 1024 * 1024 + 12_345;
    const N = 4;
    const streams = Array.from({ length: N }, () => entry.open('DIAL x 1 - 0'));
    await waitFor('the streams opened', () => opened.length === N);
    const got: Buffer[][] = Array.from({ length: N }, () => []);
    opened.forEach((st, i) => {
      if (i % 2 === 0) {
        // As the pump takes them: copied before the sink returns; a pause now and then, resumed a little later.
        let calls = 0;
        st.readWith(function (n, buf) {
          got[i]!.push(Buffer.from(buf.subarray(0, n)));
          if (++calls % 3 !== 0) return true;
          setTimeout(() => st.resume(), 2);
          return false;
        });
        st.resume();
      } else {
        // Kept as given (a 'data' listener may hold its pieces); a pause now and then too.
        st.on('data', (d: Buffer) => {
          got[i]!.push(d);
          if (got[i]!.length % 5 === 0) {
            st.pause();
            setTimeout(() => st.resume(), 3);
          }
        });
      }
    });
    const sent = streams.map((_, i) => pattern(SIZE, i));
    // Written in pieces, the streams interleaved, as pumps would.
    for (let at = 0; at < SIZE; at += 100_000)
      streams.forEach((s, i) => s.write(sent[i]!.subarray(at, Math.min(SIZE, at + 100_000))));
    streams.forEach((s) => s.end());
    await waitFor('every byte', () => got.every((g) => g.reduce((a, b) => a + b.length, 0) >= SIZE), 20_000);
    got.forEach((g, i) => expect(Buffer.concat(g).equals(sent[i]!)).toBe(true));
  });

  it('bytes a reader holds when it is paused before its turn keep their values while the slab is used again', async () => {
    const { entry, opened } = await pair();
    const [a, b, c] = [entry.open('DIAL a 1 - 0'), entry.open('DIAL b 1 - 0'), entry.open('DIAL c 1 - 0')];
    await waitFor('the streams opened', () => opened.length === 3);
    const [ra, rb, rc] = opened as [MuxStream, MuxStream, MuxStream];
    const gotA: Buffer[] = [];
    const gotC: Buffer[] = [];
    ra.readWith((n, buf) => (gotA.push(Buffer.from(buf.subarray(0, n))), true));
    // B's reader pauses A's as it takes its own bytes: A's bytes of the same turn wait in the slab, paused.
    rb.readWith(() => (ra.pause(), true));
    rc.readWith((n, buf) => (gotC.push(Buffer.from(buf.subarray(0, n))), true));
    for (const r of [ra, rb, rc]) r.resume();
    const A = pattern(4000, 1);
    // One write of both frames (B's first): one TLS record, one read, one turn on the exit.
    entry.batch(() => (b.write(pattern(100, 2)), a.write(A)));
    await waitFor('B read and A paused', () => ra.isPaused());
    // The next turns use the slab again, from its start.
    c.write(pattern(4000, 3));
    await waitFor("C's bytes", () => gotC.reduce((x, y) => x + y.length, 0) === 4000);
    ra.resume();
    await waitFor("A's bytes", () => gotA.reduce((x, y) => x + y.length, 0) === 4000);
    expect(Buffer.concat(gotA).equals(A)).toBe(true);
  });

  it('an idle connection holds no send buffer', async () => {
    const { entry, exit, opened } = await pair();
    const st = entry.open('DIAL x 1 - 0');
    await waitFor('the stream opened', () => opened.length === 1);
    const got: Buffer[] = [];
    opened[0]!.on('data', (d: Buffer) => got.push(d));
    st.write(pattern(600_000, 1));
    await waitFor('its bytes', () => got.reduce((a, b) => a + b.length, 0) === 600_000);
    await waitFor('the send buffers given back', () => entry.out === null && exit.out === null);
  });
});
