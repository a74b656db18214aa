#!/usr/bin/env node
// Before the tests: the one native addon (better-sqlite3) must be built for this Node. `npm ci` builds it with
// its install script; after `npm ci --ignore-scripts` (or a package manager that skips scripts) it is absent,
// so build it here, once, rather than fail every SQLite test with "Could not locate the bindings file".
// Nothing of any other dependency is built or changed.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
function loads() {
  try {
    new (require('better-sqlite3'))(':memory:').close();
    return true;
  } catch {
    return false;
  }
}
if (!loads()) {
  process.stderr.write(
    'better-sqlite3 has no build for this Node (installed with --ignore-scripts?): npm rebuild better-sqlite3\n',
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['rebuild', 'better-sqlite3', '--ignore-scripts=false'], { stdio: 'inherit' });
  if (r.status !== 0 || !loads()) process.exit(1);
}
