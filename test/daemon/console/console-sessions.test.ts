// Console sessions in the store, on each backend: a session read from the store and written back after it was
// signed out elsewhere stays ended (the request in flight does not bring it back); a new one is made; the
// Sessions card's listing; signing out records on the session's account.
import { afterEach, describe, expect, it } from 'vitest';
import type { Session } from 'fastify';
import { StoreSessionAdapter } from '../../../src/daemon/console/session.js';
import { auditDraft } from '../../../src/daemon/services/audit.js';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

const cb = <T>(f: (done: (err?: unknown, v?: T) => void) => void) =>
  new Promise<T>((resolve, reject) => f((err, v) => (err ? reject(err as Error) : resolve(v as T))));

describe.each(BACKENDS)('console sessions on %s', (backend) => {
  it('a session signed out while its request ran is not written back; a new one is', async () => {
    const dataDir = await dataDirFor(backend);
    const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
    stores.push(store);
    const a = await store.accounts.create(`s-${backend}@example.com`, 'x', true);
    if (a === 'exists') throw new Error('exists');
    const adapter = new StoreSessionAdapter(store.sessions);
    const fresh = {
      accountId: a.id,
      loginAtMs: 1,
      cookie: { expires: new Date(Date.now() + 60_000) },
    } as unknown as Session;
    await cb((done) => adapter.set('sid-one', fresh, done));
    await cb((done) => adapter.set('sid-two', { ...fresh } as Session, done));
    expect((await store.sessions.listForAccount(a.id)).map((s) => s.sid).sort()).toEqual(['sid-one', 'sid-two']);

    // A request reads its session, the session is signed out elsewhere, the request ends and writes it back.
    const read = await cb<Session | null>((done) => adapter.get('sid-one', done));
    expect(read!._row).toBe(1);
    await store.sessions.destroy(
      'sid-one',
      auditDraft(
        { actor: { type: 'console', id: 'other' }, sourceIp: '127.0.0.1', requestId: 'r1' },
        'console.session_ended',
        'x',
      ),
    );
    await cb((done) => adapter.set('sid-one', read!, done));
    expect(await store.sessions.get('sid-one')).toBeNull();
    // A live one is written back, without the mark.
    const two = await cb<Session | null>((done) => adapter.get('sid-two', done));
    await cb((done) => adapter.set('sid-two', { ...two, seenAtMs: 42 } as Session, done));
    const row = await store.sessions.get('sid-two');
    expect(JSON.parse(row!.data)).toMatchObject({ seenAtMs: 42 });
    expect(row!.data).not.toContain('_row');
    const { rows } = await store.audit.list({ accountId: a.id, limit: 10, offset: 0 });
    expect(rows.map((r) => r.action)).toEqual(['console.session_ended']);
  });
});
