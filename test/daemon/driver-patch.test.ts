// scripts/patch-postgres.mjs (postinstall) changes postgres.js 3.4.x in two places. It can throw an uncatchable
// TypeError (a queued write with no socket, from a setImmediate) when PostgreSQL goes away, killing the daemon
// mid-outage; the outage suites (test/ops/postgres-outage, test/e2e/fleet-postgres) check that no daemon dies.
// And it leaves Nagle's algorithm on: the connection gets TCP_NODELAY, as libpq sets it.
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

  it.each(['src/connection.js', 'cjs/src/connection.js'])('%s turns Nagle off once connected', (rel) => {
    const text = readFileSync(path.join(pkg, rel), 'utf8');
    const body = text.slice(text.indexOf('function connected() {'), text.indexOf('function error(err)'));
    expect(body).toMatch(/socket\.on\('data', data\)[\s\S]*socket\.setNoDelay\(true\)[\s\S]*StartupMessage\(\)/);
  });
});
