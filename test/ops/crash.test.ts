// kill -9 in the middle of 100-item adds: every item is either fully present (entry and claim) or absent, and
// present exactly when its request's audit record is (a batch and its record commit together: neither or both),
// nothing acknowledged is lost, the database passes PRAGMA integrity_check, and the next start checks it.
// On each store backend.
import { describe, expect, it } from 'vitest';
import { connect } from '../../src/daemon/store/postgres/db.js';
import { dataDirFor, databaseUrlOf, inspectData, makeAccount, startDaemon, ADD, LIST } from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { pub } from './helpers.js';

const LIMITS = ['--rate-limits', 'list=100000,add=100000,delete=100000'];

/**
 * PostgreSQL runs a batch it has already received to its end after the daemon is gone: wait until the dead
 * daemon's backends have finished, so the state read below is final.
 */
async function serverSettled(dataDir: string): Promise<void> {
  const url = databaseUrlOf(dataDir);
  if (!url) return;
  const sql = connect(url, 1, 'crash test');
  try {
    await waitFor(
      "the dead daemon's backends to finish",
      async () => {
        const [r] = await sql<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'proxyd%'`;
        return r!.n === 0;
      },
      15_000,
    );
  } finally {
    await sql.end();
  }
}

async function state(dataDir: string, ips: string[]) {
  const db = await inspectData(dataDir);
  try {
    const count = async (sql: string, ip: string) => (await db.get<{ n: number }>(sql, ip)).n;
    const per = [];
    for (const ip of ips) {
      per.push({
        ip,
        entry: await count('SELECT COUNT(*) AS n FROM whitelist_entries WHERE ip = ? AND deleted_at IS NULL', ip),
        claim: await count("SELECT COUNT(*) AS n FROM ip_claims WHERE ip = ? AND state = 'held'", ip),
      });
    }
    // The IPs the audit records say were added (the account's records: one per acknowledged or committed batch).
    const recorded = new Set<string>();
    for (const r of await db.all<{ details: string }>(
      "SELECT details FROM audit_log WHERE action = 'whitelist.added'",
    )) {
      for (const ip of (JSON.parse(r.details) as { ips: string[] }).ips) recorded.add(ip);
    }
    return { per, recorded, integrity: await db.integrity() };
  } finally {
    await db.close();
  }
}

describe.each(BACKENDS)('crash safety on %s', (backend) => {
  it('SIGKILL during 100-item adds leaves every item whole or absent, and the restart checks the database', async () => {
    const dataDir = await dataDirFor(backend);
    const d = await startDaemon({ dataDir, args: LIMITS });
    const { token } = await makeAccount(dataDir, 'crash@example.com');
    const sent: string[] = [];
    const acked = new Set<string>();
    let next = 0;
    let killed = false;
    const url = `${d.api}${ADD}?api_key=${encodeURIComponent(token)}`;
    const loop = async () => {
      while (!killed) {
        const items = Array.from({ length: 100 }, () => ({ ip: pub(next++) }));
        sent.push(...items.map((i) => i.ip));
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ items }),
          });
          const body = (await res.json()) as { code: number; data: { failed_items: Array<{ ip: string }> } };
          if (body.code === 200 || body.code === 10431) {
            const failed = new Set(body.data.failed_items.map((f) => f.ip));
            for (const i of items) if (!failed.has(i.ip)) acked.add(i.ip);
          }
        } catch {
          return; // the daemon died under us
        }
      }
    };
    const loops = [loop(), loop(), loop(), loop()];
    // Let some batches commit, then kill in the middle of the next ones.
    while (acked.size < 150) await sleep(5);
    await sleep(37);
    killed = true;
    d.proc.kill('SIGKILL');
    await Promise.all(loops);
    await d.exited;
    await serverSettled(dataDir);

    const after = await state(dataDir, sent);
    expect(after.integrity).toBe('ok');
    const torn = after.per.filter((p) => p.entry !== p.claim);
    expect(torn).toEqual([]);
    const present = after.per.filter((p) => p.entry === 1).map((p) => p.ip);
    for (const ip of acked) expect(present).toContain(ip);
    // No IP without its record, no record without its IPs.
    expect([...after.recorded].sort()).toEqual([...present].sort());
    // The kill landed while batches were unanswered: some of what was sent was never acknowledged. On SQLite the
    // daemon commits each item itself, so the kill leaves some absent. On PostgreSQL a batch the server had
    // already received runs to its end after the daemon is gone, so all of them may be present (seen: 600 of 600).
    expect(acked.size).toBeLessThan(sent.length);
    if (backend === 'sqlite') expect(present.length).toBeLessThan(sent.length);

    // The next start takes over the stale lock, checks the database and serves the same data.
    const again = await startDaemon({ dataDir, args: LIMITS });
    try {
      const check = again.logs.map((l) => JSON.parse(l)).find((l) => l.event === 'integrity_check');
      expect(check).toMatchObject({ ok: true, claimsWithoutEntry: 0, entriesWithoutClaim: 0 });
      const res = await fetch(`${again.api}${LIST}?page_size=1&api_key=${encodeURIComponent(token)}`);
      expect(((await res.json()) as { data: { total: number } }).data.total).toBe(present.length);
    } finally {
      expect(await again.stop()).toBe(0);
    }
  });

  it('repairs claims without entries and entries without claims at start', async () => {
    const dataDir = await dataDirFor(backend);
    const { accountId } = await makeAccount(dataDir, 'repair@example.com');
    const db = await inspectData(dataDir, { write: true });
    const now = Math.floor(Date.now() / 1000);
    // A claim with no entry (released at start) and an entry with no claim on a free IP (claim restored).
    await db.run(
      "INSERT INTO ip_claims (ip, account_id, state, releasing_since, version) VALUES ('8.8.4.1', ?, 'held', NULL, 1)",
      accountId,
    );
    await db.run(
      "INSERT INTO whitelist_entries (account_id, ip, remark, status, created_at, deleted_at, claim_version) VALUES (?, '8.8.4.2', '', 1, ?, NULL, 1)",
      accountId,
      now,
    );
    await db.close();
    const d = await startDaemon({ dataDir });
    try {
      const check = d.logs.map((l) => JSON.parse(l)).find((l) => l.event === 'integrity_check');
      expect(check).toMatchObject({
        ok: true,
        claimsWithoutEntry: 1,
        entriesWithoutClaim: 1,
        repaired: { claimsReleased: 1, claimsRestored: 1, entriesRemoved: 0 },
      });
    } finally {
      await d.stop();
    }
    const s = await state(dataDir, ['8.8.4.1', '8.8.4.2']);
    expect(s.per).toEqual([
      { ip: '8.8.4.1', entry: 0, claim: 0 },
      { ip: '8.8.4.2', entry: 1, claim: 1 },
    ]);
  });
});
