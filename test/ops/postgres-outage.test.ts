// PostgreSQL stopped and paused under a running proxyd (its own throwaway cluster, so no other file is
// disturbed): whitelist requests answer 503/10503 with nothing half-written, /healthz names `database`,
// and service comes back by itself, without a restart, once the server is back.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, inspectData, makeAccount, startDaemon, type Daemon, ADD, LIST } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { pub } from './helpers.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
let pg: PgCluster;
let d: Daemon;
let token: string;
let next = 0;
let target: Server;
let proxyUser: string;

/** HTTP status of a request through the gateway with the proxy user's credentials (curl, an independent client). */
async function viaGateway(): Promise<number> {
  const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
  const { stdout } = await promisify(execFile)('curl', [
    '-sS',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code}',
    '--max-time',
    '15',
    '-x',
    `http://${d.httpProxy}`,
    '--proxy-user',
    proxyUser,
    url,
  ]);
  return Number(stdout);
}

async function call(path: string, body?: unknown): Promise<{ status: number; code: number; failed: string[] }> {
  const res = await fetch(`${d.api}${path}?api_key=${encodeURIComponent(token)}`, {
    ...(body === undefined
      ? {}
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(15_000),
  });
  const j = (await res.json()) as { code: number; data?: { failed_items?: Array<{ ip: string }> } };
  return { status: res.status, code: j.code, failed: j.data?.failed_items?.map((f) => f.ip) ?? [] };
}

const health = async () => {
  const res = await fetch(`${d.api}/healthz`, { signal: AbortSignal.timeout(15_000) });
  return { status: res.status, body: (await res.json()) as { status: string; down?: string[] } };
};

/** Polls until the API lists again (the service recovers by itself); how long it took. */
async function recovered(): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < 30_000) {
    if ((await call(LIST).catch(() => null))?.status === 200 && (await health()).status === 200) return Date.now() - t0;
    await sleep(200);
  }
  throw new Error('no recovery within 30 s');
}

/** Adds 100-item batches until stopped; every answer must be whole: 200, 10431 or 503/10503 (nothing executed). */
const loops: Array<{ stop(): Promise<void> }> = [];

function addLoop() {
  let stop = false;
  const acked = new Set<string>();
  const sent: string[] = [];
  const answers: number[] = [];
  const done = (async () => {
    while (!stop) {
      if (d.proc.exitCode !== null) return;
      const items = Array.from({ length: 100 }, () => ({ ip: pub(next++) }));
      sent.push(...items.map((i) => i.ip));
      const r = await call(ADD, { items });
      answers.push(r.code);
      if (r.code === 200 || r.code === 10431) for (const i of items) if (!r.failed.includes(i.ip)) acked.add(i.ip);
      if (r.status === 503) await sleep(50);
    }
  })();
  const loop = { acked, sent, answers, stop: async () => ((stop = true), await done.catch(() => {})) };
  loops.push(loop);
  return loop;
}

async function assertWhole(acked: Set<string>, sent: string[]) {
  const db = await inspectData(d.dataDir);
  try {
    const entries = new Set(
      (await db.all<{ ip: string }>('SELECT ip FROM whitelist_entries WHERE deleted_at IS NULL')).map((r) => r.ip),
    );
    const claims = new Set(
      (await db.all<{ ip: string }>("SELECT ip FROM ip_claims WHERE state = 'held'")).map((r) => r.ip),
    );
    expect([...entries].filter((ip) => !claims.has(ip))).toEqual([]);
    expect([...claims].filter((ip) => !entries.has(ip))).toEqual([]);
    for (const ip of acked) expect(entries.has(ip)).toBe(true);
    expect(entries.size).toBeLessThanOrEqual(next); // nothing beyond what was ever sent
    expect(sent.length).toBeGreaterThan(0);
  } finally {
    await db.close();
  }
}

describe.skipIf(skip !== null)(`PostgreSQL outage under a serving proxyd${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    const dataDir = await dataDirFor('postgres', pg.url);
    // A short stale window (4 s), so the test sees both halves of it: admitted from the last view, then refused.
    d = await startDaemon({
      dataDir,
      args: [
        '--allow-private-targets',
        '--stale-admission',
        '4',
        '--rate-limits',
        'list=100000,add=100000,delete=100000',
      ],
    });
    token = (await makeAccount(dataDir, 'outage@example.com')).token;
    const pu = await admin(dataDir, ['proxy-user', 'create', '--email', 'outage@example.com', '--username', 'outage']);
    proxyUser = `outage:${pu.json.password}`;
    target = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  }, patient(120_000));

  afterAll(async () => {
    for (const l of loops) await l.stop();
    await d?.stop();
    pg?.destroy();
    await new Promise((r) => target?.close(r));
  });

  it('serves before the outage', async () => {
    expect((await call(ADD, { items: [{ ip: pub(next++) }] })).code).toBe(200);
    expect((await health()).status).toBe(200);
    expect(await viaGateway()).toBe(200);
  });

  it('paused server (SIGSTOP): 503/10503 within the deadline, /healthz names database, recovery on SIGCONT', async () => {
    const loop = addLoop();
    while (loop.acked.size < 100) await sleep(10);
    pg.pause();
    try {
      await sleep(300);
      const t0 = Date.now();
      const r = await call(LIST);
      expect(r).toMatchObject({ status: 503, code: 10503 });
      expect(Date.now() - t0).toBeLessThan(patient(10_000)); // short deadlines: a paused server does not hang requests
      const h = await health();
      expect(h.status).toBe(503);
      expect(h.body.down).toContain('database');
      // What ProxydDatabaseUnreachable reads: a scrape answers (within its bound) and says the database is down.
      const metrics = await (await fetch(`${d.api}/metrics`, { signal: AbortSignal.timeout(15_000) })).text();
      expect(metrics).toMatch(/^proxyd_dependency_up\{dependency="database"\} 0$/m);
    } finally {
      pg.resume();
    }
    await recovered();
    expect(await (await fetch(`${d.api}/metrics`)).text()).toMatch(
      /^proxyd_dependency_up\{dependency="database"\} 1$/m,
    );
    await loop.stop();
    expect(loop.answers.every((c) => c === 200 || c === 10431 || c === 10503)).toBe(true);
    await assertWhole(loop.acked, loop.sent);
  });

  it('stopped server (pg_ctl stop): 503/10503 at once, nothing half-written, recovery after start without a restart', async () => {
    const loop = addLoop();
    const before = loop.acked.size;
    while (loop.acked.size < before + 100) await sleep(10);
    pg.stop();
    try {
      await sleep(300);
      // Inside the stale window the gateway still admits a known client from its last view.
      expect(await viaGateway()).toBe(200);
      expect(await call(ADD, { items: [{ ip: pub(next++) }] })).toMatchObject({ status: 503, code: 10503 });
      // The console's log-in page needs nothing of the database (a visitor's session is not stored); logging in
      // does, and is refused cleanly.
      const page = await fetch(`${d.api}/console/login`, { signal: AbortSignal.timeout(15_000) });
      expect(page.status).toBe(200);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
      const cookie = (page.headers.getSetCookie().find((c) => c.startsWith('proxyd_console=')) ?? '').split(';')[0]!;
      const login = await fetch(`${d.api}/console/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        body: new URLSearchParams({ _csrf: csrf, email: 'someone@example.com', password: 'whatever it is' }).toString(),
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
      expect(login.status).toBe(503);
      expect(await login.text()).toContain('Nothing was changed');
      const h = await health();
      expect(h.status).toBe(503);
      expect(h.body.down).toContain('database');
      // After --stale-admission the gateway refuses new connections cleanly (503), not left hanging, until the
      // view is current again.
      let gwDown = 0;
      for (let i = 0; i < 40 && gwDown !== 503; i++) if ((gwDown = await viaGateway()) !== 503) await sleep(250);
      expect(gwDown).toBe(503);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${d.logs.slice(-30).join('\n')}`);
    } finally {
      pg.start();
    }
    await recovered();
    // The gateway's pool connections come back on their own too (a fresh connection on a loaded machine may
    // miss one deadline): within seconds, without a restart.
    let gw = 0;
    for (let i = 0; i < 20 && gw !== 200; i++) if ((gw = await viaGateway()) !== 200) await sleep(250);
    expect(gw).toBe(200);
    await loop.stop();
    expect(loop.answers.every((c) => c === 200 || c === 10431 || c === 10503)).toBe(true);
    expect(loop.answers).toContain(10503);
    await assertWhole(loop.acked, loop.sent);
    expect(d.proc.exitCode, d.logs.slice(-30).join('\n')).toBeNull(); // the same process served throughout
  });
});
