// npm pack's manifest without `prepare`: in a checkout `npm install` builds dist/ through `prepare`, but a packed
// tarball already holds dist/, and npm 11 warns about a `prepare` it would be asked to allow at `npm install -g`.
// prepack: `strip` keeps package.json aside and writes it without `prepare`; postpack: `restore` puts it back.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

const manifest = new URL('../package.json', import.meta.url);
const kept = new URL('../.package.json.before-pack', import.meta.url);
const mode = process.argv[2];

if (mode === 'strip') {
  if (existsSync(kept)) renameSync(kept, manifest); // a pack that died before postpack: start from the original
  const text = readFileSync(manifest, 'utf8');
  const pkg = JSON.parse(text);
  delete pkg.scripts.prepare;
  renameSync(manifest, kept);
  writeFileSync(manifest, JSON.stringify(pkg, null, 2) + '\n');
} else if (mode === 'restore') {
  if (existsSync(kept)) renameSync(kept, manifest);
} else {
  process.stderr.write('usage: node scripts/pack-manifest.mjs strip|restore\n');
  process.exit(2);
}
