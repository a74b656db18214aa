// proxyd's PostgreSQL driver is postgres.js 3.4.9 vendored in vendor/postgres with three changes (its README
// gives the diff and why): no uncatchable TypeError from a queued write with no socket when PostgreSQL goes away
// (the outage suites, test/ops/postgres-outage and test/e2e/fleet-postgres, check that no daemon dies);
// TCP_NODELAY on the connection, as libpq sets it; queries that settle through prototype methods, checked here
// by what the young-generation collector promotes. Nothing edits a dependency at install time.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import postgres from '#postgres';
import { describe, expect, it } from 'vitest';
import { createDatabase, PG_TEST_URL_ENV } from '../../helpers/postgres.js';
import { patient } from '../../helpers/patience.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const pkg = path.join(ROOT, 'vendor/postgres');

describe('the vendored postgres.js', () => {
  it('is what proxyd imports, and the package changes nothing at install', () => {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(manifest.imports['#postgres'].default).toBe('./vendor/postgres/src/index.js');
    expect(manifest.dependencies.postgres).toBeUndefined();
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepublish'])
      expect(manifest.scripts[hook]).toBeUndefined();
    expect(manifest.files).toContain('vendor');
    expect(JSON.parse(readFileSync(path.join(pkg, 'package.json'), 'utf8')).version).toBe('3.4.9');
  });

  it.each(['src/connection.js'])('%s never writes without a socket', (rel) => {
    const text = readFileSync(path.join(pkg, rel), 'utf8');
    const body = text.slice(text.indexOf('function nextWrite(fn) {'), text.indexOf('function connectTimedOut'));
    expect(body).toMatch(
      /if \(!socket\) \{[^}]*CONNECTION_CLOSED[^}]*return false\s*\}[\s\S]*socket\.write\(chunk, fn\)/,
    );
  });

  it.each(['src/connection.js'])('%s turns Nagle off once connected', (rel) => {
    const text = readFileSync(path.join(pkg, rel), 'utf8');
    const body = text.slice(text.indexOf('function connected() {'), text.indexOf('function error(err)'));
    expect(body).toMatch(/socket\.on\('data', data\)[\s\S]*socket\.setNoDelay\(true\)[\s\S]*StartupMessage\(\)/);
  });

  it.each(['src/query.js'])('%s settles a query through methods, no per-query closures', (rel) => {
    const text = readFileSync(path.join(pkg, rel), 'utf8');
    const ctor = text.slice(text.indexOf('constructor(strings, args, handler'), text.indexOf('  get origin() {'));
    expect(ctor).not.toMatch(/this\.(resolve|reject) = /);
    expect(ctor).toMatch(/resolve\(x\) \{\s*this\.active = false\s*return this\.settleResolve\(x\)/);
    expect(ctor).toMatch(/reject\(x\) \{\s*this\.active = false\s*return this\.settleReject\(x\)/);
  });
});

describe.skipIf(!process.env[PG_TEST_URL_ENV])('postgres.js queries on a real server', () => {
  it("still resolve with rows and reject with the server's error", async () => {
    const sql = postgres(await createDatabase(), { max: 1, fetch_types: false, onnotice: () => {} });
    try {
      const q = sql<{ x: number }[]>`SELECT ${41}::int + 1 AS x`;
      expect(Object.hasOwn(q, 'resolve')).toBe(false);
      expect((await q)[0]!.x).toBe(42);
      await expect(sql`SELECT 1 / ${0}::int`).rejects.toMatchObject({ code: '22012' });
      // A transaction's queries and a cursor (which sets its own settle functions) work as before.
      expect(await sql.begin(async (tx) => [(await tx`SELECT 1 AS a`)[0]!.a, (await tx`SELECT 2 AS b`)[0]!.b])).toEqual(
        [1, 2],
      );
      const seen: number[] = [];
      for await (const rows of sql<{ n: number }[]>`SELECT generate_series(1, 5) AS n`.cursor(2))
        seen.push(...rows.map((r) => r.n));
      expect(seen).toEqual([1, 2, 3, 4, 5]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  it(
    'leave nothing for the young-generation collector to promote',
    async () => {
      // 20,000 queries one after another in a child process that prints V8's GC trace; the bytes promoted by
      // scavenges during the loop. Without the settle-methods patch: about 14 MB (a sixth of all a query
      // allocates); with it: under 1 MB.
      const url = await createDatabase();
      const script = `
      import postgres from '#postgres';
      const sql = postgres(process.env.URL, { max: 1, fetch_types: false });
      for (let i = 0; i < 100; i++) await sql\`SELECT \${i}::int AS x\`;
      console.log('LOOP START');
      for (let i = 0; i < 20000; i++) await sql\`SELECT \${i}::int AS x, 'row' AS y\`;
      console.log('LOOP END');
      await sql.end();`;
      // Without the shebang's --max-semi-space-size: the young generation grows as V8 likes, as under `node bin/proxyd`.
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--trace-gc-nvp', '--input-type=module', '-e', script],
        {
          cwd: ROOT,
          env: { ...process.env, URL: url },
          encoding: 'utf8',
          timeout: 80_000,
          maxBuffer: 64 << 20,
        },
      );
      const loop = stdout.slice(stdout.indexOf('LOOP START'), stdout.indexOf('LOOP END'));
      const scavenges = loop.split('\n').filter((l) => / gc=s /.test(l));
      expect(scavenges.length).toBeGreaterThan(5);
      // Every scavenge line says what it promoted (a V8 that renamed the field must not pass unchecked).
      expect(scavenges.every((l) => / promoted=\d+/.test(l))).toBe(true);
      const promoted = scavenges.reduce((sum, l) => sum + Number(/ promoted=(\d+)/.exec(l)![1]), 0);
      expect(promoted).toBeLessThan(4 << 20);
    },
    patient(90_000),
  );
});
