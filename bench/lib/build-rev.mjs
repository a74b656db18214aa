// A whole-daemon tree built from the sources at a git revision, for the benches that set a revision beside this
// tree (bench/instructions.mjs, bench/daemon-ab.mjs): `git archive` of the revision, this tree's node_modules,
// `tsc -p tsconfig.build.json`. Kept under node_modules/.cache/<bench>/<sha> and reused.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function buildRev(rev, bench) {
  const sha = execFileSync('git', ['rev-parse', '--short', rev], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dir = path.join(ROOT, 'node_modules/.cache', bench, sha);
  if (existsSync(path.join(dir, 'dist/daemon/process/main.js'))) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  execFileSync('sh', ['-c', `git archive ${sha} | tar -x -C '${dir}'`], { cwd: ROOT });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  console.error(`[${bench}] building ${sha} in ${dir}`);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: dir,
    stdio: 'inherit',
  });
  return dir;
}
