// The npm package as a user installs it: `npm pack`, then `npm install -g` of the tarball into a prefix of its own.
// npm says nothing about scripts the packed package does not need (in a checkout `npm install` builds dist/ through
// `prepare`; `npm pack` builds it too and packs a manifest without `prepare`, scripts/pack-manifest.mjs), and with better-sqlite3's build allowed as docs/operations.md says
// (`--allow-scripts=better-sqlite3`, npm 11's install-script policy) nothing at all; both programs print the
// package's version, and the installed daemon serves. About 30-60 s: two installs (150 packages from the registry).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  scripts: Record<string, string>;
  bin: Record<string, string>;
};

const npm = (args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): SpawnSyncReturns<string> =>
  spawnSync('npm', args, {
    cwd: opts.cwd ?? ROOT,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', npm_config_update_notifier: 'false', ...opts.env },
    timeout: 300_000,
  });

/** npm's warnings in an output (`npm warn …`), whatever their topic. */
const warnings = (r: SpawnSyncReturns<string>) =>
  `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /^npm warn/i.test(l));

describe('the npm package installed globally', () => {
  const work = tempDir('proxyd-pack-');
  let tarball = '';
  let env: Record<string, string> = {};
  const daemons: Daemon[] = [];

  beforeAll(() => {
    // `npm test` built dist/ already; `prepack` builds it again, which here would rewrite the files other suites'
    // daemons are loading. So the package is packed from a copy of what it ships, whose build step does nothing:
    // the rest of npm pack's lifecycle (prepack's manifest without `prepare`, postpack's restore) runs as it is.
    const copy = path.join(work, 'package');
    for (const part of ['bin', 'dist', 'vendor', 'scripts', 'README.md', 'LICENSE'])
      cpSync(path.join(ROOT, part), path.join(copy, part), { recursive: true });
    const manifest = JSON.stringify({ ...pkg, scripts: { ...pkg.scripts, build: 'node -e 0' } }, null, 2) + '\n';
    writeFileSync(path.join(copy, 'package.json'), manifest);
    const packed = npm(['pack', '--json', '--pack-destination', work], { cwd: copy });
    expect(packed.status, packed.stderr).toBe(0);
    expect(readFileSync(path.join(copy, 'package.json'), 'utf8')).toBe(manifest); // postpack put it back
    expect(existsSync(path.join(copy, '.package.json.before-pack'))).toBe(false);
    tarball = path.join(
      work,
      (JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{ filename: string }>)[0]!.filename,
    );
    // better-sqlite3's install script takes the prebuilt binary it downloads (from GitHub, on a user's machine),
    // else compiles it (minutes here, where GitHub is out of reach). This machine's build goes into a private npm
    // cache where prebuild-install keeps its downloads, as if downloaded: the install takes seconds, and nothing of
    // the user's own cache or of the install itself is changed.
    const cache = path.join(work, 'npm-cache');
    const require = createRequire(path.join(ROOT, 'node_modules/better-sqlite3/package.json'));
    const sqlitePkg = require('./package.json') as { name: string };
    const url = require('prebuild-install/util').getDownloadUrl({
      ...require('prebuild-install/rc')(sqlitePkg),
      pkg: sqlitePkg,
    }) as string;
    const cached = path.join(
      cache,
      '_prebuilds',
      `${createHash('sha512').update(url).digest('hex').slice(0, 6)}-${path.basename(url).replace(/[^a-zA-Z0-9.]+/g, '-')}`,
    );
    mkdirSync(path.dirname(cached), { recursive: true });
    const tar = spawnSync(
      'tar',
      ['-czf', cached, '-C', path.join(ROOT, 'node_modules/better-sqlite3'), 'build/Release/better_sqlite3.node'],
      { encoding: 'utf8' },
    );
    expect(tar.status, tar.stderr).toBe(0);
    env = { npm_config_cache: cache };
  }, 180_000);

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
    rmSync(work, { recursive: true, force: true });
  });

  it('the package builds on npm install in a checkout and when packed; the packed manifest has no script to run at install', () => {
    expect(pkg.scripts.prepare).toBe('npm run build');
    expect(pkg.scripts.prepack).toBe('npm run build && node scripts/pack-manifest.mjs strip');
    expect(pkg.scripts.postpack).toBe('node scripts/pack-manifest.mjs restore');
    for (const s of ['preinstall', 'install', 'postinstall']) expect(pkg.scripts[s], s).toBeUndefined();
    const packedPkg = JSON.parse(
      spawnSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }).stdout,
    ) as typeof pkg;
    for (const s of ['prepare', 'preinstall', 'install', 'postinstall'])
      expect(packedPkg.scripts[s], s).toBeUndefined();
    expect(packedPkg.version).toBe(pkg.version);
    const list = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).stdout.split('\n');
    expect(list).toContain('package/dist/daemon/process/main.js');
    expect(list).toContain('package/bin/proxyd');
    expect(list.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);
  });

  it("npm install -g of the tarball: no word about a script of proxyd's own; with better-sqlite3's allowed, no warning at all", async () => {
    const first = npm(['install', '-g', '--prefix', path.join(work, 'plain'), tarball], { env });
    expect(first.status, first.stderr).toBe(0);
    const said = warnings(first);
    // npm 11 names the dependencies whose install scripts it ran without being told they may: only better-sqlite3's
    // build (which the daemon needs). An older npm runs it without a word.
    expect(said.filter((l) => l.includes(`${pkg.name}@`))).toEqual([]);
    expect(said.filter((l) => /@\d/.test(l) && !l.includes('better-sqlite3@'))).toEqual([]);
    const policy = said.some((l) => l.includes('install-scripts'));

    const prefix = path.join(work, 'allowed');
    const second = npm(
      ['install', '-g', '--prefix', prefix, ...(policy ? ['--allow-scripts=better-sqlite3'] : []), tarball],
      { env },
    );
    expect(second.status, second.stderr).toBe(0);
    expect(warnings(second)).toEqual([]);

    for (const bin of Object.keys(pkg.bin)) {
      const v = spawnSync(path.join(prefix, 'bin', bin), ['--version'], { encoding: 'utf8' });
      expect({ bin, status: v.status, stdout: v.stdout }).toEqual({ bin, status: 0, stdout: `${pkg.version}\n` });
    }
    // The installed daemon serves (its native addon built, its data files packed), and says so to `proxyd health`.
    const d = await startDaemon({ bin: path.join(prefix, 'bin', 'proxyd') });
    daemons.push(d);
    const health = spawnSync(
      path.join(prefix, 'bin', 'proxyd'),
      ['health', '--api-listen', d.api.replace('http://', '')],
      { encoding: 'utf8' },
    );
    expect({ status: health.status, stdout: health.stdout }).toEqual({ status: 0, stdout: '{"status":"ok"}\n' });
  }, 300_000);
});
