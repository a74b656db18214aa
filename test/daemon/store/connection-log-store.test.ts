// The connection log's store and writer on each backend: an insert sent twice adds each record once (a batch
// abandoned at the client deadline may still commit), a record the database refuses costs itself and not
// the log, control characters are stored escaped (and which ones: C0 and DEL, nothing else), and the console's
// bounded scan reads only the account's newest records.
import { afterEach, describe, expect, it } from 'vitest';
import { ConnectionLogWriter, escapeControls } from '../../../src/daemon/observe/connection-log.js';
import { openStore, type ConnectionLogEntry, type Store } from '../../../src/daemon/store/index.js';
import type { ConnectionRecord } from '../../../src/gateway/types.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { waitFor } from '../../helpers/wait.js';
import { connectionFilter } from '../../../src/daemon/admin/connections.js';

let seq = 0;
const entry = (over: Partial<ConnectionRecord> = {}): ConnectionRecord => ({
  startedAt: Date.now(),
  requestId: `0000000000ab-${(++seq).toString(36).padStart(6, '0')}`,
  protocol: 'connect',
  sourceIp: '203.0.113.9',
  username: 'alice',
  accountId: -1,
  target: 'example.net:443',
  reason: 'wrong_password',
  bytesUp: 0,
  bytesDown: 0,
  durationMs: 3,
  ...over,
});

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

async function open(backend: (typeof BACKENDS)[number]): Promise<Store> {
  const dataDir = await dataDirFor(backend);
  const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
  stores.push(store);
  return store;
}

const DAY = 86_400_000;

describe.each(BACKENDS)('connection log store on %s', (backend) => {
  it('retention and the size cap drop whole days, oldest first, and keep the current day', async () => {
    const store = await open(backend);
    const now = Date.UTC(2026, 10, 25, 12);
    const today = Math.floor(now / DAY) * DAY;
    // Back-dated records: 3, 2 and 1 days ago (two each), and today.
    const days = [3, 2, 1].map((n) => today - n * DAY + 3_600_000);
    for (const t of days)
      expect(await store.connectionLog.insert('n1', [entry({ startedAt: t }), entry({ startedAt: t + 1 })])).toBe('ok');
    expect(await store.connectionLog.insert('n1', [entry({ startedAt: now })])).toBe('ok');
    const left = async () => (await store.connectionLog.query({ limit: 100 })).map((r) => r.startedAt).sort();
    expect(await left()).toHaveLength(7);
    expect(await store.connectionLog.sizeBytes()).toBeGreaterThan(0);

    // Retention cuts at a time: the days before it go whole, the day it falls in keeps what is newer.
    await store.connectionLog.prune(days[1]! + 1);
    expect(await left()).toEqual([days[1]! + 1, days[2]!, days[2]! + 1, now]);

    // The size cap: the oldest day goes first, never today.
    const writer = new ConnectionLogWriter(store.connectionLog, 'n1', { maxSizeBytes: 1 });
    expect(await writer.capSize(now)).toBe(2); // the day 2 days ago, then yesterday; today alone is still over the cap
    expect(await left()).toEqual([now]);
    expect(await store.connectionLog.dropOldestDay(now)).toBe(false);
    // A record of a dropped day arriving late is still taken (its day is made again).
    expect(await store.connectionLog.insert('n1', [entry({ startedAt: days[0]! })])).toBe('ok');
    expect(await left()).toEqual([days[0]!, now]);
  });

  it('an insert sent again adds nothing: each request id once', async () => {
    const store = await open(backend);
    const batch: ConnectionLogEntry[] = [entry(), entry(), entry()];
    expect(await store.connectionLog.insert('n1', batch)).toBe('ok');
    expect(await store.connectionLog.insert('n1', batch)).toBe('ok');
    expect(await store.connectionLog.query({ limit: 100 })).toHaveLength(3);
    expect(await store.connectionLog.newestId()).toBeGreaterThan(0);
  });

  it('a batch of plain records and records with an exit or datagrams: every field stored, in order', async () => {
    const store = await open(backend);
    // 32 plain (one statement, the node bound once), 32 with one hop record among them, then 6 one by one.
    const batch: ConnectionLogEntry[] = Array.from({ length: 70 }, (_, i) =>
      entry({
        bytesUp: i,
        bytesDown: 2 * i,
        durationMs: i + 1,
        reason: i % 3 === 0 ? null : 'wrong_password',
        accountId: i % 2 ? -1 : 7,
      }),
    );
    batch[40] = { ...batch[40]!, exit: 'exit-a', exitMovedFrom: 'exit-b' };
    batch[66] = { ...batch[66]!, protocol: 'socks5-udp', datagramsUp: 3, datagramsDown: 4 };
    expect(await store.connectionLog.insert('n7', batch)).toBe('ok');
    const rows = (await store.connectionLog.query({ limit: 100 })).reverse();
    expect(rows.map((r) => r.requestId)).toEqual(batch.map((e) => e.requestId));
    rows.forEach((r, i) => {
      const e = batch[i]!;
      expect([
        r.node,
        r.bytesUp,
        r.bytesDown,
        r.durationMs,
        r.reason,
        r.accountId,
        r.target,
        r.username,
        r.protocol,
      ]).toEqual(['n7', e.bytesUp, e.bytesDown, e.durationMs, e.reason, e.accountId, e.target, e.username, e.protocol]);
    });
    expect([rows[40]!.exit, rows[40]!.exitMovedFrom, rows[41]!.exit]).toEqual(['exit-a', 'exit-b', null]);
    expect([rows[66]!.datagramsUp, rows[66]!.datagramsDown, rows[65]!.datagramsUp]).toEqual([3, 4, undefined]);
  });

  it('the writer: a record the database refuses is dropped and counted, the rest written; control characters escaped', async () => {
    const store = await open(backend);
    const writer = new ConnectionLogWriter(store.connectionLog, 'n1', { intervalMs: 50 });
    writer.start();
    try {
      const bad = entry({ bytesUp: {} as unknown as number }); // no backend takes an object for a byte count
      const odd = entry({ username: 'a\u0000b\u001b[2J', target: 'x\u0007.example:80' });
      for (const r of [entry(), bad, odd, entry()]) writer.record(r);
      await waitFor('batch handled', () => writer.written + writer.dropped === 4, 5_000);
      expect({ written: writer.written, dropped: writer.dropped, buffered: writer.buffered }).toEqual({
        written: 3,
        dropped: 1,
        buffered: 0,
      });
      const [row] = await store.connectionLog.query({ requestId: odd.requestId, limit: 1 });
      expect(row).toMatchObject({ username: 'a\\x00b\\x1b[2J', target: 'x\\x07.example:80' });
      // The log goes on after it.
      writer.record(entry({ requestId: 'after-the-bad-one' }));
      await waitFor('next record written', () => writer.written === 4, 5_000);
    } finally {
      await writer.stop();
    }
  });

  it("a bounded scan reads only the account's newest records", async () => {
    const store = await open(backend);
    const account = await store.accounts.create(`scan-${backend}@example.com`, 'x', true);
    if (account === 'exists') throw new Error('exists');
    const mine = Array.from({ length: 10 }, (_, i) =>
      entry({ accountId: account.id, reason: i < 5 ? 'user_disabled' : null }),
    );
    await store.connectionLog.insert('n1', mine);
    // The five oldest are user_disabled: a scan of the newest five finds none of them, a full one finds all five.
    expect(
      await store.connectionLog.query({ accountId: account.id, reason: 'user_disabled', limit: 100, scanLimit: 5 }),
    ).toHaveLength(0);
    expect(
      await store.connectionLog.query({ accountId: account.id, reason: 'user_disabled', limit: 100 }),
    ).toHaveLength(5);
    const rows = await store.connectionLog.query({ accountId: account.id, limit: 100, scanLimit: 6 });
    expect(rows.map((r) => r.requestId)).toEqual(
      mine
        .slice(4)
        .reverse()
        .map((r) => r.requestId),
    );
    expect(rows[0]!.accountEmail).toBe(`scan-${backend}@example.com`);
  });

  it('the source IP filter of admin connections --ip finds a record whichever spelling of the address it is given', async () => {
    const store = await open(backend);
    // The gateway records canonical text (RFC 5952 for IPv6, an IPv4-mapped address as IPv4).
    const v6 = entry({ sourceIp: '2001:db8::1' });
    const v4 = entry({ sourceIp: '198.51.100.7' });
    await store.connectionLog.insert('n1', [v6, v4]);
    for (const spelling of ['2001:db8::1', '2001:DB8::1', '2001:db8:0::1', '2001:0db8:0000:0000:0000:0000:0000:0001']) {
      expect(
        (
          await store.connectionLog.query({
            ...(await connectionFilter(store, { ip: spelling }, Date.now())),
            limit: 10,
          })
        ).map((r) => r.requestId),
        spelling,
      ).toEqual([v6.requestId]);
    }
    for (const spelling of ['198.51.100.7', '::ffff:198.51.100.7', '::FFFF:c633:6407']) {
      expect(
        (
          await store.connectionLog.query({
            ...(await connectionFilter(store, { ip: spelling }, Date.now())),
            limit: 10,
          })
        ).map((r) => r.requestId),
        spelling,
      ).toEqual([v4.requestId]);
    }
  });
});

describe.skipIf(!BACKENDS.includes('postgres'))('the size cap on PostgreSQL: one node at a time', () => {
  it("a node's size check is skipped while another node runs one; it runs once that one is done", async () => {
    const dataDir = await dataDirFor('postgres');
    const a = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
    const b = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir), migrate: false });
    stores.push(a, b);
    const now = Date.now();
    for (const t of [now - 2 * DAY, now])
      expect(await a.connectionLog.insert('n1', [entry({ startedAt: t })])).toBe('ok');
    // Node b: a writer whose store counts the size reads it makes.
    let reads = 0;
    const bLog = Object.create(b.connectionLog) as typeof b.connectionLog;
    bLog.sizeBytes = () => {
      reads++;
      return b.connectionLog.sizeBytes();
    };
    const writer = new ConnectionLogWriter(bLog, 'n2', { maxSizeBytes: 1 });
    // Node a holds the check (its own work waits until released).
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const aCheck = a.connectionLog.alone!(async () => {
      entered();
      await held;
      return 'a';
    });
    await inside;
    expect(await writer.capSize(now)).toBe(0);
    expect(reads).toBe(0); // skipped: not even the size was read
    expect(await b.connectionLog.alone!(async () => 'b')).toBe('skipped');
    release();
    expect(await aCheck).toBe('a');
    expect(await writer.capSize(now)).toBe(1); // the day 2 days ago; today stays
    expect(reads).toBeGreaterThan(0);
  });
});

describe('what the log stores of a client-sent name', () => {
  it('escapes C0 controls and DEL, and only those, as \\xNN', () => {
    for (let c = 0; c <= 0x100; c++) {
      const s = `a${String.fromCharCode(c)}b`;
      const escaped = c < 0x20 || c === 0x7f;
      expect(escapeControls(s), `U+${c.toString(16)}`).toBe(escaped ? `a\\x${c.toString(16).padStart(2, '0')}b` : s);
    }
    expect(escapeControls('\u0000\u001f\u007f')).toBe('\\x00\\x1f\\x7f');
    expect(escapeControls('')).toBe('');
    expect(escapeControls(null)).toBeNull();
  });
});
