#!/usr/bin/env node
// Runs on `npm install` / `npm ci` (postinstall): two small changes to postgres.js 3.4.x, each applied once
// (marked), each left alone with a note if the text it replaces is gone (a release that changed it).
//
// 1. No write without a socket. postgres.js writes a small queued chunk from a setImmediate without checking
//    that the connection still has a socket; when PostgreSQL goes away at that moment the write throws a
//    TypeError no caller can catch, and the whole daemon dies (porsager/postgres issues 1154, 1066, 1208;
//    proposed fix in pull request 1209, unreleased). proxyd must answer 503 during a database outage, not
//    crash: a write with no socket fails the pending queries with CONNECTION_CLOSED, which the store turns
//    into 503.
// 2. TCP_NODELAY on the connection, as libpq, pgjdbc and npgsql set it. postgres.js leaves Nagle's algorithm
//    on, so a query written while an earlier one on the same connection is unacknowledged (pipelining under
//    load) waits for that ACK; on loopback at 500 API calls/s that showed as a longer tail
//    (docs/BENCHMARKS.md, API on PostgreSQL). A Unix socket has no such option and is left alone.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// Wherever npm put it (this package's node_modules, or hoisted into a parent's): cjs/src/index.js → its root.
const pkg = path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '../..');

const NO_SOCKET_MARK = '/* proxyd: no socket, no write */';
const NODELAY_MARK = '/* proxyd: TCP_NODELAY */';
const PATCHES = [
  {
    name: 'guarded nextWrite',
    files: ['src/connection.js', 'cjs/src/connection.js', 'cf/src/connection.js'],
    mark: NO_SOCKET_MARK,
    before: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
    after:
      `  function nextWrite(fn) {\n    ${NO_SOCKET_MARK}\n` +
      "    if (!socket) {\n      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n      chunk = nextWriteTimer = null\n" +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n      return false\n    }\n" +
      '    const x = socket.write(chunk, fn)',
  },
  {
    name: 'TCP_NODELAY',
    files: ['src/connection.js', 'cjs/src/connection.js'],
    mark: NODELAY_MARK,
    before: "      socket.on('data', data)\n",
    after: `      socket.on('data', data)\n      ${NODELAY_MARK} typeof socket.setNoDelay === 'function' && socket.setNoDelay(true)\n`,
  },
];

for (const patch of PATCHES) {
  let patched = 0;
  for (const rel of patch.files) {
    const file = path.join(pkg, rel);
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    if (text.includes(patch.mark)) continue;
    if (!text.includes(patch.before)) {
      process.stderr.write(`patch-postgres: ${rel} has no place for the ${patch.name} patch (a changed release?): left as is\n`);
      continue;
    }
    writeFileSync(file, text.replace(patch.before, patch.after));
    patched++;
  }
  if (patched) process.stdout.write(`patch-postgres: ${patch.name} in ${patched} file(s) of postgres.js\n`);
}
