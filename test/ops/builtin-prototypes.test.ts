// The daemon leaves the built-in prototypes in V8's fast mode. A class that extends a built-in (ioredis's RESP3
// `VerbatimString extends String`) turns that prototype into a dictionary for the life of the process, and from
// then on every method call on a string (the gateway's head parsing, credentials, the admission tables) went
// through V8's generic property lookup instead of inline code: ~4 % of a tunnel's instructions
// (docs/decisions.md, "ioredis loaded only with --redis-url"). Read with V8's own %HasFastProperties from a
// module loaded before the daemon (--import), after the daemon has started and relayed a tunnel.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { PROXYD, tempDir } from '../helpers/daemon.js';

// Natives syntax is a parse error without --allow-natives-syntax, so the probe is written out and --import'ed.
const PROBE = `
import { writeFileSync } from 'node:fs';
const protos = { String, Array, Object, Function, Map, Set, Promise, Uint8Array, Number, RegExp, Error, Date, ArrayBuffer, Symbol, Boolean, TypedArray: Object.getPrototypeOf(Uint8Array), Buffer };
setInterval(() => {
  const slow = Object.entries(protos).filter(([, c]) => !%HasFastProperties(c.prototype)).map(([k]) => k);
  writeFileSync(process.env.PROTO_PROBE_OUT, JSON.stringify(slow));
}, 100).unref();
`;

describe('built-in prototypes in the daemon', () => {
  const dir = tempDir('proxyd-protos-');
  const procs: Array<ReturnType<typeof spawn>> = [];
  afterAll(() => {
    for (const p of procs) p.kill('SIGKILL');
  });

  it('stay fast after start-up and a tunnel (no dependency loaded on the way extends String)', async () => {
    const probe = path.join(dir, 'probe.mjs');
    const out = path.join(dir, 'slow.json');
    writeFileSync(probe, PROBE);
    const target = net.createServer((s) => s.end());
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    const proc = spawn(process.execPath, ['--allow-natives-syntax', `--import=${probe}`, PROXYD, 'serve', '--data-dir', path.join(dir, 'data'),
      '--api-listen', '127.0.0.1:0', '--http-proxy-listen', '127.0.0.1:0', '--socks-listen', '127.0.0.1:0', '--allow-private-targets', '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, PROTO_PROBE_OUT: out },
    });
    procs.push(proc);
    const ready = await new Promise<{ httpProxy: string }>((resolve, reject) => {
      proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
      createInterface({ input: proc.stdout! }).on('line', (l) => l.startsWith('{') && resolve(JSON.parse(l)));
    });
    // One refused CONNECT (no credentials): the head parser, admission and the log ran.
    const reply = await new Promise<string>((resolve, reject) => {
      const s = net.connect(Number(ready.httpProxy.split(':')[1]), '127.0.0.1');
      let text = '';
      s.on('error', reject);
      s.on('data', (d) => (text += d.toString('latin1')));
      s.on('close', () => resolve(text));
      s.write(`CONNECT 127.0.0.1:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 407 /);
    await new Promise((r) => setTimeout(r, 300));
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual([]);
    target.close();
  }, 30_000);
});
