// The batch engine against a scripted server on 127.0.0.1, with a fake clock (docs/cli.md retry rules).
import { describe, expect, it } from 'vitest';
import { runBatches, type BatchItem } from '../../src/cli/batch.js';
import { Exit } from '../../src/cli/exit-codes.js';
import { FakeClock, TOKEN, publicIps } from './helpers/fakes.js';
import {
  batchReply,
  ipsOf,
  rateLimited,
  scriptedClient,
  systemError,
  unauthorized,
  unavailable,
  type Handler,
} from './helpers/scripted-server.js';

const scripted = scriptedClient();
async function setup(handler: Handler) {
  return { ...(await scripted(handler)), clock: new FakeClock() };
}

const items = (ips: string[]): BatchItem[] => ips.map((ip) => ({ ip }));

describe('batch engine', () => {
  it('sends batches of 100 and sums the results', async () => {
    const { server, api, clock } = await setup((req) => batchReply(req));
    const r = await runBatches({ op: 'add', items: items(publicIps(250)), api, clock, retry: 3 });
    expect(server.requests.map((q) => ipsOf(q).length)).toEqual([100, 100, 50]);
    expect(server.requests.every((q) => q.apiKey === TOKEN && q.path === '/openapi/v1/proxy/whitelist/add')).toBe(true);
    expect(r.summary).toEqual({ success_count: 250, already_done: 0, failed_count: 0, failed_items: [] });
    expect(r.exitCode).toBe(Exit.OK);
    expect(clock.sleeps).toEqual([]);
  });

  it('after a 10431 resends only the failed items with a retryable code, alone; final codes are reported', async () => {
    const ips = publicIps(100);
    const { server, api, clock } = await setup((req, i) => {
      if (i === 0) return batchReply(req, { [ips[3]!]: 10500, [ips[7]!]: 10422, [ips[9]!]: 10500, [ips[50]!]: 10427 });
      return batchReply(req);
    });
    const r = await runBatches({ op: 'add', items: items(ips), api, clock, retry: 3 });
    expect(server.requests).toHaveLength(2);
    expect(ipsOf(server.requests[1]!)).toEqual([ips[3], ips[9]]);
    expect(r.summary.success_count).toBe(98);
    expect(r.summary.already_done).toBe(0);
    expect(r.summary.failed_items.map((f) => [f.ip, f.code])).toEqual([
      [ips[7], 10422],
      [ips[50], 10427],
    ]);
    expect(r.exitCode).toBe(Exit.ITEMS_FAILED);
    expect(clock.sleeps.length).toBe(1); // one backoff before the resend
  });

  it('keeps remarks on a failed-item resend', async () => {
    const { server, api, clock } = await setup((req, i) =>
      i === 0 ? batchReply(req, { '8.8.8.8': 10500 }) : batchReply(req),
    );
    await runBatches({
      op: 'add',
      items: [{ ip: '8.8.8.8', remark: 'office' }, { ip: '9.9.9.9' }],
      api,
      clock,
      retry: 1,
    });
    expect(server.requests[1]!.body).toEqual({ items: [{ ip: '8.8.8.8', remark: 'office' }] });
  });

  it('a 10500 item that keeps failing is reported with its code once --retry is spent', async () => {
    const { server, api, clock } = await setup((req) => batchReply(req, { '8.8.8.8': 10500 }));
    const r = await runBatches({ op: 'add', items: items(['8.8.8.8', '9.9.9.9']), api, clock, retry: 2 });
    expect(server.requests.map(ipsOf)).toEqual([['8.8.8.8', '9.9.9.9'], ['8.8.8.8'], ['8.8.8.8']]);
    expect(r.summary.failed_items).toEqual([{ ip: '8.8.8.8', code: 10500, reason: 'reason 10500' }]);
    expect(r.summary.success_count).toBe(1);
    expect(r.exitCode).toBe(Exit.ITEMS_FAILED);
  });

  it('a resent item answered 10425 (add) counts as already done', async () => {
    const { api, clock } = await setup((req, i) =>
      i === 0 ? batchReply(req, { '8.8.8.8': 10500 }) : batchReply(req, { '8.8.8.8': 10425 }),
    );
    const r = await runBatches({ op: 'add', items: items(['8.8.8.8', '9.9.9.9']), api, clock, retry: 2 });
    expect(r.summary).toEqual({ success_count: 1, already_done: 1, failed_count: 0, failed_items: [] });
    expect(r.exitCode).toBe(Exit.OK);
  });

  it('10425 on a first send is a failure, not "already done"', async () => {
    const { api, clock } = await setup((req) => batchReply(req, { '8.8.8.8': 10425 }));
    const r = await runBatches({ op: 'add', items: items(['8.8.8.8', '9.9.9.9']), api, clock, retry: 3 });
    expect(r.summary.already_done).toBe(0);
    expect(r.summary.failed_items).toEqual([{ ip: '8.8.8.8', code: 10425, reason: 'reason 10425' }]);
    expect(r.exitCode).toBe(Exit.ITEMS_FAILED);
  });

  it('429: waits Retry-After, then resends the same batch', async () => {
    const ips = publicIps(100);
    const { server, api, clock } = await setup((req, i) => (i === 0 ? rateLimited(7) : batchReply(req)));
    const r = await runBatches({ op: 'add', items: items(ips), api, clock, retry: 3 });
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.body).toEqual(server.requests[0]!.body);
    expect(clock.sleeps).toEqual([7000]);
    expect(r.summary).toEqual({ success_count: 100, already_done: 0, failed_count: 0, failed_items: [] });
    expect(r.exitCode).toBe(Exit.OK);
  });

  it('429 replays do not mark items as resent: a later 10425 stays a failure', async () => {
    const { api, clock } = await setup((req, i) => (i === 0 ? rateLimited(1) : batchReply(req, { '8.8.8.8': 10425 })));
    const r = await runBatches({ op: 'add', items: items(['8.8.8.8']), api, clock, retry: 3 });
    expect(r.summary.failed_count).toBe(1);
    expect(r.summary.already_done).toBe(0);
  });

  it('429 beyond --retry: exit 5, nothing of the batch reported as done', async () => {
    const { server, api, clock } = await setup(() => rateLimited(2));
    const r = await runBatches({ op: 'delete', items: items(publicIps(150)), api, clock, retry: 2 });
    expect(server.requests).toHaveLength(3);
    expect(r.exitCode).toBe(Exit.RATE_LIMITED);
    expect(r.summary.failed_count).toBe(150);
    expect(r.summary.failed_items.every((f) => f.code === 10429)).toBe(true);
    expect(clock.sleeps).toEqual([2000, 2000]);
  });

  it('a 10503 applied nothing: a 10425 on its replay is a failure (the IP was there before), not "already done"', async () => {
    const { api, clock } = await setup((req, i) => (i === 0 ? unavailable : batchReply(req, { '8.8.8.8': 10425 })));
    const r = await runBatches({ op: 'add', items: items(['8.8.8.8', '9.9.9.9']), api, clock, retry: 1 });
    expect(r.summary).toMatchObject({ success_count: 1, already_done: 0, failed_count: 1 });
  });

  it('a success whose body cannot be read: the batch is `outcome unknown`, not `not processed`', async () => {
    const { api, clock } = await setup(() => ({ code: 200, data: { nonsense: true } }));
    const r = await runBatches({ op: 'add', items: items(publicIps(2)), api, clock, retry: 3 });
    expect(r.exitCode).toBe(Exit.ERROR);
    expect(r.summary.failed_items.every((f) => f.reason.startsWith('outcome unknown: '))).toBe(true);
  });

  it("a proxy's 503 (not the API's envelope) then a replay that yields 10425: the item is already done", async () => {
    const ips = publicIps(100);
    const { server, api, clock } = await setup((req, i) => {
      if (i === 0) return { status: 503, raw: '<html>503 Service Unavailable</html>' };
      // The first attempt got through for two items before the 503.
      return batchReply(req, { [ips[0]!]: 10425, [ips[1]!]: 10425 });
    });
    const r = await runBatches({ op: 'add', items: items(ips), api, clock, retry: 3 });
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.body).toEqual(server.requests[0]!.body); // the same batch
    expect(r.summary).toEqual({ success_count: 98, already_done: 2, failed_count: 0, failed_items: [] });
    expect(r.exitCode).toBe(Exit.OK);
    expect(clock.sleeps).toEqual([1000]); // backoff
  });

  it('500 then a replay of a delete that yields 10426: already done', async () => {
    const { api, clock } = await setup((req, i) => (i === 0 ? systemError : batchReply(req, { '8.8.8.8': 10426 })));
    const r = await runBatches({ op: 'delete', items: items(['8.8.8.8', '9.9.9.9']), api, clock, retry: 1 });
    expect(r.summary).toEqual({ success_count: 1, already_done: 1, failed_count: 0, failed_items: [] });
  });

  it('on delete a 10425 after a replay is not "already done" (only 10426 is)', async () => {
    const { api, clock } = await setup((req, i) => (i === 0 ? systemError : batchReply(req, { '8.8.8.8': 10425 })));
    const r = await runBatches({ op: 'delete', items: items(['8.8.8.8']), api, clock, retry: 1 });
    expect(r.summary.failed_count).toBe(1);
  });

  it('a network error replays the same batch with backoff', async () => {
    const { server, api, clock } = await setup((req, i) => (i < 2 ? { destroy: true } : batchReply(req)));
    const r = await runBatches({ op: 'add', items: items(publicIps(3)), api, clock, retry: 3 });
    expect(server.requests).toHaveLength(3);
    expect(clock.sleeps).toEqual([1000, 2000]);
    expect(r.exitCode).toBe(Exit.OK);
  });

  it('server errors beyond --retry: exit 1, the batch and the rest reported, at most retry+1 sends', async () => {
    const { server, api, clock } = await setup(() => unavailable);
    const r = await runBatches({ op: 'add', items: items(publicIps(120)), api, clock, retry: 2 });
    expect(server.requests).toHaveLength(3);
    expect(r.exitCode).toBe(Exit.ERROR);
    expect(r.summary.failed_count).toBe(120);
    expect(r.stop?.message).toMatch(/gave up after 2 retries/);
  });

  it('the last attempt may have been applied (500, a timeout, a cut connection): its batch is `outcome unknown`, the unsent rest `not processed`', async () => {
    for (const reply of [systemError, { hang: true }, { destroy: true }]) {
      const { api, clock } = await scripted(() => reply, { timeoutMs: 300 }).then((x) => ({
        ...x,
        clock: new FakeClock(),
      }));
      const r = await runBatches({ op: 'add', items: items(publicIps(150)), api, clock, retry: 0 });
      expect(r.exitCode).toBe(Exit.ERROR);
      const reasons = r.summary.failed_items.map((f) => f.reason.split(':')[0]);
      expect(reasons.slice(0, 100).every((x) => x === 'outcome unknown')).toBe(true);
      expect(reasons.slice(100).every((x) => x === 'not processed')).toBe(true);
    }
  });

  it('nothing applied (503/10503 every time, or the connection refused): `not processed`, also after replays', async () => {
    const { api, clock } = await setup(() => unavailable);
    const r = await runBatches({ op: 'add', items: items(publicIps(3)), api, clock, retry: 2 });
    expect(r.summary.failed_items.every((f) => f.reason.startsWith('not processed: '))).toBe(true);

    const gone = await setup(() => unavailable);
    await gone.server.close();
    const refused = await runBatches({ op: 'add', items: items(publicIps(3)), api: gone.api, clock, retry: 0 });
    expect(refused.summary.failed_items.map((f) => f.reason.split(':')[0])).toEqual([
      'not processed',
      'not processed',
      'not processed',
    ]);
  });

  it('a replay after a 500 ends in a 503: still `outcome unknown` (the first attempt may have applied it)', async () => {
    const { api, clock } = await setup((_req, i) => (i === 0 ? systemError : unavailable));
    const r = await runBatches({ op: 'add', items: items(publicIps(2)), api, clock, retry: 1 });
    expect(r.summary.failed_items.every((f) => f.reason.startsWith('outcome unknown: '))).toBe(true);
  });

  it('401: stops at once, no retry, exit 4', async () => {
    const { server, api, clock } = await setup(() => unauthorized);
    const r = await runBatches({ op: 'add', items: items(publicIps(250)), api, clock, retry: 5 });
    expect(server.requests).toHaveLength(1);
    expect(r.exitCode).toBe(Exit.AUTH);
    expect(r.summary.failed_count).toBe(250);
    expect(r.summary.failed_items[0]!.code).toBe(10401);
    expect(clock.sleeps).toEqual([]);
    expect(JSON.stringify(r)).not.toContain(TOKEN.split('.')[1]);
  });

  it('401 in the middle of a run: earlier successes stay counted', async () => {
    const { server, api, clock } = await setup((req, i) => (i === 0 ? batchReply(req) : unauthorized));
    const r = await runBatches({ op: 'add', items: items(publicIps(250)), api, clock, retry: 5 });
    expect(server.requests).toHaveLength(2);
    expect(r.summary.success_count).toBe(100);
    expect(r.summary.failed_count).toBe(150);
    expect(r.exitCode).toBe(Exit.AUTH);
  });

  it('10403 (not verified) stops without a retry, exit 1', async () => {
    const { server, api, clock } = await setup(() => ({
      status: 403,
      code: 10403,
      message: 'account is not real-name verified',
    }));
    const r = await runBatches({ op: 'add', items: items(publicIps(5)), api, clock, retry: 5 });
    expect(server.requests).toHaveLength(1);
    expect(r.exitCode).toBe(Exit.ERROR);
    expect(r.stop?.message).toMatch(/real-name/);
  });

  it('1,050 IPs finish paced to 10 per rolling minute without a single 429', async () => {
    const clock = new FakeClock();
    const served: number[] = [];
    // The scripted server enforces the real limit on the same virtual clock.
    const { server, api } = await setup((req) => {
      const now = clock.now();
      const recent = served.filter((t) => t > now - 60_000);
      if (recent.length >= 10) return rateLimited(Math.ceil((recent[0]! + 60_000 - now) / 1000));
      served.push(now);
      return batchReply(req);
    });
    const start = clock.now();
    const r = await runBatches({ op: 'add', items: items(publicIps(1050)), api, clock, retry: 0 });
    expect(server.replies.filter((x) => x.status === 429)).toEqual([]);
    expect(server.requests).toHaveLength(11);
    expect(r.summary.success_count).toBe(1050);
    expect(r.exitCode).toBe(Exit.OK);
    expect(served[10]! - served[0]!).toBeGreaterThanOrEqual(60_000);
    expect(clock.now() - start).toBeGreaterThanOrEqual(60_000);
    expect(clock.now() - start).toBeLessThan(62_000);
  });

  it('reports progress with waits', async () => {
    const { api, clock } = await setup((req, i) => (i === 0 ? rateLimited(3) : batchReply(req)));
    const seen: string[] = [];
    await runBatches({
      op: 'add',
      items: items(publicIps(2)),
      api,
      clock,
      retry: 1,
      onProgress: (p) => seen.push(`${p.settled}/${p.total}${p.waiting ? ` ${p.waiting.reason}` : ''}`),
    });
    expect(seen).toEqual(['0/2', '0/2 retry-after', '2/2']);
  });
});
