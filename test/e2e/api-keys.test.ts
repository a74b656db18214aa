// API keys end to end: `proxyd admin key create|list|revoke` against running daemons, over real sockets. On one
// PostgreSQL, a key revoked (or expiring) is refused by every node within 1 s; on SQLite by the daemon that serves the
// data dir. No key, token or api_key value reaches a log line, a key sent in a query string included; bad flags
// are named and change nothing; `--key-limits` is checked at start (exit 2).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USAGE_PATHS } from '../../src/contract/paths.js';
import {
  admin,
  LIST,
  makeAccount,
  run,
  PROXYD,
  startDaemon,
  tempDir,
  dataDirFor,
  databaseUrlOf,
  type Daemon,
} from '../helpers/daemon.js';
import { BACKENDS, postgresSkipReason } from '../helpers/postgres.js';
import { patient } from '../helpers/patience.js';

async function get(base: string, path: string, headers: Record<string, string> = {}) {
  const r = await fetch(`${base}${path}`, { headers });
  return { status: r.status, body: (await r.json()) as { code: number; message: string; data: any } };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Polls until `fn` is true; how long it took (ms), or throws past `limitMs` (scaled by the machine's load). */
async function within(limitMs: number, fn: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  const deadline = start + patient(limitMs);
  for (;;) {
    if (await fn()) return Date.now() - start;
    if (Date.now() > deadline) throw new Error(`not within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.each(BACKENDS)('proxyd admin key against a running daemon (%s)', (backend) => {
  let d: Daemon;
  let token: string;
  const email = 'e2e-keys@example.com';

  beforeAll(async () => {
    d = await startDaemon({ backend, args: ['--key-limits', '200,50'] });
    ({ token } = await makeAccount(d.dataDir, email));
  }, patient(60_000));
  afterAll(async () => d?.stop());

  it('create prints the key once; it opens usage; list never shows it; revoke refuses it within 1 s', async () => {
    const made = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      email,
      '--name',
      'reporting',
      '--scopes',
      'usage:read',
      '--allowed-ips',
      '127.0.0.1,::1',
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(made.json).toMatchObject({
      name: 'reporting',
      scopes: ['usage:read'],
      expires_at: null,
      allowed_ips: ['127.0.0.1', '::1'],
    });
    expect(made.json.key).toMatch(new RegExp(`^pxk_${made.json.id}_[A-Za-z0-9_-]{43}$`));
    expect((await get(d.api, USAGE_PATHS.summary, bearer(made.json.key))).body.code).toBe(200);
    // The token still opens the whitelist, and only it.
    expect((await get(d.api, `${LIST}?api_key=${encodeURIComponent(token)}`)).body.code).toBe(200);
    expect((await get(d.api, `${USAGE_PATHS.summary}?api_key=${encodeURIComponent(token)}`)).status).toBe(401);

    const listed = await admin(d.dataDir, ['key', 'list', '--email', email]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id)).toContain(made.json.id);
    expect(listed.stdout).not.toContain(made.json.key.split('_').slice(2).join('_'));
    expect(Object.keys(lines[0]).sort()).toEqual([
      'allowed_ips',
      'created_at',
      'expires_at',
      'id',
      'last_used_at',
      'last_used_ip',
      'name',
      'revoked_at',
      'scopes',
      'state',
    ]);

    const revoked = await admin(d.dataDir, ['key', 'revoke', '--email', email, '--id', made.json.id]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.json).toMatchObject({ id: made.json.id, state: 'revoked' });
    await within(1_000, async () => (await get(d.api, USAGE_PATHS.summary, bearer(made.json.key))).status === 401);
    // Revoking again, or another account's or an unknown id: named, exit 1.
    const again = await admin(d.dataDir, ['key', 'revoke', '--email', email, '--id', made.json.id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no API key/);
  });

  it('bad flags are named, exit 1, nothing made', async () => {
    const before = (await admin(d.dataDir, ['key', 'list', '--email', email])).stdout;
    const cases: Array<[string[], RegExp]> = [
      [['--name', 'x', '--scopes', 'usage:read,everything'], /--scopes: unknown scope "everything"/],
      [['--name', 'x', '--scopes', ''], /--scopes/],
      [['--name', '', '--scopes', 'usage:read'], /--name/],
      [['--name', 'x'.repeat(65), '--scopes', 'usage:read'], /--name: expected 1 to 64 characters/],
      [['--name', 'x', '--scopes', 'usage:read', '--expires', '2020-01-01'], /--expires: must be in the future/],
      [['--name', 'x', '--scopes', 'usage:read', '--expires', 'tomorrow'], /--expires/],
      [
        ['--name', 'x', '--scopes', 'usage:read', '--allowed-ips', '10.0.0.0/40'],
        /--allowed-ips: "10.0.0.0\/40" is not an IP address or CIDR/,
      ],
    ];
    for (const [flags, msg] of cases) {
      const r = await admin(d.dataDir, ['key', 'create', '--email', email, ...flags]);
      expect({ flags, code: r.code }).toEqual({ flags, code: 1 });
      expect(r.stderr).toMatch(msg);
      expect(r.stdout).toBe('');
    }
    const missing = await admin(d.dataDir, ['key', 'create', '--email', email, '--name', 'x']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/--scopes/);
    const nobody = await admin(d.dataDir, ['key', 'list', '--email', 'nobody@example.com']);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toMatch(/no account with email nobody@example\.com/);
    expect((await admin(d.dataDir, ['key', 'list', '--email', email])).stdout).toBe(before);
  });

  it('an expiring key stops at its time', async () => {
    const soon = new Date(Date.now() + 3_000).toISOString();
    const made = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      email,
      '--name',
      'short',
      '--scopes',
      'usage:read',
      '--expires',
      soon,
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect((await get(d.api, USAGE_PATHS.summary, bearer(made.json.key))).body.code).toBe(200);
    await within(5_000, async () => (await get(d.api, USAGE_PATHS.summary, bearer(made.json.key))).status === 401);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(soon));
  });

  it('no key, token or api_key value in any log line: keys in the header, the query string and X-API-Key', async () => {
    const made = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      email,
      '--name',
      'logs',
      '--scopes',
      'usage:read',
    ]);
    const key: string = made.json.key;
    await get(d.api, USAGE_PATHS.summary, bearer(key));
    await get(d.api, `${USAGE_PATHS.summary}?api_key=${encodeURIComponent(key)}`);
    await get(d.api, `${USAGE_PATHS.summary}?key=${encodeURIComponent(key)}`, bearer(key));
    await get(d.api, `${USAGE_PATHS.summary}?api_key=${encodeURIComponent(key)}`, bearer(key));
    await get(d.api, USAGE_PATHS.summary, { 'x-api-key': key });
    await get(d.api, `${USAGE_PATHS.summary}%ZZ?api_key=${encodeURIComponent(key)}`);
    await get(d.api, `/no/such/path?api_key=${encodeURIComponent(key)}`);
    const secret = key.split('_').slice(2).join('_');
    await within(2_000, async () => d.logs.filter((l) => l.includes('"request"')).length >= 7);
    const all = d.logs.join('\n');
    expect(all).not.toContain(secret);
    expect(all).not.toContain(token.split('.')[1]!);
    expect(all).not.toMatch(/api_key=/);
    // The request line names the key by its id.
    expect(d.logs.some((l) => l.includes(`"key":"${made.json.id}"`))).toBe(true);
  });
});

describe('proxyd serve --key-limits', () => {
  it('a bad value exits 2 naming the flag', async () => {
    for (const bad of ['120', '0,30', '120,x', '-1,5', '120,30,1']) {
      const r = await run(PROXYD, [
        'serve',
        '--data-dir',
        tempDir(),
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
        '--key-limits',
        bad,
      ]);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(r.stderr).toMatch(/--key-limits/);
    }
  });
});

describe.skipIf(postgresSkipReason())('a fleet of two daemons on one PostgreSQL', () => {
  let nodes: Daemon[] = [];
  let dir: string;
  const email = 'fleet-keys@example.com';

  beforeAll(async () => {
    dir = await dataDirFor('postgres');
    nodes = [await startDaemon({ dataDir: dir })];
    nodes.push(await startDaemon({ dataDir: tempDir(), args: ['--database-url', databaseUrlOf(dir)!] }));
    await makeAccount(dir, email);
  }, patient(60_000));
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it("a key revoked through one node's database is refused by both within 1 s; made on one, it works on the other at once", async () => {
    const made = await admin(dir, ['key', 'create', '--email', email, '--name', 'fleet', '--scopes', 'usage:read']);
    expect(made.code, made.stderr).toBe(0);
    for (const n of nodes) expect((await get(n.api, USAGE_PATHS.summary, bearer(made.json.key))).body.code).toBe(200);
    const revoked = await admin(dir, ['key', 'revoke', '--email', email, '--id', made.json.id]);
    expect(revoked.code).toBe(0);
    const took = await Promise.all(
      nodes.map((n) =>
        within(1_000, async () => (await get(n.api, USAGE_PATHS.summary, bearer(made.json.key))).status === 401),
      ),
    );
    console.log(JSON.stringify({ event: 'key_revocation_ms', nodes: took }));
  });
});
