// Webhooks end to end: a spawned daemon (with --allow-private-webhooks), the webhook set with `proxyd admin
// webhook set`, traffic through the gateway past a threshold of the plan; the receiver gets the signed event
// within 10 s, once; `proxyd admin webhooks` lists the delivery; a private URL without the flag is refused.
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, admin, makeAccount, startDaemon, tempDir, waitForProxyUsers, type Daemon } from '../helpers/daemon.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'webhook-proxy-pass-1';

type Verifier = (secret: string, header: string, body: string, nowSeconds?: number) => boolean;

/** The receiver's check from docs/operations.md ("Webhooks"), loaded from the doc's code block as written. */
async function documentedVerifier(): Promise<Verifier> {
  const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
  const code = /<!-- webhook-verify:[^>]*-->\n```js\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!code) throw new Error('docs/operations.md has no webhook-verify block');
  const file = path.join(tempDir('proxyd-verify-'), 'verify.mjs');
  writeFileSync(file, `${code}\nexport { verifyProxydSignature };\n`);
  return ((await import(pathToFileURL(file).href)) as { verifyProxydSignature: Verifier }).verifyProxydSignature;
}

describe('webhooks (SQLite, one node)', () => {
  let d: Daemon;
  let receiver: http.Server;
  let target: net.Server;
  const got: Array<{ headers: http.IncomingHttpHeaders; body: string; at: number }> = [];
  const email = 'hooks@example.com';

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        got.push({ headers: req.headers, body, at: Date.now() });
        res.end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    target = net.createServer((s) => {
      s.on('data', () => {});
      s.on('end', () => s.end(Buffer.alloc(60_000, 0x61)));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    d = await startDaemon({ args: ['--allow-private-targets', '--allow-private-webhooks'] });
    await makeAccount(d.dataDir, email);
    expect(
      (
        await admin(
          d.dataDir,
          ['proxy-user', 'create', '--email', email, '--username', 'hooked', '--password-stdin'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    expect(
      (await admin(d.dataDir, ['plan', 'set', '--email', email, '--traffic-limit', '100000', '--period', 'month']))
        .code,
    ).toBe(0);
    await waitForProxyUsers(d, 1);
  }, patient(60_000));
  afterAll(async () => {
    await d?.stop();
    receiver?.close();
    target?.close();
  });

  it(
    'refuses a private URL without the flag; with it, prints the secret once',
    async () => {
      const url = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`;
      const refused = await admin(d.dataDir, ['webhook', 'set', '--email', email, '--url', url]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/https/);
      // The refusal names the switch that allows such a receiver.
      expect(refused.stderr).toContain('--allow-private-webhooks');
      const loopback = await admin(d.dataDir, [
        'webhook',
        'set',
        '--email',
        email,
        '--url',
        url.replace('http:', 'https:'),
      ]);
      expect(loopback.code).toBe(1);
      expect(loopback.stderr).toMatch(/private or reserved address .*--allow-private-webhooks/);
      const r = await admin(d.dataDir, [
        'webhook',
        'set',
        '--email',
        email,
        '--url',
        url,
        '--thresholds',
        '50,100',
        '--allow-private-webhooks',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json).toMatchObject({ url, thresholds: [50, 100], secret: expect.stringMatching(/^whsec_/) });

      // 60,000 bytes down of a 100,000-byte limit: past 50 %, not 100 %.
      const crossed = Date.now();
      const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
      c.write(
        `CONNECT 127.0.0.1:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('hooked', PASSWORD)}\r\n\r\n`,
      );
      expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
      c.socket.end();
      expect((await c.readToEnd(10_000)).length).toBe(60_000);
      await waitFor('event delivered', () => got.length >= 1, 10_000);
      expect(got[0]!.at - crossed).toBeLessThan(patient(10_000));
      const body = JSON.parse(got[0]!.body);
      expect(body).toMatchObject({ type: 'usage.threshold', account: email, threshold: 50, limit: 100_000 });
      const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(got[0]!.headers['proxyd-signature']))!;
      expect(v1).toBe(createHmac('sha256', r.json.secret).update(`${t}.${got[0]!.body}`).digest('hex'));
      // docs/operations.md's verification function, run as written: the whole secret (whsec_ included) verifies the
      // delivery; the secret without its prefix, a changed body, or an old t do not.
      const verify = await documentedVerifier();
      const header = String(got[0]!.headers['proxyd-signature']);
      expect(verify(r.json.secret, header, got[0]!.body)).toBe(true);
      expect(verify(r.json.secret.slice('whsec_'.length), header, got[0]!.body)).toBe(false);
      expect(verify(r.json.secret, header, `${got[0]!.body} `)).toBe(false);
      expect(verify(r.json.secret, header, got[0]!.body, Number(t) + 3600)).toBe(false);
      expect(got[0]!.headers['proxyd-event-id']).toBe(body.id);
      await sleep(3_000);
      expect(got).toHaveLength(1);
      const list = await admin(d.dataDir, ['webhooks', '--email', email]);
      expect(list.code).toBe(0);
      const lines = list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines).toEqual([
        expect.objectContaining({
          id: body.id,
          type: 'usage.threshold',
          attempts: 1,
          state: 'delivered',
          last_status: 200,
        }),
      ]);
      expect((await admin(d.dataDir, ['webhook', 'remove', '--email', email])).json).toEqual({ removed: true });
    },
    patient(60_000),
  );
});
