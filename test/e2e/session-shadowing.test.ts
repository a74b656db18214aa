// A proxy username as written wins over session parsing (docs/gateway.md, egress pools), so a user named `alice-session-x` would take
// session `x` away from alice. Another account must not be able to create such a name: not with `proxyd admin`,
// not in the console; alice's session keeps working.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleClient } from '../console/client.js';
import { curl } from '../gateway/helpers.js';
import { admin, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

describe('a session username cannot be taken by another account', () => {
  let d: Daemon;
  let echo: http.Server;
  let echoPort = 0;
  let alicePassword = '';

  beforeAll(async () => {
    d = await startDaemon({ args: ['--allow-private-targets'] });
    echo = http.createServer((q, s) => s.end(JSON.stringify({ ip: q.socket.remoteAddress })));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as { port: number }).port;
    await makeAccount(d.dataDir, 'alice@example.com');
    await makeAccount(d.dataDir, 'mallory@example.com', { password: 'mallory-console-pw' });
    const u = await admin(d.dataDir, ['proxy-user', 'create', '--email', 'alice@example.com', '--username', 'alice']);
    expect(u.code, u.stderr).toBe(0);
    alicePassword = u.json.password;
  }, patient(60_000));
  afterAll(async () => {
    echo?.close();
    await d?.stop();
  });

  const viaSession = () =>
    curl([
      '-s',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      '-x',
      `http://alice-session-x:${alicePassword}@${d.httpProxy}`,
      `http://127.0.0.1:${echoPort}/`,
    ]);

  it(
    'proxyd admin refuses the name (exit 1, says why)',
    async () => {
      const r = await admin(d.dataDir, [
        'proxy-user',
        'create',
        '--email',
        'mallory@example.com',
        '--username',
        'alice-session-x',
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('proxyd: username: "-session-" is reserved for session parameters (USER-session-ID)\n');
    },
    patient(30_000),
  );

  it(
    'the console refuses it too',
    async () => {
      const c = new ConsoleClient(d.api);
      expect((await c.login('mallory@example.com', 'mallory-console-pw')).status).toBe(303);
      await c.get('/console/proxy-users');
      await c.post('/console/proxy-users', { username: 'alice-session-x' });
      const page = await c.get('/console/proxy-users');
      expect(page.body).toContain('may not contain &quot;-session-&quot;');
      expect(page.body).not.toMatch(/<td[^>]*>alice-session-x</);
    },
    patient(30_000),
  );

  it(
    "alice's session still logs in with her password",
    async () => {
      expect((await viaSession()).stdout).toBe('200');
    },
    patient(30_000),
  );
});
