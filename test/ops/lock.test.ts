// The data-dir lock names its holder by pid and start time. A lock left by a daemon that died is taken over
// even when its pid is still in the process table: as a zombie not yet reaped (`kill -9` of a daemon whose
// parent has not waited for it), or reused by another process after a crash or a container restart (pids
// start low again). A lock whose holder runs is respected, including one written before the start time was.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireLock, acquireSharedLock } from '../../src/daemon/process/lock.js';
import { tempDir } from '../helpers/daemon.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** A process that stays alive for the test. */
function sleeper(): ChildProcess {
  const c = spawn('sleep', ['30'], { stdio: 'ignore' });
  children.push(c);
  return c;
}

/** The pid of a zombie: a child of `sleep 30` (exec'd by sh) that exited and that sleep never reaps. */
async function zombiePid(): Promise<number> {
  const c = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(c);
  const line = await new Promise<string>((resolve) => createInterface({ input: c.stdout! }).once('line', resolve));
  const pid = Number(line);
  for (let i = 0; i < 100 && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '); i++)
    await new Promise((r) => setTimeout(r, 20));
  expect(readFileSync(`/proc/${pid}/stat`, 'utf8')).toContain(') Z ');
  return pid;
}

const startOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]!;

describe.runIf(process.platform === 'linux')('data-dir lock', () => {
  it('records its holder as pid and start time', () => {
    const dir = tempDir('proxyd-lock-');
    const lock = acquireLock(dir);
    expect(readFileSync(path.join(dir, 'proxyd.lock'), 'utf8')).toBe(`${process.pid} ${startOf(process.pid)}\n`);
    lock.release();
  });

  it('is refused while the holder runs (with or without a start time in the file)', () => {
    const dir = tempDir('proxyd-lock-');
    const pid = sleeper().pid!;
    writeFileSync(path.join(dir, 'proxyd.lock'), `${pid} ${startOf(pid)}\n`);
    expect(() => acquireLock(dir)).toThrow(new RegExp(`another proxyd \\(pid ${pid}\\)`));
    writeFileSync(path.join(dir, 'proxyd.lock'), `${pid}\n`);
    expect(() => acquireLock(dir)).toThrow(new RegExp(`another proxyd \\(pid ${pid}\\)`));
    expect(() => acquireSharedLock(dir)).toThrow(new RegExp(`another proxyd \\(pid ${pid}\\)`));
  });

  it('is taken over from a pid another process got since (its start time differs)', () => {
    const dir = tempDir('proxyd-lock-');
    const pid = sleeper().pid!;
    writeFileSync(path.join(dir, 'proxyd.lock'), `${pid} ${Number(startOf(pid)) - 1}\n`);
    const lock = acquireLock(dir);
    expect(readFileSync(path.join(dir, 'proxyd.lock'), 'utf8')).toMatch(new RegExp(`^${process.pid} `));
    lock.release();
  });

  it('is taken over from a zombie (killed, not yet reaped)', async () => {
    const dir = tempDir('proxyd-lock-');
    const pid = await zombiePid();
    writeFileSync(path.join(dir, 'proxyd.lock'), `${pid}\n`);
    const lock = acquireLock(dir);
    lock.release();
  });
});
