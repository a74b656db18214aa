// The data dir, created like `mkdir -p` — but not with Node's recursive mkdir, which spins forever at full
// CPU where mkdir answers ENOENT under an existing parent (`--data-dir /proc/x`, /sys).
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Creates `dir` and its missing parents (mode 0700); an error names the data dir and the cause. */
export function ensureDataDir(dir: string): void {
  const abs = path.resolve(dir);
  const missing: string[] = [];
  for (let p = abs; !isDir(p); p = path.dirname(p)) {
    missing.unshift(p);
    if (path.dirname(p) === p) break;
  }
  for (const p of missing) {
    try {
      mkdirSync(p, { mode: 0o700 });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? String(e);
      if (code === 'EEXIST' && isDir(p)) continue; // made meanwhile by another process
      throw new Error(
        `cannot create the data dir ${abs}: ${code === 'EEXIST' || code === 'ENOTDIR' ? `${p} is not a directory` : `${code} at ${p}`}`,
      );
    }
  }
}
