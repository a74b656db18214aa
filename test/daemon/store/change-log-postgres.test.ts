// The PostgreSQL change log's holes (store/postgres/change-log.ts): a sequence number is handed out when a
// transaction writes, not when it commits, so a higher seq can be visible before a lower one. With two real
// connections: the reader must still deliver the late commit (to a following view and to a fresh snapshot),
// must keep a hole however long its transaction runs and forget it as soon as that transaction rolled back, a
// reload built in the reload worker (its own connection) must hand its snapshot's holes over, and nodes trimming
// at once agree.
import { describe, expect, it } from 'vitest';
import { StoreAdmissionFeed } from '../../../src/daemon/admission/feed.js';
import { AdmissionView } from '../../../src/daemon/admission/view.js';
import { connect } from '../../../src/daemon/store/postgres/db.js';
import { PostgresStore } from '../../../src/daemon/store/postgres/index.js';
import { createDatabase, postgresSkipReason } from '../../helpers/postgres.js';
import { RELOAD_WORKER } from '../../helpers/daemon.js';

const skip = postgresSkipReason() ?? (process.env.PROXYD_TEST_PG_URL ? null : 'no test PostgreSQL');

/** A transaction on its own connection that writes now and commits (or rolls back) when told. */
function openWriter(url: string, write: (tx: any) => Promise<unknown>) {
  const sql = connect(url, 1);
  let finish!: (commit: boolean) => void;
  const decided = new Promise<boolean>((r) => (finish = r));
  let written!: () => void;
  const wrote = new Promise<void>((r) => (written = r));
  const done = sql
    .begin(async (tx) => {
      await write(tx);
      written();
      if (!(await decided)) throw new Error('rollback');
    })
    .catch((e: Error) => {
      if (e.message !== 'rollback') throw e;
    })
    .finally(() => sql.end());
  return { wrote, commit: async () => (finish(true), await done), rollback: async () => (finish(false), await done) };
}

async function setup() {
  const url = await createDatabase();
  const clock = { now: Date.now() };
  const store = await PostgresStore.open(url, { nowMs: () => clock.now });
  const a = await store.accounts.create('early@example.com', 'x', true);
  const b = await store.accounts.create('late@example.com', 'x', true);
  if (a === 'exists' || b === 'exists') throw new Error('unexpected');
  return { url, clock, store, early: a.id, late: b.id };
}

const holesOf = (store: PostgresStore) => (store.changeLog as unknown as { holes: Map<number, unknown> }).holes.size;

/**
 * A slow writer suspends `early` and takes its seq first; a later claim (8.8.8.8 for `late`) commits past it
 * and the view moves beyond the gap. The slow writer is left open.
 */
async function gapBehind(url: string, store: PostgresStore, early: number, late: number, view: AdmissionView) {
  const slow = openWriter(url, (tx) => tx`UPDATE accounts SET status = 'suspended' WHERE id = ${early}`);
  await slow.wrote;
  expect(await store.whitelist.claimIp(late, '8.8.8.8', '')).toBe('added');
  await view.sync();
  return slow;
}

/** Commits the slow writer's suspension of `early`, and checks it reaches the view through its hole. */
async function deliveredAtCommit(
  slow: { commit(): Promise<unknown> },
  store: PostgresStore,
  view: AdmissionView,
  early: number,
) {
  await slow.commit();
  await store.whitelist.claimIp(early, '9.9.9.9', '');
  await view.sync();
  expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountId: early, accountActive: false });
  expect(holesOf(store)).toBe(0);
}

function follow(store: PostgresStore) {
  // Reloads (after the first load) in the reload worker, as the daemon runs them.
  const view = new AdmissionView(new StoreAdmissionFeed(store.changeLog, { wake: false }), {
    staleAdmissionSec: 300,
    pollMs: 0,
    reloadWorker: RELOAD_WORKER,
  });
  return view;
}

describe.skipIf(skip !== null)(
  `PostgreSQL change log: holes below the reader's position${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    it('a transaction that took a lower seq and commits after a higher one is still delivered', async () => {
      const { url, store, early, late } = await setup();
      const view = follow(store);
      await view.start();
      try {
        const slow = await gapBehind(url, store, early, late, view);
        expect(view.admissionByIp('8.8.8.8')).toMatchObject({ accountId: late, accountActive: true });
        const passed = view.status().seq;
        expect(await store.changeLog.headSeq()).toBe(passed);
        // The slow one commits below the reader's position: delivered all the same.
        await slow.commit();
        await view.sync();
        expect(await store.proxyUsers.create(early, 'eve', 'scrypt$x')).not.toBe('exists');
        await store.whitelist.claimIp(early, '9.9.9.9', '');
        await view.sync();
        expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountId: early, accountActive: false });
        expect(view.userForAuth('eve')?.account_status).toBe('inactive');
      } finally {
        view.close();
        await store.close();
      }
    });

    it('a snapshot taken while the lower seq is in flight picks it up after the commit', async () => {
      const { url, store, early, late } = await setup();
      const slow = openWriter(url, (tx) => tx`UPDATE accounts SET status = 'suspended' WHERE id = ${early}`);
      await slow.wrote;
      await store.whitelist.claimIp(late, '8.8.8.8', '');
      const view = follow(store);
      try {
        await view.start(); // the snapshot does not see the slow transaction's change
        await store.whitelist.claimIp(early, '9.9.9.9', '');
        await view.sync();
        expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountActive: true });
        await slow.commit();
        await view.sync();
        expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountActive: false });
      } finally {
        view.close();
        await store.close();
      }
    });

    it("a reload in the worker while a lower seq is in flight hands the hole to the view's reader: delivered at its commit", async () => {
      const { url, store, early, late } = await setup();
      const view = follow(store);
      await view.start();
      try {
        const slow = openWriter(url, (tx) => tx`UPDATE accounts SET status = 'suspended' WHERE id = ${early}`);
        await slow.wrote;
        await store.whitelist.claimIp(late, '8.8.8.8', '');
        // The worker's snapshot is past the slow transaction's seq and cannot see it; this reader never read there.
        await view.reloadNow();
        expect(view.status()).toMatchObject({ reloads: 2, lastReload: 'worker' });
        expect(view.admissionByIp('8.8.8.8')).toMatchObject({ accountId: late, accountActive: true });
        expect(holesOf(store)).toBe(1);
        await deliveredAtCommit(slow, store, view, early);
      } finally {
        view.close();
        await store.close();
      }
    });

    it('a snapshot taken with an old transaction open (its seq 10,000+ below the head) picks its change up at commit', async () => {
      const { url, store, early, late } = await setup();
      const slow = openWriter(url, (tx) => tx`UPDATE accounts SET status = 'suspended' WHERE id = ${early}`);
      await slow.wrote;
      const raw = connect(url, 1);
      await raw`INSERT INTO change_log (kind, key) SELECT 'ip', '8.8.8.8' FROM generate_series(1, 12000)`;
      await raw.end();
      await store.whitelist.claimIp(late, '8.8.8.8', '');
      const view = follow(store);
      try {
        await view.start();
        await slow.commit();
        await store.whitelist.claimIp(early, '9.9.9.9', '');
        await view.sync();
        expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountId: early, accountActive: false });
      } finally {
        view.close();
        await store.close();
      }
    });

    it('a hole is kept however long its transaction runs (here 2 min on the clock), and delivered at its commit', async () => {
      const { url, clock, store, early, late } = await setup();
      const view = follow(store);
      await view.start();
      try {
        const slow = await gapBehind(url, store, early, late, view);
        // Start-up repair may run for minutes in one transaction: a hole must not be given up on a timer alone.
        for (let i = 0; i < 4; i++) {
          clock.now += 30_000;
          await view.sync();
          expect(holesOf(store)).toBe(1);
        }
        await deliveredAtCommit(slow, store, view, early);
      } finally {
        view.close();
        await store.close();
      }
    });

    it('a hole whose transaction rolled back is forgotten once no older transaction runs, not after a timer', async () => {
      const { url, store, early, late } = await setup();
      const view = follow(store);
      await view.start();
      try {
        const slow = await gapBehind(url, store, early, late, view);
        expect(holesOf(store)).toBe(1);
        await slow.rollback();
        // Gone once no transaction older than the hole runs (cluster-wide: other files' short ones may, briefly).
        const t0 = Date.now();
        do await view.sync();
        while (holesOf(store) > 0 && Date.now() - t0 < 10_000);
        expect(holesOf(store)).toBe(0);
        expect(view.status()).toMatchObject({ state: 'current' });
        expect(view.admissionByIp('8.8.8.8')).toMatchObject({ accountId: late, accountActive: true });
      } finally {
        view.close();
        await store.close();
      }
    });

    it('a gap that commits and is then trimmed away by another node before the next read: the reader reloads', async () => {
      const { url, store, early, late } = await setup();
      const other = await PostgresStore.open(url);
      const view = follow(store);
      await view.start();
      try {
        const slow = await gapBehind(url, store, early, late, view);
        for (let i = 1; i <= 5; i++) await store.whitelist.claimIp(late, `9.9.${i}.1`, '');
        await view.sync(); // the reader's position is the head: not behind the trim below
        await slow.commit();
        expect(await other.changeLog.trim(1)).toBeGreaterThan(0); // the gap's row goes with the trimmed ones
        await store.whitelist.claimIp(early, '9.9.9.9', '');
        await view.sync();
        expect(view.admissionByIp('9.9.9.9')).toMatchObject({ accountId: early, accountActive: false });
        expect(view.status().reloads).toBe(2);
      } finally {
        view.close();
        await Promise.all([store.close(), other.close()]);
      }
    });

    it('a read of changes asked for before a snapshot is adopted leaves the adopted gaps alone, though its transaction starts after (review fix)', async () => {
      // The view notes its generation, asks for changes, and a worker's swap adopts a snapshot with a gap while that
      // read's BEGIN is still on the wire. The read then returns the gap's seq and is discarded by the view; if it had
      // counted as current it would have removed the gap, and the change behind it would never be applied.
      const { store, late } = await setup();
      try {
        const since = await store.changeLog.headSeq();
        await store.whitelist.claimIp(late, '8.8.8.8', '');
        const gap = await store.changeLog.headSeq();
        expect(gap).toBeGreaterThan(since);
        const read = store.changeLog.changesSince(since, 1_000);
        store.changeLog.adoptSnapshot({ gaps: { seqs: [gap], xmax: Number.MAX_SAFE_INTEGER } });
        const out = await read;
        expect(out).not.toBe('behind');
        expect(holesOf(store)).toBe(1);
      } finally {
        await store.close();
      }
    });

    it('two nodes trimming at once take turns; a reader behind the horizon reloads in full', async () => {
      const { url, store, late } = await setup();
      const other = await PostgresStore.open(url);
      const view = follow(store);
      await view.start();
      try {
        for (let i = 1; i <= 60; i++) await store.whitelist.claimIp(late, `9.9.${i}.1`, '');
        const head = await store.changeLog.headSeq();
        const [x, y] = await Promise.all([store.changeLog.trim(10), other.changeLog.trim(10)]);
        expect(x + y).toBe(head - 10);
        expect(Math.min(x, y)).toBe(0);
        expect(await other.changeLog.horizon()).toBe(head - 10);
        await view.sync();
        expect(view.status()).toMatchObject({ seq: head, ips: 60, reloads: 2 });
      } finally {
        view.close();
        await Promise.all([store.close(), other.close()]);
      }
    });
  },
);
