// The hidden PROXYD_GATEWAY_LIMITS override that lets the hostile suites shrink the gateway's limits.
import { describe, expect, it } from 'vitest';
import { parseGatewayLimitOverrides } from '../../src/daemon/process/serve.js';
import { resolveLimits } from '../../src/gateway/limits.js';
import { patient } from '../helpers/patience.js';

describe('PROXYD_GATEWAY_LIMITS', () => {
  it('parses known keys to positive integers; absent means the defaults', () => {
    expect(parseGatewayLimitOverrides(undefined)).toBeUndefined();
    expect(parseGatewayLimitOverrides('')).toBeUndefined();
    expect(
      parseGatewayLimitOverrides(' headerTimeoutMs=500, maxConnectionsPerAccount=5,maxConnectionsTotal=50 '),
    ).toEqual({
      headerTimeoutMs: 500,
      maxConnectionsPerAccount: 5,
      maxConnectionsTotal: 50,
    });
  });

  it('connections not admitted yet per source: 256, or as many as one account may hold when that cap is raised', () => {
    expect(resolveLimits(undefined).maxHandshakesPerSource).toBe(256);
    expect(resolveLimits({ maxConnectionsPerAccount: 5 }).maxHandshakesPerSource).toBe(256);
    expect(resolveLimits({ maxConnectionsPerAccount: 2000 }).maxHandshakesPerSource).toBe(2000);
    expect(resolveLimits({ maxConnectionsPerAccount: 2000, maxHandshakesPerSource: 300 }).maxHandshakesPerSource).toBe(
      300,
    );
  });

  it('refuses unknown keys, prototype keys and values that are not positive integers', () => {
    for (const bad of [
      'nope=1',
      '__proto__=1',
      'constructor=1',
      'headerTimeoutMs=0',
      'headerTimeoutMs=-1',
      'headerTimeoutMs=1.5',
      'headerTimeoutMs=',
      'headerTimeoutMs=1e3',
      'headerTimeoutMs',
    ]) {
      expect(() => parseGatewayLimitOverrides(bad), bad).toThrow(/PROXYD_GATEWAY_LIMITS/);
    }
  });
});

describe('a daemon that cannot start exits instead of hanging', () => {
  it(
    'a bad PROXYD_GATEWAY_LIMITS, or a gateway port in use, exits 1 with a message (the API listener is closed again)',
    async () => {
      const { createServer } = await import('node:net');
      const { PROXYD, run, tempDir } = await import('../helpers/daemon.js');
      const serve = (httpProxy: string) => [
        'serve',
        '--data-dir',
        tempDir(),
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        httpProxy,
        '--socks-listen',
        '127.0.0.1:0',
      ];
      const bad = await run(PROXYD, serve('127.0.0.1:0'), {
        env: { PROXYD_GATEWAY_LIMITS: 'nope=1' },
        timeoutMs: 15_000,
      });
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/PROXYD_GATEWAY_LIMITS: unknown limit "nope"/);
      const blocker = createServer();
      await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
      try {
        const port = (blocker.address() as { port: number }).port;
        // Before the fix the API kept listening after the gateway failed, so the process never exited.
        const busy = await run(PROXYD, serve(`127.0.0.1:${port}`), { timeoutMs: 15_000 });
        expect(busy.code).toBe(1);
        expect(busy.stderr).toMatch(/address in use/);
        expect(busy.stdout).toBe('');
      } finally {
        blocker.close();
      }
    },
    patient(40_000),
  );
});
