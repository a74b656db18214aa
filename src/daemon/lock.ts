// Data-dir lock: one serving daemon (or one cluster primary) per data dir.
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE = 'proxyd.lock';

export class LockHeldError extends Error {
  constructor(
    readonly pid: number,
    readonly file: string,
  ) {
    super(`another proxyd (pid ${pid}) is serving this data dir (lock ${file}); stop it first`);
    this.name = 'LockHeldError';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface DataDirLock {
  release(): void;
}

export function acquireLock(dataDir: string): DataDirLock {
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          try {
            if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
          } catch {
            /* already gone */
          }
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) throw new LockHeldError(pid, file);
      // Left by a daemon that died (kill -9): take it over.
      try {
        unlinkSync(file);
      } catch {
        /* raced with another starter; retry */
      }
    }
  }
  throw new Error(`could not take the lock ${file}`);
}
