#!/usr/bin/env node
// Runs on `npm install` / `npm ci` (postinstall): three small changes to postgres.js 3.4.x, each applied once
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
// 3. A query settles through methods, not per-query closures. A Query is a Promise subclass, and its
//    constructor stored two arrow functions (resolve, reject) on every instance. With those, Node 24's
//    young-generation collector kept and promoted about a sixth of everything a query allocated, long after the
//    query was done: the objects were dead (a full collection found 4 KB live), yet every scavenge copied
//    megabytes: 2.5 times the daemon's GC time, and 5-6 ms scavenges when started without bin/proxyd's
//    --max-semi-space-size. The same class with the two functions as prototype methods over the stored
//    resolving functions keeps ~15 KB per scavenge (docs/BENCHMARKS.md, API on PostgreSQL). Behaviour is
//    unchanged: connection.js calls query.resolve(x) / query.reject(e) as methods, and a cursor still sets
//    its own on the instance.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// Wherever npm put it (this package's node_modules, or hoisted into a parent's): cjs/src/index.js → its root.
const pkg = path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '../..');

const NO_SOCKET_MARK = '/* proxyd: no socket, no write */';
const NODELAY_MARK = '/* proxyd: TCP_NODELAY */';
const SETTLE_MARK = '/* proxyd: settle methods */';
const PATCHES = [
  {
    name: 'guarded nextWrite',
    files: ['src/connection.js', 'cjs/src/connection.js', 'cf/src/connection.js'],
    mark: NO_SOCKET_MARK,
    edits: [[
      '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)',
      `  function nextWrite(fn) {\n    ${NO_SOCKET_MARK}\n` +
      "    if (!socket) {\n      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n      chunk = nextWriteTimer = null\n" +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n      return false\n    }\n" +
      '    const x = socket.write(chunk, fn)',
    ]],
  },
  {
    name: 'TCP_NODELAY',
    files: ['src/connection.js', 'cjs/src/connection.js'],
    mark: NODELAY_MARK,
    edits: [[
      "      socket.on('data', data)\n",
      `      socket.on('data', data)\n      ${NODELAY_MARK} typeof socket.setNoDelay === 'function' && socket.setNoDelay(true)\n`,
    ]],
  },
  {
    name: 'settle methods',
    files: ['src/query.js', 'cjs/src/query.js', 'cf/src/query.js'],
    mark: SETTLE_MARK,
    edits: [
      [
        '    this.resolve = x => (this.active = false, resolve(x))\n    this.reject = x => (this.active = false, reject(x))\n',
        `    ${SETTLE_MARK}\n    this.settleResolve = resolve\n    this.settleReject = reject\n`,
      ],
      [
        '  get origin() {\n',
        '  resolve(x) {\n    this.active = false\n    return this.settleResolve(x)\n  }\n\n' +
          '  reject(x) {\n    this.active = false\n    return this.settleReject(x)\n  }\n\n  get origin() {\n',
      ],
    ],
  },
];

for (const patch of PATCHES) {
  let patched = 0;
  for (const rel of patch.files) {
    const file = path.join(pkg, rel);
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    if (text.includes(patch.mark)) continue;
    // Every edit's text must be there exactly once, or the file is left whole.
    if (!patch.edits.every(([before]) => text.split(before).length === 2)) {
      process.stderr.write(`patch-postgres: ${rel} has no place for the ${patch.name} patch (a changed release?): left as is\n`);
      continue;
    }
    writeFileSync(file, patch.edits.reduce((t, [before, after]) => t.replace(before, () => after), text));
    patched++;
  }
  if (patched) process.stdout.write(`patch-postgres: ${patch.name} in ${patched} file(s) of postgres.js\n`);
}
