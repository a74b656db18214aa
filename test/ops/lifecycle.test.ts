// Start and stop of a single-worker daemon, as the one start-up path (src/daemon/process/run.ts) runs them: JSON
// logs on stderr from one logger, --log-level applied to start-up lines too, and a final "stopped" line.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { PROXYD, startDaemon, tempDir } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const parsed = (logs: string[]) => logs.map((l) => JSON.parse(l) as { event?: string; level: number; msg: string; pid: number; signal?: string });

describe('single-worker daemon lifecycle', () => {
  it('SIGTERM drains, exits 0, and the last log line is "stopped" (as in cluster mode)', async () => {
    const d = await startDaemon();
    expect(await d.stop('SIGTERM')).toBe(0);
    // 'exit' can come before the last stderr line is read.
    await waitFor('stopped line', () => parsed(d.logs).some((l) => l.event === 'stopped'), 3000);
    const lines = parsed(d.logs);
    expect(lines.find((l) => l.event === 'shutdown')).toMatchObject({ signal: 'SIGTERM' });
    expect(lines.at(-1)).toMatchObject({ event: 'stopped', level: 30, pid: d.proc.pid });
  });

  it('SIGTERM to the whole process group while it is still starting: it stops at once (exit 0, "stopped", the lock released, no ready line)', async () => {
    const dataDir = tempDir();
    // Two workers: forking them takes long enough that the signal lands before the ready line, while they boot.
    const args = [PROXYD, 'serve', '--data-dir', dataDir, '--workers', '2', '--api-listen', '127.0.0.1:0', '--http-proxy-listen', '127.0.0.1:0', '--socks-listen', '127.0.0.1:0', '--hop-listen', '127.0.0.1:0'];
    // Its own process group, signalled as a service manager or a terminal's Ctrl-C does: the workers still booting get it too.
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const logs: string[] = [];
    let stdout = '';
    proc.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    // The first log line comes after the handlers are in place (the integrity check): signal then.
    await new Promise<void>((resolve) => createInterface({ input: proc.stderr! }).on('line', (l) => {
      logs.push(l);
      if (logs.length === 1) resolve();
    }));
    process.kill(-proc.pid!, 'SIGTERM');
    expect(await exited).toBe(0);
    await waitFor('stopped line', () => parsed(logs).some((l) => l.event === 'stopped'), 3000);
    expect(parsed(logs).find((l) => l.event === 'shutdown')).toMatchObject({ signal: 'SIGTERM' });
    expect(stdout).toBe('');
    expect(existsSync(path.join(dataDir, 'proxyd.lock'))).toBe(false);
  });

  it('every start-up line comes from the same logger shape, and --log-level warn hides the info ones', async () => {
    const quiet = await startDaemon({ args: ['--log-level', 'warn'] });
    expect(await quiet.stop('SIGINT')).toBe(0);
    expect(parsed(quiet.logs).filter((l) => l.level < 40)).toEqual([]);

    const loud = await startDaemon({ args: ['--log-level', 'info'] });
    expect(await loud.stop('SIGTERM')).toBe(0);
    await waitFor('stopped line', () => parsed(loud.logs).some((l) => l.event === 'stopped'), 3000);
    const lines = parsed(loud.logs);
    expect(lines.map((l) => l.event)).toEqual(expect.arrayContaining(['integrity_check', 'shutdown', 'stopped']));
    for (const l of lines) expect(Object.keys(l)).toEqual(expect.arrayContaining(['level', 'time', 'pid', 'hostname', 'msg']));
  });

  it('an idle daemon lets its main thread sleep: a few wake-ups a second, not a timer every 10 ms', async () => {
    const d = await startDaemon({ args: ['--log-level', 'warn'] });
    try {
      // The main thread's voluntary context switches: one per sleep of its event loop.
      const switches = () => Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${d.proc.pid}/status`, 'utf8'))?.[1]);
      await new Promise((r) => setTimeout(r, 2000)); // past the start-up's own work
      const perSecond: number[] = [];
      for (let i = 0; i < 5; i++) {
        const before = switches();
        await new Promise((r) => setTimeout(r, 1000));
        perSecond.push(switches() - before);
      }
      // prom-client's default event-loop delay sampling (10 ms) woke it ~110 times a second; the admission view's
      // 150 ms poll and the once-a-second timers make ~25. The median of five seconds: one busy second is not it.
      expect(perSecond.sort((a, b) => a - b)[2]).toBeLessThan(60);
      // The delay gauges say the delay past the sample's due time, not the 100 ms between samples.
      const text = await (await fetch(`${d.api}/metrics`)).text();
      const gauge = (name: string) => Number(new RegExp(`^proxyd_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1]);
      expect(gauge('p50')).toBeGreaterThanOrEqual(0);
      expect(gauge('p50')).toBeLessThan(0.05);
      expect(gauge('min')).toBeGreaterThanOrEqual(0);
    } finally {
      await d.stop('SIGTERM');
    }
  });
});
