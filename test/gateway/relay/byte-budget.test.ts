// The pump under a byte budget (SPEC 11), with a sink as the ground truth: a tunnel relays exactly what its
// grant allows, holds the rest and goes on at the next grant; a limit set on a tunnel that is already open
// applies from its next read; a limit lifted while a tunnel waits lets everything held go on.
import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ByteBudget } from '../../../src/gateway/relay/byte-budget.js';
import type { PlanLimits } from '../../../src/gateway/types.js';
import { sleep, waitFor } from '../../helpers/wait.js';
import { RawClient, basic, startTestGateway, type TestGateway } from '../helpers.js';

class Limits implements PlanLimits {
  budget: ByteBudget | null = null;
  refusal(): null {
    return null;
  }
  pending(): null {
    return null;
  }
  slotFree(): boolean {
    return true;
  }
  async moreSlots(): Promise<void> {}
  budgetFor(): ByteBudget | null {
    return this.budget;
  }
}

describe('the pump under a byte budget', () => {
  let g: TestGateway;
  let limits: Limits;
  let sink: net.Server;
  let received = 0;

  beforeEach(async () => {
    received = 0;
    sink = net.createServer((s) => s.on('data', (c: Buffer) => (received += c.length)).on('error', () => {}));
    await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
    limits = new Limits();
    g = await startTestGateway({ plans: limits });
  });
  afterEach(async () => {
    await g.gw.close(0);
    sink.close();
  });

  async function tunnel(): Promise<RawClient> {
    const c = await RawClient.connect(g.httpPort);
    const port = (sink.address() as net.AddressInfo).port;
    c.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200/);
    return c;
  }

  /** What the sink has once it stops growing. */
  async function settled(): Promise<number> {
    let last = -1;
    while (last !== received) {
      last = received;
      await sleep(150);
    }
    return received;
  }

  it('relays exactly its grant, holds the rest, and goes on at the next grant', async () => {
    const budget = new ByteBudget(null, () => {});
    budget.refill(100_000);
    limits.budget = budget;
    const c = await tunnel();
    c.write(Buffer.alloc(300_000, 7));
    expect(await settled()).toBe(100_000);
    expect(budget.parked).toBeGreaterThan(0);
    budget.refill(1_000_000);
    await waitFor('the rest', () => received === 300_000, 5_000);
    expect(budget.taken).toBe(300_000);
    c.socket.destroy();
  });

  it('a limit set on an open tunnel applies from its next read; lifting it while the tunnel waits lets the held bytes go on', async () => {
    const c = await tunnel(); // admitted with no limit
    c.write(Buffer.alloc(50_000, 1));
    await waitFor('unlimited bytes', () => received === 50_000, 5_000);

    // A limit is set while it is open (the plan enforcer does this when the plan tables change).
    const budget = new ByteBudget(null, () => {});
    budget.refill(20_000);
    limits.budget = budget;
    g.gw.rebudget(() => limits.budget);
    c.write(Buffer.alloc(50_000, 2));
    expect(await settled()).toBe(70_000);
    expect(budget.parked).toBeGreaterThan(0);

    // The limit is lifted while it waits: no budget any more, and the old one's last grant wakes the reader.
    limits.budget = null;
    g.gw.rebudget(() => null);
    budget.refill(Infinity);
    await waitFor('the held bytes', () => received === 100_000, 5_000);
    c.write(Buffer.alloc(10_000, 3));
    await waitFor('unlimited again', () => received === 110_000, 5_000);
    c.socket.destroy();
  });
});
