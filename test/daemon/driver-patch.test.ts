// postgres.js 3.4.x can throw an uncatchable TypeError (a queued write with no socket, from a setImmediate)
// when PostgreSQL goes away, killing the daemon mid-outage: scripts/patch-postgres.mjs (postinstall) guards
// it. The outage suites (test/ops/postgres-outage, test/e2e/fleet-postgres) check that no daemon dies.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const pkg = path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '../..');

describe('postgres.js as installed', () => {
  it.each(['src/connection.js', 'cjs/src/connection.js'])('%s never writes without a socket', (rel) => {
    const text = readFileSync(path.join(pkg, rel), 'utf8');
    const body = text.slice(text.indexOf('function nextWrite(fn) {'), text.indexOf('function connectTimedOut'));
    expect(body).toMatch(/if \(!socket\) \{[^}]*CONNECTION_CLOSED[^}]*return false\s*\}[\s\S]*socket\.write\(chunk, fn\)/);
  });
});
