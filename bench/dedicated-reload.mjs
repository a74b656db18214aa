#!/usr/bin/env node
// What a change of dedicated addresses costs each node (docs/benchmarks/dedicated.md, "Dedicated addresses"): a SQLite store
// in a temp dir with 11,264 addresses registered and 10,000 assigned over 1,000 accounts, then the node's view
// (DedicatedView) read in full: the first time, unchanged (the 250 ms poll), and after each of five releases.
//   node bench/dedicated-reload.mjs        (after npm run build)
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
const { DedicatedView } = await import(path.join(ROOT, 'dist/daemon/admission/dedicated.js'));
const store = await openStore({ dataDir: mkdtempSync(path.join(os.tmpdir(), 'dedicated-reload-')) });
const pool = [];
for (let n = 0; n < 11264; n++) pool.push(`127.1.${n >> 8}.${n & 255}`);
let t = performance.now();
await store.egress.register('bench', pool, { country: null, city: null });
console.log('register', (performance.now() - t).toFixed(1));
for (let a = 0; a < 1000; a++) {
  const acc = await store.accounts.create(`o${a}@x.com`, 'x', true);
  await store.egress.assign(acc.id, 'bench', pool.slice(a * 10, a * 10 + 10));
}
const view = new DedicatedView(store, { node: 'bench' });
t = performance.now();
await view.refresh();
console.log('first refresh (holders + apply)', (performance.now() - t).toFixed(1));
t = performance.now();
const rows = await store.egress.holders();
console.log('holders', rows.length, (performance.now() - t).toFixed(1));
t = performance.now();
view.apply(rows);
console.log('apply', (performance.now() - t).toFixed(1));
const v1 = await store.egress.version();
t = performance.now();
for (let i = 0; i < 1000; i++) await view.refresh();
console.log('1000 refresh (no change) ms', (performance.now() - t).toFixed(1), v1 === (await store.egress.version()));
for (let k = 0; k < 5; k++) {
  await store.egress.release([pool[11000 + k]], null);
  t = performance.now();
  await view.refresh();
  console.log('refresh after a change', (performance.now() - t).toFixed(1));
}
await store.close();
