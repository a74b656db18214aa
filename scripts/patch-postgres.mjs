#!/usr/bin/env node
// Runs on `npm install` / `npm ci` (postinstall). postgres.js 3.4.x writes a small queued chunk from a
// setImmediate without checking that the connection still has a socket; when PostgreSQL goes away at that
// moment the write throws a TypeError no caller can catch, and the whole daemon dies (porsager/postgres
// issues 1154, 1066, 1208; proposed fix in pull request 1209, unreleased). proxyd must answer 503 during a
// database outage, not crash, so until a release carries the fix this applies the same guard: a write with
// no socket fails the pending queries with CONNECTION_CLOSED, which the store turns into 503.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

// Wherever npm put it (this package's node_modules, or hoisted into a parent's): cjs/src/index.js → its root.
const pkg = path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '../..');
const MARK = '/* proxyd: no socket, no write */';
const BEFORE = '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)';
const AFTER =
  `  function nextWrite(fn) {\n    ${MARK}\n` +
  "    if (!socket) {\n      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n      chunk = nextWriteTimer = null\n" +
  "      error(Errors.connection('CONNECTION_CLOSED', options))\n      return false\n    }\n" +
  '    const x = socket.write(chunk, fn)';

let patched = 0;
for (const rel of ['src/connection.js', 'cjs/src/connection.js', 'cf/src/connection.js']) {
  const file = path.join(pkg, rel);
  if (!existsSync(file)) continue;
  const text = readFileSync(file, 'utf8');
  if (text.includes(MARK)) continue;
  if (!text.includes(BEFORE)) {
    process.stderr.write(`patch-postgres: ${rel} has no unguarded nextWrite (a fixed release?): left as is\n`);
    continue;
  }
  writeFileSync(file, text.replace(BEFORE, AFTER));
  patched++;
}
if (patched) process.stdout.write(`patch-postgres: guarded nextWrite in ${patched} file(s) of postgres.js\n`);
