// What the PostgreSQL backend adds over SQLite: several nodes (here: several pools) on one database.
// Migrations run once when nodes start together; creates and rate hits stay exact under real concurrency.
import { afterEach, describe, expect, it } from 'vitest';
import { PG_MIGRATIONS } from '../../../src/daemon/store/postgres/migrations.js';
import { PostgresStore } from '../../../src/daemon/store/postgres/index.js';
import { BACKENDS, createDatabase, PG_TEST_SOCKET_ENV } from '../../helpers/postgres.js';

const open: PostgresStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function nodes(url: string, n: number): Promise<PostgresStore[]> {
  const stores = await Promise.all(Array.from({ length: n }, () => PostgresStore.open(url)));
  open.push(...stores);
  return stores;
}

describe.runIf(BACKENDS.includes('postgres'))('PostgreSQL backend across nodes', () => {
  it('migrates once when four nodes start together on an empty database', async () => {
    const url = await createDatabase(undefined, { unmigrated: true });
    const [a] = await nodes(url, 4);
    const { default: postgres } = await import('#postgres');
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ version: number }[]>`SELECT version FROM proxyd_schema ORDER BY version`;
      expect(rows.map((r) => r.version)).toEqual(PG_MIGRATIONS.map((_, i) => i + 1));
    } finally {
      await sql.end();
    }
    expect(await a!.ping()).toBe(true);
  });

  it('gives one account per email and one proxy user per name when nodes race (no check-then-insert)', async () => {
    const [a, b] = await nodes(await createDatabase(), 2);
    const emails = Array.from({ length: 20 }, (_, i) => (i % 2 ? 'Race@Example.com' : 'race@example.com'));
    const created = await Promise.all(emails.map((e, i) => (i % 2 ? a! : b!).accounts.create(e, 'hash', true)));
    const winners = created.filter((c) => c !== 'exists');
    expect(winners).toHaveLength(1);
    const owner = winners[0] as { id: number };
    const users = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a! : b!).proxyUsers.create(owner.id, 'racer', 'hash')),
    );
    expect(users.filter((u) => u !== 'exists')).toHaveLength(1);
  });

  it('finds no account for an email with a NUL, as SQLite does (the console log-in with one was a 500)', async () => {
    const [a] = await nodes(await createDatabase(), 1);
    expect(await a!.accounts.create('nul@example.com', 'hash', true)).not.toBe('exists');
    expect(await a!.accounts.findByEmail('nul\u0000@example.com')).toBeNull();
    expect(await a!.accounts.findByEmail('NUL@example.com')).not.toBeNull();
  });

  it('keeps a rate limit exact across nodes: 10 of 30 concurrent hits allowed', async () => {
    const [a, b, c] = await nodes(await createDatabase(), 3);
    const now = Date.now();
    const hits = await Promise.all(
      Array.from({ length: 30 }, (_, i) => [a!, b!, c!][i % 3]!.sharedRateHits().hit('tok:list:x', 10, 60_000, now)),
    );
    expect(hits.filter((h) => h !== 'busy' && h.allowed)).toHaveLength(10);
    const peek = await a!.sharedRateHits().peek('tok:list:x', 60_000, now);
    expect(peek).toMatchObject({ count: 10 });
    // The window slides: 60 s later the ten hits have left it.
    expect(await b!.sharedRateHits().hit('tok:list:x', 10, 60_000, now + 60_000)).toMatchObject({
      allowed: true,
      count: 1,
    });
  });

  it("reaches the server over a Unix socket with libpq's ?host=/dir, and never shows the password", async () => {
    const url = new URL(await createDatabase());
    const socket = `postgres://${url.username}:secret-pw@localhost:${url.port}${url.pathname}?host=${encodeURIComponent(process.env[PG_TEST_SOCKET_ENV]!)}`;
    const [s] = await nodes(socket, 1);
    expect(await s!.ping()).toBe(true);
    expect(s!.location).not.toContain('secret-pw');
  });

  it('hands every node the same console secret', async () => {
    const [a, b] = await nodes(await createDatabase(), 2);
    const candidates = ['a'.repeat(43), 'b'.repeat(43)];
    const [sa, sb] = await Promise.all([
      a!.fleetSecret('console_session', candidates[0]!),
      b!.fleetSecret('console_session', candidates[1]!),
    ]);
    expect(sa).toBe(sb);
    expect(candidates).toContain(sa); // whichever node wrote first; the other reads it
    expect(await a!.fleetSecret('console_session', 'c'.repeat(43))).toBe(sa); // stored once, never replaced
  });
});
