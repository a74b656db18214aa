// The built proxyctl writing to a stdout that fails: a reader that stops early (`proxyctl usage | head`) and a full
// disk (`> /dev/full`), against a spawned proxyd.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXYCTL, admin, isolatedCliEnv, makeAccount, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

let daemon: Daemon;
/** An API key with usage:read: what proxyctl usage takes. */
let key: string;
let work: string;

beforeAll(async () => {
  work = tempDir('proxyctl-out-');
  daemon = await startDaemon();
  await makeAccount(daemon.dataDir, 'out@example.test');
  const k = await admin(daemon.dataDir, [
    'key',
    'create',
    '--email',
    'out@example.test',
    '--name',
    'usage',
    '--scopes',
    'usage:read',
  ]);
  if (k.code !== 0) throw new Error(`key create failed: ${k.stderr}`);
  key = k.json.key;
}, patient(60_000));

afterAll(async () => {
  await daemon?.stop();
});

/** Runs the built proxyctl with stdout on a pipe closed before it writes, or on a file descriptor. */
function ctlTo(args: string[], stdout: 'closed-pipe' | number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...isolatedCliEnv(work, daemon.api, { PROXYCTL_API_KEY: key, NO_COLOR: '1' }) };
    const proc = spawn(process.execPath, [PROXYCTL, ...args], {
      env,
      stdio: ['ignore', stdout === 'closed-pipe' ? 'pipe' : stdout, 'pipe'],
    });
    // What `| head -0` does: the reader is gone before the first line.
    if (stdout === 'closed-pipe') proc.stdout!.destroy();
    let stderr = '';
    proc.stderr!.on('data', (d) => (stderr += d));
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ code, stderr }));
  });
}

describe('proxyctl output to a reader that stops early, or to a full disk', () => {
  it('`proxyctl usage | head`: the output is cut quietly, exit as the command ends (no stack trace)', async () => {
    for (const args of [
      ['usage'],
      ['usage', '--by', 'day', '--from', '2026-11-01'],
      ['usage', '--csv'],
      ['--json', 'usage'],
      ['completion', 'bash'],
    ]) {
      const r = await ctlTo(args, 'closed-pipe');
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
    }
  });

  it('`proxyctl usage > /dev/full`: one error line naming the failure, exit 1', async () => {
    const fd = openSync('/dev/full', 'w');
    try {
      for (const args of [['usage'], ['--json', 'usage'], ['completion', 'bash']]) {
        const r = await ctlTo(args, fd);
        expect({ args, code: r.code, stderr: r.stderr }).toEqual({
          args,
          code: 1,
          stderr: 'error: cannot write the output: ENOSPC\n',
        });
      }
    } finally {
      closeSync(fd);
    }
  });
});
