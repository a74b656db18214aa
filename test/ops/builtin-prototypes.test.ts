// The daemon leaves the built-in prototypes in V8's fast mode. A class that extends a built-in (ioredis's RESP3
// `VerbatimString extends String`) turns that prototype into a dictionary for the life of the process, and from
// then on every method call on a string (the gateway's head parsing, credentials, the admission tables) went
// through V8's generic property lookup instead of inline code: ~4 % of a tunnel's instructions
// (docs/decisions.md#d-042, "ioredis loaded only with --redis-url"). Read with V8's own %HasFastProperties from a
// module loaded before the daemon (--import), after the daemon has started and relayed a tunnel.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { admin, makeAccount, PROXYD, tempDir } from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

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

  it(
    'stay fast after start-up, a refusal and a relayed tunnel (no dependency loaded on the way extends a built-in)',
    async () => {
      const probe = path.join(dir, 'probe.mjs');
      const out = path.join(dir, 'slow.json');
      writeFileSync(probe, PROBE);
      const target = net.createServer((s) => s.pipe(s));
      await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
      const dataDir = path.join(dir, 'data');
      await makeAccount(dataDir, 'protos@example.com');
      const made = await admin(
        dataDir,
        ['proxy-user', 'create', '--email', 'protos@example.com', '--username', 'protos-user', '--password-stdin'],
        'protos-password-1\n',
      );
      expect(made.code, made.stderr).toBe(0);
      const proc = spawn(
        process.execPath,
        [
          '--allow-natives-syntax',
          `--import=${probe}`,
          PROXYD,
          'serve',
          '--data-dir',
          dataDir,
          '--api-listen',
          '127.0.0.1:0',
          '--http-proxy-listen',
          '127.0.0.1:0',
          '--socks-listen',
          '127.0.0.1:0',
          '--allow-private-targets',
          '--log-level',
          'warn',
        ],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
          env: { ...process.env, PROTO_PROBE_OUT: out },
        },
      );
      procs.push(proc);
      const ready = await new Promise<{ httpProxy: string }>((resolve, reject) => {
        proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
        createInterface({ input: proc.stdout! }).on('line', (l) => l.startsWith('{') && resolve(JSON.parse(l)));
      });
      // One refused CONNECT (no credentials), then an admitted tunnel that relays bytes both ways and closes: the
      // head parser, admission, the dial, the relay, metering and the connection log all ran.
      const port = Number(ready.httpProxy.split(':')[1]);
      const tport = (target.address() as net.AddressInfo).port;
      const exchange = (auth: string, send: string) =>
        new Promise<string>((resolve, reject) => {
          const s = net.connect(port, '127.0.0.1');
          let text = '';
          s.on('error', reject);
          s.on('data', (d) => {
            text += d.toString('latin1');
            if (send && text.includes('\r\n\r\n') && !text.includes(send)) s.write(send);
            if (send && text.endsWith(send)) s.end();
          });
          s.on('close', () => resolve(text));
          s.write(`CONNECT 127.0.0.1:${tport} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`);
        });
      expect(await exchange('', '')).toMatch(/^HTTP\/1\.1 407 /);
      const auth = `Proxy-Authorization: Basic ${Buffer.from('protos-user:protos-password-1').toString('base64')}\r\n`;
      const tunnel = await exchange(auth, 'ping-pong');
      expect(tunnel).toMatch(/^HTTP\/1\.1 200 /);
      expect(tunnel.endsWith('ping-pong')).toBe(true);
      await new Promise((r) => setTimeout(r, 300));
      expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual([]);
      target.close();
    },
    patient(30_000),
  );
});
