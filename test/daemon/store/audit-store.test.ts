// The audit log in the store, on each backend: records chained per account and written in their change's own
// transaction (a record that cannot be written undoes the change; a change that fails leaves no record), the chain
// check naming the first edited, deleted or reordered record, isolation between accounts, retention that keeps
// chains verifiable from their anchor, once-only system records; on PostgreSQL two nodes writing one account's
// records at once keep one chain, and a connection killed mid-action leaves neither the change nor its record.
import postgres from '#postgres';
import { afterEach, describe, expect, it } from 'vitest';
import { auditVerify } from '../../../src/daemon/admin/audit.js';
import { AuditKeeper } from '../../../src/daemon/services/audit-keeper.js';
import { auditDraft, verifyChains, type AuditContext } from '../../../src/daemon/services/audit.js';
import { WhitelistService } from '../../../src/daemon/services/whitelist.js';
import { openCountryLookup } from '../../../src/daemon/services/geo.js';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { canonicalJson, chainHash, GENESIS_HASH, recordJson } from '../../../src/daemon/store/audit-chain.js';
import { databaseUrlOf, dataDirFor, inspectDb } from '../../helpers/daemon.js';
import { BACKENDS, type BackendName } from '../../helpers/postgres.js';
import { waitFor } from '../../helpers/wait.js';

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const ctx = (id = 'tester'): AuditContext => ({
  actor: { type: 'operator', id },
  sourceIp: '203.0.113.9',
  requestId: `req-${Math.random().toString(36).slice(2)}`,
});

/** A store on a fresh database, a clock the test moves, and raw SQL on the same database for tampering. */
async function open(backend: BackendName) {
  const dataDir = await dataDirFor(backend);
  const clock = { now: Date.UTC(2026, 10, 21, 10, 0, 0) };
  const url = databaseUrlOf(dataDir);
  const store = await openStore({ dataDir, databaseUrl: url, nowMs: () => clock.now });
  closers.push(() => store.close());
  let raw: { run(sql: string): Promise<void>; rows<T>(sql: string): Promise<T[]> };
  if (url) {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    closers.push(() => sql.end({ timeout: 1 }));
    raw = {
      run: async (q) => {
        for (const one of q.split(';').filter((x) => x.trim() !== '' && !/\$\$/.test(q))) await sql.unsafe(one);
        if (/\$\$/.test(q)) await sql.unsafe(q).simple();
      },
      rows: async <T>(q: string) => [...(await sql.unsafe(q))] as T[],
    };
  } else {
    const db = await inspectDb(dataDir, { write: true });
    closers.push(() => db.close());
    raw = {
      run: async (q) =>
        void (/BEGIN/.test(q)
          ? db.exec(q)
          : q
              .split(';')
              .filter((x) => x.trim() !== '')
              .forEach((one) => db.run(one))),
      rows: async <T>(q: string) => db.all<T>(q),
    };
  }
  const account = async (email: string) => {
    const a = await store.accounts.create(email, 'x', true);
    if (a === 'exists') throw new Error('exists');
    return a.id;
  };
  return { store, clock, raw, account, url, dataDir };
}

describe.each(BACKENDS)('the audit log on %s', (backend) => {
  it("chains each account's records: seq from 1, each hash over the previous one and its own canonical JSON", async () => {
    const { store, account } = await open(backend);
    const a = await account('chain@example.com');
    const c = ctx();
    await store.audit.append({ ...auditDraft(c, 'console.login_failed', null, { step: 'password' }), accountId: a });
    await store.webhooks.set(
      { accountId: a, url: 'https://hooks.example/x', thresholds: [80], secret: 'whsec_not-recorded' },
      auditDraft(c, 'webhook.set', 'https://hooks.example/x', { thresholds: [80] }),
    );
    await store.tokens.replace(a, 'ak-chain', Buffer.alloc(32), null, auditDraft(c, 'token.reset', 'ak-chain'));
    const { rows } = await store.audit.list({ accountId: a, limit: 10, offset: 0, order: 'oldest' });
    expect(rows.map((r) => [r.seq, r.action])).toEqual([
      [1, 'console.login_failed'],
      [2, 'webhook.set'],
      [3, 'token.reset'],
    ]);
    expect(rows[0]!.prevHash).toBe(GENESIS_HASH);
    for (const [i, r] of rows.entries()) {
      if (i > 0) expect(r.prevHash).toBe(rows[i - 1]!.hash);
      expect(r.hash).toBe(chainHash(r.prevHash, recordJson(r, canonicalJson(r.details))));
      expect(r).toMatchObject({
        actor: { type: 'operator', id: 'tester' },
        sourceIp: '203.0.113.9',
        requestId: c.requestId,
      });
    }
    expect(JSON.stringify(rows)).not.toContain('whsec_');
    expect(await store.audit.heads(a)).toEqual([
      { accountId: a, seq: 3, hash: rows[2]!.hash, anchorSeq: 0, anchorHash: GENESIS_HASH },
    ]);
    expect((await verifyChains(store)).ok).toBe(true);
  });

  it('a whitelist batch and its one record commit together: the IPs added, none added no record', async () => {
    const { store, account } = await open(backend);
    const a = await account('batch@example.com');
    const b = await account('other@example.com');
    const wl = new WhitelistService(store, await openCountryLookup(), { error: () => {} });
    await wl.add(b, [{ ip: '198.51.100.77' }]);
    const out = await wl.add(
      a,
      [{ ip: '8.8.8.8' }, { ip: '198.51.100.77' }, { ip: 'not-an-ip' }, { ip: '8.8.4.4' }],
      ctx(),
    );
    expect(out.data.success_count).toBe(2);
    let { rows } = await store.audit.list({ accountId: a, limit: 10, offset: 0 });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      action: 'whitelist.added',
      details: { ips: ['8.8.8.8', '8.8.4.4'], requested: 4 },
    });
    // Nothing added: nothing to record.
    await wl.add(a, [{ ip: '8.8.8.8' }], ctx());
    await wl.delete(a, ['1.1.1.1'], ctx());
    expect((await store.audit.list({ accountId: a, limit: 10, offset: 0 })).total).toBe(1);
    await wl.delete(a, ['8.8.8.8', '1.1.1.1'], ctx());
    ({ rows } = await store.audit.list({ accountId: a, limit: 10, offset: 0 }));
    expect(rows[0]).toMatchObject({ action: 'whitelist.deleted', details: { ips: ['8.8.8.8'], requested: 2 } });
  });

  it('a record that cannot be written undoes its change: neither is left (one transaction)', async () => {
    const { store, account, raw } = await open(backend);
    const a = await account('atomic@example.com');
    const wl = new WhitelistService(store, await openCountryLookup(), { error: () => {} });
    // Any insert into the audit log fails from now on, as a disk or a broken connection would fail it.
    if (backend === 'postgres') {
      await raw.run(`CREATE FUNCTION t_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
                     CREATE TRIGGER t_refuse BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION t_refuse();`);
    } else {
      await raw.run(
        `CREATE TRIGGER t_refuse BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;`,
      );
    }
    await expect(wl.add(a, [{ ip: '9.9.9.9' }], ctx())).resolves.toMatchObject({ data: { success_count: 0 } });
    await expect(
      store.tokens.replace(a, 'ak-atomic', Buffer.alloc(32), null, auditDraft(ctx(), 'token.reset', 'ak-atomic')),
    ).rejects.toThrow();
    await expect(store.accounts.setStatus(a, 'suspended', auditDraft(ctx(), 'account.suspended'))).rejects.toThrow();
    await expect(
      store.proxyUsers.create(a, 'atomic-user', 'h', auditDraft(ctx(), 'proxy_user.created', 'atomic-user')),
    ).rejects.toThrow();
    expect((await store.whitelist.list(a, { limit: 10, offset: 0 })).total).toBe(0);
    expect(await store.tokens.activeToken(a)).toBeNull();
    expect((await store.accounts.get(a))!.status).toBe('active');
    expect(await store.proxyUsers.listForAccount(a)).toEqual([]);
    expect((await store.audit.list({ accountId: a, limit: 10, offset: 0 })).total).toBe(0);
  });

  it('verify names the first edited, deleted or reordered record, and a head kept elsewhere catches a rewritten chain', async () => {
    const { store, account, raw } = await open(backend);
    const a = await account('tamper@example.com');
    const b = await account('fine@example.com');
    for (let i = 0; i < 6; i++) {
      await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed', null, { n: i }), accountId: a });
      await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed', null, { n: i }), accountId: b });
    }
    expect(await auditVerify(store, {})).toMatchObject({ message: null, json: { ok: true, accounts: 2, records: 12 } });
    const idOf = async (seq: number) =>
      Number(
        (await raw.rows<{ id: number }>(`SELECT id FROM audit_log WHERE account_id = ${a} AND seq = ${seq}`))[0]!.id,
      );

    // Edited: a record's details changed.
    const id3 = await idOf(3);
    await raw.run(`UPDATE audit_log SET details = '{"n":99}' WHERE id = ${id3}`);
    let r = await auditVerify(store, {});
    expect(r.json).toMatchObject({
      ok: false,
      broken: { account: 'tamper@example.com', record_id: id3, seq: 3, problem: 'edited' },
    });
    expect(r.message).toContain(`record ${id3} (seq 3)`);
    expect(await auditVerify(store, { email: 'fine@example.com' })).toMatchObject({ message: null });
    await raw.run(`UPDATE audit_log SET details = '{"n":2}' WHERE id = ${id3}`);
    expect((await auditVerify(store, {})).message).toBeNull();

    // Two records swapped (their places in the chain exchanged).
    const [id4, id5] = [await idOf(4), await idOf(5)];
    await raw.run(
      `UPDATE audit_log SET seq = -1 WHERE id = ${id4}; UPDATE audit_log SET seq = 4 WHERE id = ${id5}; UPDATE audit_log SET seq = 5 WHERE id = ${id4}`,
    );
    r = await auditVerify(store, {});
    expect(r.json).toMatchObject({ ok: false, broken: { record_id: id5, seq: 4 } });
    expect(['reordered', 'edited']).toContain((r.json as { broken: { problem: string } }).broken.problem);
    await raw.run(
      `UPDATE audit_log SET seq = -1 WHERE id = ${id5}; UPDATE audit_log SET seq = 4 WHERE id = ${id4}; UPDATE audit_log SET seq = 5 WHERE id = ${id5}`,
    );
    expect((await auditVerify(store, {})).message).toBeNull();

    // A head kept before the chain was rewritten whole (here: its last record re-hashed after an edit).
    const [kept] = await store.audit.heads(a);
    const heads = `${process.env.TMPDIR ?? '/tmp'}/heads-${backend}-${process.pid}-${Date.now()}.jsonl`;
    (await import('node:fs')).writeFileSync(
      heads,
      `${JSON.stringify({ account_id: a, seq: kept!.seq, hash: kept!.hash })}\n`,
    );
    expect(await auditVerify(store, { heads })).toMatchObject({ message: null });
    const last = (await store.audit.chain({ accountId: a, seq: kept!.seq - 1 }, 1, a))[0]!;
    const details = '{"n":"forged"}';
    const forged = chainHash(last.prevHash, recordJson(last, details));
    await raw.run(
      `UPDATE audit_log SET details = '${details}', hash = '${forged}' WHERE id = ${last.id}; UPDATE audit_heads SET hash = '${forged}' WHERE account_id = ${a}`,
    );
    expect((await auditVerify(store, {})).message).toBeNull(); // consistent on its own: only the kept head tells
    r = await auditVerify(store, { heads });
    expect(r.json).toMatchObject({ ok: false, broken: { account_id: a, seq: kept!.seq } });
    await raw.run(
      `UPDATE audit_log SET details = '${last.detailsJson}', hash = '${last.hash}' WHERE id = ${last.id}; UPDATE audit_heads SET hash = '${last.hash}' WHERE account_id = ${a}`,
    );
    expect((await auditVerify(store, { heads })).message).toBeNull();

    // Deleted: a record in the middle, then the newest one.
    const id2 = await idOf(2);
    await raw.run(`DELETE FROM audit_log WHERE id = ${id2}`);
    r = await auditVerify(store, {});
    expect(r.json).toMatchObject({ ok: false, broken: { record_id: id3, seq: 3, problem: 'deleted' } });
    expect(r.message).toContain('missing');
  });

  it('deleting the newest record is caught by the head', async () => {
    const { store, account, raw } = await open(backend);
    const a = await account('tail@example.com');
    for (let i = 0; i < 3; i++)
      await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed'), accountId: a });
    await raw.run(`DELETE FROM audit_log WHERE account_id = ${a} AND seq = 3`);
    const r = await auditVerify(store, {});
    expect(r.json).toMatchObject({ ok: false, broken: { account_id: a, record_id: null, problem: 'deleted' } });
    expect(r.message).toContain('newest records were deleted');
  });

  it('a customer sees only their own records', async () => {
    const { store, account } = await open(backend);
    const a = await account('mine@example.com');
    const b = await account('theirs@example.com');
    await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed'), accountId: a });
    await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed'), accountId: b });
    await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed'), accountId: b });
    const { AuditService } = await import('../../../src/daemon/services/audit.js');
    const svc = new AuditService(store);
    const page = await svc.list(a, { page: 1, page_size: 50 });
    expect(page.total).toBe(1);
    expect(page.items.every((r) => r.account === 'mine@example.com')).toBe(true);
    expect((await svc.list(b, { page: 1, page_size: 50, action: 'console' })).total).toBe(2);
  });

  it('retention removes a prefix of each chain and keeps it verifiable from its anchor; a system record once per key', async () => {
    const { store, account, clock } = await open(backend);
    const a = await account('old@example.com');
    for (let i = 0; i < 4; i++) {
      await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed', null, { i }), accountId: a });
      clock.now += 86_400_000;
    }
    const before = (await store.audit.list({ accountId: a, limit: 10, offset: 0, order: 'oldest' })).rows;
    const keeper = new AuditKeeper(store, { node: 'node-a', retentionMs: 2 * 86_400_000 + 1, nowMs: () => clock.now });
    expect(await keeper.prune()).toBe(2);
    const [head] = await store.audit.heads(a);
    expect(head).toMatchObject({ seq: 4, anchorSeq: 2, anchorHash: before[1]!.hash });
    expect(await verifyChains(store)).toMatchObject({ ok: true, records: 2 });
    await store.audit.append({ ...auditDraft(ctx(), 'console.login_failed'), accountId: a });
    expect(await verifyChains(store)).toMatchObject({ ok: true, records: 3 });

    await store.plans.set({
      accountId: a,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: clock.now - 1000,
    });
    const other = new AuditKeeper(store, { node: 'node-b', retentionMs: 400 * 86_400_000, nowMs: () => clock.now });
    expect(await keeper.recordExpiries()).toBe(1);
    expect(await other.recordExpiries()).toBe(0);
    const expired = (await store.audit.list({ accountId: a, actions: ['plan.expired'], limit: 10, offset: 0 })).rows;
    expect(expired).toHaveLength(1);
    expect(expired[0]).toMatchObject({
      actor: { type: 'system', id: 'node-a' },
      details: { expires_at: new Date(clock.now - 1000).toISOString() },
    });
  });
});

describe.runIf(BACKENDS.includes('postgres'))('the audit log on PostgreSQL, a fleet', () => {
  it("two nodes writing one account's records at once keep one valid chain", async () => {
    const { store, account, url, dataDir } = await open('postgres');
    const other = await openStore({ dataDir, databaseUrl: url });
    closers.push(() => other.close());
    const a = await account('fleet@example.com');
    const write = (s: Store, node: string, n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          s.audit.append({ ...auditDraft(ctx(node), 'console.login_failed', null, { i }), accountId: a }),
        ),
      );
    await Promise.all([
      write(store, 'node-1', 150),
      write(other, 'node-2', 150),
      ...[0, 1, 2].map(() =>
        other.tokens.replace(
          a,
          `ak-${Math.random()}`,
          Buffer.alloc(32),
          null,
          auditDraft(ctx('node-2'), 'token.reset'),
        ),
      ),
    ]);
    const report = await verifyChains(store, a);
    expect(report).toMatchObject({ ok: true, records: 303 });
    expect((await store.audit.heads(a))[0]!.seq).toBe(303);
  });

  it('a connection killed mid-action leaves neither the change nor its record; left alone, both', async () => {
    const { store, account, url } = await open('postgres');
    const a = await account('killed@example.com');
    const wl = new WhitelistService(store, await openCountryLookup(), { error: () => {} });
    const holder = postgres(url!, { max: 1, onnotice: () => {} });
    const locker = postgres(url!, { max: 1, onnotice: () => {} });
    closers.push(
      () => holder.end({ timeout: 1 }),
      () => locker.end({ timeout: 1 }),
    );
    // Another session holds the account's chain head: the batch claims its IPs, then waits on the head.
    await holder`INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash) VALUES (${a}, 0, ${GENESIS_HASH}, 0, ${GENESIS_HASH})`;
    const h = await locker.reserve();
    await h`BEGIN`;
    await h`SELECT 1 FROM audit_heads WHERE account_id = ${a} FOR UPDATE`;
    const pending = wl.add(a, [{ ip: '9.9.9.9' }, { ip: '8.8.8.8' }], ctx()).then(
      () => 'done',
      (e: Error) => e.name,
    );
    // The batch's backend, waiting on the head's lock mid-action: killed.
    const waiting = await waitFor(
      'the batch waiting on the chain head',
      async () => {
        const rows = await holder<
          { pid: number }[]
        >`SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audit_heads%' AND pid <> pg_backend_pid()`;
        return rows[0]?.pid ?? null;
      },
      10_000,
    );
    await holder`SELECT pg_terminate_backend(${waiting})`;
    expect(await pending).toBe('StoreUnavailableError');
    await h`ROLLBACK`;
    h.release();
    expect((await store.whitelist.list(a, { limit: 10, offset: 0 })).total).toBe(0);
    expect((await store.audit.list({ accountId: a, limit: 10, offset: 0 })).total).toBe(0);
    const claims = await holder<{ n: number }[]>`SELECT count(*)::int AS n FROM ip_claims WHERE account_id = ${a}`;
    expect(claims[0]!.n).toBe(0);
    // The same batch again, undisturbed: both.
    await waitFor('the store answering again', async () => (await store.ping()) || null, 10_000);
    const out = await wl.add(a, [{ ip: '9.9.9.9' }, { ip: '8.8.8.8' }], ctx());
    expect(out.data.success_count).toBe(2);
    expect((await store.audit.list({ accountId: a, limit: 10, offset: 0 })).rows[0]).toMatchObject({
      action: 'whitelist.added',
      details: { ips: ['9.9.9.9', '8.8.8.8'] },
    });
    expect((await verifyChains(store, a)).ok).toBe(true);
  });
});
