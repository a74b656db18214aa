// The one-call paths (docs/decisions.md#d-014, "a batch is one call" and "admission is one round trip"):
// claimIps / releaseIps give the outcomes of one-by-one processing on both backends, and on PostgreSQL
// tokens.checkCall answers every admission case as the stepwise checks do.
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../../../src/daemon/store/postgres/db.js';
import { PostgresStore } from '../../../src/daemon/store/postgres/index.js';
import { SqliteStore } from '../../../src/daemon/store/sqlite/index.js';
import type { ApiCallCheck, Store } from '../../../src/daemon/store/index.js';
import { mintToken, sha256 } from '../../../src/daemon/secrets.js';
import { BACKENDS, createDatabase } from '../../helpers/postgres.js';
import { tempDir } from '../../helpers/daemon.js';

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function openBackend(backend: string, nowMs: () => number = Date.now): Promise<{ store: Store; url?: string }> {
  if (backend === 'postgres') {
    const url = await createDatabase();
    const store = await PostgresStore.open(url, { nowMs });
    open.push(store);
    return { store, url };
  }
  const store = SqliteStore.open(tempDir(), { nowMs });
  open.push(store);
  return { store };
}

async function account(store: Store, email: string): Promise<number> {
  const a = await store.accounts.create(email, 'hash', true);
  if (a === 'exists') throw new Error('exists');
  return a.id;
}

describe.each(BACKENDS)('batches on %s', (backend) => {
  it("claims in item order, each on its own: a repeat, another account's IP and a free one", async () => {
    const { store } = await openBackend(backend);
    const a = await account(store, 'a@example.com');
    const b = await account(store, 'b@example.com');
    expect(await store.whitelist.claimIp(b, '9.9.9.9', 'b has it')).toBe('added');
    const out = await store.whitelist.claimIps(a, [
      { ip: '8.8.8.8', remark: 'first' },
      { ip: '8.8.8.8', remark: 'again' },
      { ip: '9.9.9.9', remark: 'not ours' },
      { ip: '1.1.1.1', remark: 'last' },
    ]);
    expect(out).toEqual(['added', 'already_listed', 'unavailable', 'added']);
    const page = await store.whitelist.list(a, { limit: 10, offset: 0 });
    // Newest first, and among one second's entries the later item first: the order of one-by-one processing.
    expect(page.items.map((e) => [e.ip, e.remark])).toEqual([
      ['1.1.1.1', 'last'],
      ['8.8.8.8', 'first'],
    ]);
    expect(page.total).toBe(2);
    expect(await store.whitelist.claimIps(a, [])).toEqual([]);
  });

  it("releases in item order: a repeat is absent the second time, another account's IP is absent", async () => {
    const { store } = await openBackend(backend);
    const a = await account(store, 'a@example.com');
    const b = await account(store, 'b@example.com');
    await store.whitelist.claimIps(a, [
      { ip: '8.8.8.8', remark: '' },
      { ip: '1.1.1.1', remark: '' },
    ]);
    await store.whitelist.claimIp(b, '9.9.9.9', '');
    expect(await store.whitelist.releaseIps(a, ['8.8.8.8', '8.8.8.8', '9.9.9.9', '1.1.1.1'])).toEqual([
      'deleted',
      'absent',
      'absent',
      'deleted',
    ]);
    // Released at once: b may take 8.8.8.8 now.
    expect(await store.whitelist.claimIp(b, '8.8.8.8', '')).toBe('added');
  });
});

describe.runIf(BACKENDS.includes('postgres'))('PostgreSQL one-call paths', () => {
  it('runs batches on the background connections, so no call waits behind one on a shared connection', async () => {
    const { store, url } = await openBackend('postgres');
    const id = await account(store, 'lanes@example.com');
    const t = mintToken();
    await store.tokens.replace(id, t.accessKey, t.secretHash);
    const batch = Array.from({ length: 50 }, (_, i) => ({ ip: `8.8.${i}.1`, remark: '' }));
    // A batch and calls in flight together; each backend's last statement shows which pool sent what.
    await Promise.all([
      store.whitelist.claimIps(id, batch),
      store.whitelist.releaseIps(id, ['8.8.0.1']),
      ...Array.from({ length: 8 }, (_, i) =>
        store.tokens.checkCall!({
          badKey: 'bad:127.0.0.9',
          badLimit: 20,
          accessKey: t.accessKey,
          secretHash: t.secretHash,
          rateKey: `tok:list:${i}`,
          rateLimit: 60,
          windowMs: 60_000,
          nowMs: Date.now(),
          list: { limit: 20, offset: 0 },
        }),
      ),
    ]);
    const peek = connect(url!, 1, 'test peek');
    try {
      const rows = await peek<{ app: string; query: string }[]>`
        SELECT application_name AS app, query FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'proxyd%'`;
      const byApp = (app: string) => rows.filter((r) => r.app === app).map((r) => r.query);
      expect(byApp('proxyd background').some((q) => /CALL proxyd_(claim|release)_batch/.test(q))).toBe(true);
      expect(byApp('proxyd background').some((q) => /proxyd_api_admit/.test(q))).toBe(false);
      expect(byApp('proxyd').length).toBeGreaterThan(0);
      expect(byApp('proxyd').some((q) => /CALL/.test(q))).toBe(false);
      // Migration 4: the page comes as json (printed once), not jsonb.
      const [fn] = await peek<
        { result: string }[]
      >`SELECT pg_get_function_arguments('proxyd_api_admit'::regproc) AS result`;
      expect(fn!.result).toMatch(/o_page json(,|$)/);
    } finally {
      await peek.end();
    }
  });

  it('admits in one call with the stepwise answers: lock-out, every 401 cause, the limit, the page', async () => {
    let now = Date.UTC(2026, 10, 23, 12, 0, 0);
    const { store } = await openBackend('postgres', () => now);
    const checkCall = store.tokens.checkCall!.bind(store.tokens);
    const id = await account(store, 'a@example.com');
    const t = mintToken();
    await store.tokens.replace(id, t.accessKey, t.secretHash);
    await store.whitelist.claimIps(id, [
      { ip: '8.8.8.8', remark: 'one' },
      { ip: '8.8.4.4', remark: 'two' },
    ]);
    await store.whitelist.setStatus(id, '8.8.4.4', 2);
    const req = (over: Partial<ApiCallCheck> = {}): ApiCallCheck => ({
      badKey: 'bad:127.0.0.9',
      badLimit: 3,
      accessKey: t.accessKey,
      secretHash: t.secretHash,
      rateKey: `tok:list:${t.accessKey}`,
      rateLimit: 2,
      windowMs: 60_000,
      nowMs: now,
      ...over,
    });

    const ok = await checkCall(req({ list: { limit: 1, offset: 0 } }));
    expect(ok).toMatchObject({ kind: 'ok', accountId: id, accessKey: t.accessKey });
    if (ok === 'busy' || ok.kind !== 'ok') throw new Error('not ok');
    expect(ok.page!.total).toBe(2);
    expect(ok.page!.items).toEqual([
      expect.objectContaining({ ip: '8.8.4.4', remark: 'two', status: 2, account_id: id }),
    ]);
    // Filters, and a page past the end still carries the total.
    const filtered = await checkCall(req({ rateKey: 'tok:list:other', list: { status: 1, limit: 20, offset: 0 } }));
    expect(filtered !== 'busy' && filtered.kind === 'ok' && filtered.page!.items.map((e) => e.ip)).toEqual(['8.8.8.8']);
    const past = await checkCall(req({ rateKey: 'tok:list:other2', list: { ip: '8.8.8.8', limit: 20, offset: 20 } }));
    expect(past !== 'busy' && past.kind === 'ok' && past.page).toEqual({ items: [], total: 1 });
    // Not a list call: no page.
    const noPage = await checkCall(req({ rateKey: 'tok:add:x' }));
    expect(noPage !== 'busy' && noPage.kind === 'ok' && noPage.page).toBeUndefined();

    // The token's limit (2 in the window): the third is refused, with when the oldest hit leaves.
    expect(await checkCall(req())).toMatchObject({ kind: 'ok' });
    const limited = await checkCall(req());
    expect(limited).toEqual({ kind: 'limited', oldestAtMs: now });

    // Every 401 cause is one answer, and each counts against the source IP.
    expect(await checkCall(req({ secretHash: sha256('wrong') }))).toEqual({ kind: 'invalid' });
    expect(await checkCall(req({ accessKey: 'ak00000000000000000000' }))).toEqual({ kind: 'invalid' });
    await store.accounts.setStatus(id, 'suspended');
    expect(await checkCall(req({ rateKey: 'tok:list:y' }))).toEqual({ kind: 'invalid' });
    // Three invalid: the source IP is locked out, before the token is looked at (a good token too).
    await store.accounts.setStatus(id, 'active');
    expect(await checkCall(req({ rateKey: 'tok:list:z' }))).toEqual({ kind: 'locked', oldestAtMs: now });
    // The window moves on: the lock-out ends, the token works again.
    now += 60_001;
    expect(await checkCall(req({ nowMs: now, rateKey: 'tok:list:z' }))).toMatchObject({ kind: 'ok' });

    // Expired and disabled tokens are invalid too.
    const e = mintToken();
    await store.tokens.replace(id, e.accessKey, e.secretHash, Math.floor(now / 1000));
    expect(
      await checkCall(req({ nowMs: now, badKey: 'bad:127.0.0.10', accessKey: e.accessKey, secretHash: e.secretHash })),
    ).toEqual({ kind: 'invalid' });
    expect(
      await checkCall(req({ nowMs: now, badKey: 'bad:127.0.0.10', accessKey: t.accessKey, secretHash: t.secretHash })),
    ).toEqual({ kind: 'invalid' });
  });
});
