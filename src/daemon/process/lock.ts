// Data-dir lock: one serving daemon (or one cluster primary) per data dir, unless every daemon on it
// opts into sharing (`--shared-data-dir`), which the exclusive default still refuses to join.
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

const LOCK_FILE = 'proxyd.lock';
/** One file per sharing daemon, named by pid. */
const SHARED_LOCK_DIR = 'proxyd.shared';

class LockHeldError extends Error {
  constructor(
    readonly pid: number,
    readonly file: string,
    reason?: string,
  ) {
    super(reason ?? `another proxyd (pid ${pid}) is serving this data dir (lock ${file}); stop it first`);
    this.name = 'LockHeldError';
  }
}

/**
 * Linux: a process's state and start time (clock ticks after boot) from /proc; null where there is no /proc or
 * the process is gone.
 */
function procStat(pid: number): { state: string; start: string } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command name in parentheses (which may hold spaces): state, then 18 more fields, then the start time.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', start: fields[19] ?? '' };
  } catch {
    return null;
  }
}

/** What a lock file says of its holder: this process's pid and, where /proc tells, its start time. */
function lockText(): string {
  const start = procStat(process.pid)?.start;
  return start ? `${process.pid} ${start}\n` : `${process.pid}\n`;
}

/**
 * Whether the holder a lock file names still runs. A zombie (killed, not yet reaped by its parent) holds
 * nothing; a live process whose start time is not the one recorded is another process that got the pid
 * after the daemon died (a crash, a container restart): the lock is stale either way.
 */
function alive(holder: LockHolder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const st = procStat(holder.pid);
  if (!st) return true;
  if (st.state === 'Z' || st.state === 'X') return false;
  return holder.start === null || st.start === holder.start;
}

interface LockHolder {
  pid: number;
  /** The start time written with the pid (null in a lock written without one). */
  start: string | null;
}

function readHolder(file: string): LockHolder | null {
  try {
    const [pidText, start] = readFileSync(file, 'utf8').trim().split(/\s+/);
    const pid = Number.parseInt(pidText ?? '', 10);
    return Number.isInteger(pid) && pid > 0 ? { pid, start: start && /^\d+$/.test(start) ? start : null } : null;
  } catch {
    return null;
  }
}

function readPid(file: string): number | null {
  return readHolder(file)?.pid ?? null;
}

function tryUnlink(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    /* already gone */
  }
}

export interface DataDirLock {
  readonly mode: 'exclusive' | 'shared';
  release(): void;
}

function pidFileLock(file: string, mode: DataDirLock['mode']): DataDirLock {
  let released = false;
  return {
    mode,
    release() {
      if (released) return;
      released = true;
      if (readPid(file) === process.pid) tryUnlink(file);
    },
  };
}

/** Live sharing daemons other than this process; files of dead ones are removed. */
function liveSharers(dataDir: string): number[] {
  const dir = path.join(dataDir, SHARED_LOCK_DIR);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    const holder = readHolder(file);
    if (holder?.pid === process.pid) continue;
    if (holder && alive(holder)) out.push(holder.pid);
    else tryUnlink(file); // left by a daemon killed with -9
  }
  return out;
}

/** The exclusive lock file's live holder, removing a stale one. */
function liveExclusiveHolder(file: string): number | null {
  const holder = readHolder(file);
  if (holder && holder.pid !== process.pid && alive(holder)) return holder.pid;
  return null;
}

export function acquireLock(dataDir: string): DataDirLock {
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, lockText());
      closeSync(fd);
      // Create first, then look: a sharer that started at the same moment sees this file and backs off too.
      const sharers = liveSharers(dataDir);
      if (sharers.length) {
        tryUnlink(file);
        throw new LockHeldError(
          sharers[0]!,
          path.join(dataDir, SHARED_LOCK_DIR),
          `proxyd daemons started with --shared-data-dir (pid ${sharers.join(', ')}) are serving this data dir; stop them or add --shared-data-dir`,
        );
      }
      return pidFileLock(file, 'exclusive');
    } catch (e) {
      if (e instanceof LockHeldError) throw e;
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = liveExclusiveHolder(file);
      if (pid !== null) throw new LockHeldError(pid, file);
      // Left by a daemon that died (kill -9): take it over.
      tryUnlink(file);
    }
  }
  throw new Error(`could not take the lock ${file}`);
}

/**
 * Shared lock (`--shared-data-dir`): several daemons on one host serve the same database. Refused while an
 * exclusive daemon runs, and an exclusive daemon is refused while any sharer runs.
 */
export function acquireSharedLock(dataDir: string): DataDirLock {
  const dir = path.join(dataDir, SHARED_LOCK_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const mine = path.join(dir, String(process.pid));
  const fd = openSync(mine, 'w', 0o600);
  writeSync(fd, lockText());
  closeSync(fd);
  const excl = path.join(dataDir, LOCK_FILE);
  const holder = liveExclusiveHolder(excl);
  if (holder !== null) {
    tryUnlink(mine);
    throw new LockHeldError(
      holder,
      excl,
      `another proxyd (pid ${holder}) is serving this data dir without --shared-data-dir (lock ${excl}); stop it first`,
    );
  }
  return pidFileLock(mine, 'shared');
}
