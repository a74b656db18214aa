import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROXYD, run, tempDir } from '../../helpers/daemon.js';
import {
  ConfigError,
  flagOrEnv,
  parseHostPort,
  parseWorkers,
  toServeConfig,
} from '../../../src/daemon/process/config.js';
import { SERVE_DEFAULTS } from '../../../src/daemon/process/serve-options.js';

const base = {
  apiListen: '127.0.0.1:8080',
  httpProxyListen: '127.0.0.1:3128',
  socksListen: '127.0.0.1:1080',
  workers: '1',
  releaseGrace: '600',
  logLevel: 'info',
};

describe('serve configuration', () => {
  // Regression: commander's .env() made PROXYD_ALLOW_PRIVATE_TARGETS=0 switch the SSRF guard off.
  it.each([
    [undefined, false],
    ['', false],
    ['0', false],
    ['false', false],
    ['no', false],
    ['1', true],
    ['true', true],
    ['YES', true],
  ])('PROXYD_ALLOW_PRIVATE_TARGETS=%j -> %s', (v, expected) => {
    const env = v === undefined ? {} : { PROXYD_ALLOW_PRIVATE_TARGETS: v };
    expect(toServeConfig(base, env).allowPrivateTargets).toBe(expected);
  });

  // The defaults live once, in SERVE_DEFAULTS: options built without commander (tests, older callers) get the same
  // configuration as commander's defaulted ones.
  it('falls back to SERVE_DEFAULTS for every option not given', () => {
    expect(toServeConfig(base, {})).toEqual(toServeConfig({ ...SERVE_DEFAULTS }, {}));
  });

  it('lets the flag win and refuses an unclear env value', () => {
    expect(
      toServeConfig({ ...base, allowPrivateTargets: true }, { PROXYD_ALLOW_PRIVATE_TARGETS: '0' }).allowPrivateTargets,
    ).toBe(true);
    expect(() => flagOrEnv(undefined, { X: 'maybe' }, 'X')).toThrow(ConfigError);
  });

  it('parses listen addresses, IPv6 included, and refuses junk', () => {
    expect(parseHostPort('127.0.0.1:0', 'x')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseHostPort('[::1]:8080', 'x')).toEqual({ host: '::1', port: 8080 });
    for (const bad of ['127.0.0.1', ':80', '127.0.0.1:65536', 'a b:1', '127.0.0.1:-1'])
      expect(() => parseHostPort(bad, 'x')).toThrow(ConfigError);
  });

  it('--workers auto is one worker per available CPU, at most 64', () => {
    expect(parseWorkers('auto', () => 2)).toBe(2);
    expect(parseWorkers('AUTO', () => 1)).toBe(1);
    expect(parseWorkers('auto', () => 256)).toBe(64);
    expect(parseWorkers('3', () => 2)).toBe(3);
    expect(toServeConfig({ ...base, workers: 'auto' }, {}).workers).toBeGreaterThanOrEqual(1);
    expect(() => parseWorkers('65')).toThrow(/1\.\.64 or auto/);
    expect(() => parseWorkers('two')).toThrow(/--workers/);
  });

  it('refuses bad workers, grace, CIDRs and egress addresses', () => {
    expect(() => toServeConfig({ ...base, workers: '0' }, {})).toThrow(/--workers/);
    expect(() => toServeConfig({ ...base, releaseGrace: '-5' }, {})).toThrow(/--release-grace/);
    expect(() => toServeConfig({ ...base, trustProxy: '10.0.0.0/33' }, {})).toThrow(/--trust-proxy/);
    expect(() => toServeConfig({ ...base, egressAddress: 'example.com' }, {})).toThrow(/--egress-address/);
  });

  // PROXYD_DNS_SERVERS (docs/operations.md's flag table, env only) was read only where the gateway was built: a bad
  // value came after the integrity check and was exit 1, where every other bad setting is exit 2 before anything opens.
  it('refuses a bad PROXYD_DNS_SERVERS as a bad flag: exit 2, before anything opens', async () => {
    for (const good of ['127.0.0.1', '127.0.0.1:5353, ::1', '[::1]:53'])
      expect(() => toServeConfig(base, { PROXYD_DNS_SERVERS: good })).not.toThrow();
    expect(() => toServeConfig(base, { PROXYD_DNS_SERVERS: '127.0.0.1,dns.example' })).toThrow(ConfigError);
    const dataDir = path.join(tempDir(), 'never-made');
    const r = await run(
      PROXYD,
      [
        'serve',
        '--data-dir',
        dataDir,
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
      ],
      { env: { PROXYD_DNS_SERVERS: 'foo' } },
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('proxyd: PROXYD_DNS_SERVERS: "foo" is not an IP address with an optional port\n');
    expect(existsSync(dataDir)).toBe(false);
  });

  it('takes a postgres:// database URL and refuses anything else', () => {
    expect(toServeConfig({ ...base, databaseUrl: 'postgres://u:p@db:5432/proxyd' }, {}).databaseUrl).toBe(
      'postgres://u:p@db:5432/proxyd',
    );
    expect(
      toServeConfig({ ...base, databaseUrl: 'postgresql://u@/proxyd?host=/run/postgresql' }, {}).databaseUrl,
    ).toContain('host=/run/postgresql');
    expect(toServeConfig(base, {}).databaseUrl).toBeUndefined();
    for (const bad of ['mysql://db/x', 'sqlite:///tmp/x.db', '/var/lib/proxyd', 'postgres://']) {
      expect(() => toServeConfig({ ...base, databaseUrl: bad }, {})).toThrow(/--database-url/);
    }
  });
});

describe('--usage-retention', () => {
  const H = 3_600_000;
  const D = 24 * H;
  it('takes any subset of minute, hour and day in order, and the defaults', () => {
    expect(toServeConfig(base, {}).usageRetentionMs).toEqual({ minute: 48 * H, hour: 90 * D, day: 730 * D });
    expect(toServeConfig({ ...base, usageRetention: 'minute=1h' }, {}).usageRetentionMs).toEqual({
      minute: H,
      hour: 90 * D,
      day: 730 * D,
    });
    expect(toServeConfig({ ...base, usageRetention: 'minute=30m, hour=7d, day=1y' }, {}).usageRetentionMs).toEqual({
      minute: 30 * 60_000,
      hour: 7 * D,
      day: 365 * D,
    });
  });

  // What an operator misreads: `m` taken for months, a number without a unit, nothing kept, minutes past hours.
  it.each([
    [
      'hour=1m',
      /"hour=1m" keeps hour buckets 1 minute \(m is minutes; there is no month unit: write 30d\), less than one hour/,
    ],
    ['minute=48', /"minute=48" has no unit: write 48h for 48 hours/],
    ['minute=0', /"minute=0" keeps nothing/],
    ['day=0d', /"day=0d" keeps nothing/],
    ['minute=30s', /"minute=30s" keeps minute buckets 30 seconds, less than one minute/],
    [
      'minute=1y',
      /minute buckets 1 year \(minute=1y\) would be kept longer than hour buckets 90 days \(the default, hour=90d\)/,
    ],
    ['hour=2y,day=1y', /hour buckets 2 years \(hour=2y\) would be kept longer than day buckets 1 year \(day=1y\)/],
    [
      'hour=3mo',
      /"hour=3mo": expected a duration such as 2y, 90d, 48h, 30m or 90s \(m is minutes; there is no month unit/,
    ],
    ['minute=1h,minute=2h', /minute is given twice/],
    ['week=1d', /expected minute=DURATION,hour=DURATION,day=DURATION/],
  ])('refuses %s, saying the unit it read', (v, why) => {
    expect(() => toServeConfig({ ...base, usageRetention: v }, {})).toThrow(ConfigError);
    expect(() => toServeConfig({ ...base, usageRetention: v }, {})).toThrow(why);
  });

  it('a refused value stops serve and admin usage with exit 2, before anything opens', async () => {
    const dataDir = path.join(tempDir(), 'never-made');
    const serve = await run(PROXYD, [
      'serve',
      '--data-dir',
      dataDir,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--usage-retention',
      'hour=1m',
    ]);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toMatch(/^proxyd: --usage-retention: "hour=1m" keeps hour buckets 1 minute/);
    expect(existsSync(dataDir)).toBe(false);
    const env = await run(
      PROXYD,
      [
        'serve',
        '--data-dir',
        dataDir,
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
      ],
      { env: { PROXYD_USAGE_RETENTION: 'minute=48' } },
    );
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('has no unit');
    const made = tempDir();
    expect(
      (
        await run(
          PROXYD,
          ['admin', 'account', 'create', '--email', 'a@example.com', '--password-stdin', '--data-dir', made],
          { input: 'correct horse battery\n' },
        )
      ).code,
    ).toBe(0);
    const adminRun = await run(PROXYD, [
      'admin',
      'usage',
      '--email',
      'a@example.com',
      '--data-dir',
      made,
      '--usage-retention',
      'minute=1y',
    ]);
    expect(adminRun.code).toBe(2);
    expect(adminRun.stderr).toContain('would be kept longer than hour buckets');
  });
});

describe('--stale-admission', () => {
  it('defaults to 300 s, takes 0, and refuses junk with the flag named', () => {
    expect(toServeConfig(base, {}).staleAdmissionSec).toBe(300);
    expect(toServeConfig({ ...base, staleAdmission: '0' }, {}).staleAdmissionSec).toBe(0);
    expect(toServeConfig({ ...base, staleAdmission: '3600' }, {}).staleAdmissionSec).toBe(3600);
    for (const bad of ['-1', 'abc', '1.5', ''])
      expect(() => toServeConfig({ ...base, staleAdmission: bad }, {})).toThrow(/--stale-admission/);
  });
});

describe('database URLs', () => {
  it('a multi-host URL for failover reaches the driver whole; the socket-directory form still works; no password is shown', async () => {
    const { redactUrl, splitSocketDir } = await import('../../../src/daemon/store/postgres/db.js');
    const multi = 'postgres://proxyd:s3cret@10.0.0.1:5432,10.0.0.2:5433/proxyd?target_session_attrs=read-write';
    expect(splitSocketDir(multi)).toEqual({ url: multi, socketDir: null });
    expect(splitSocketDir('postgres://proxyd@/proxyd?host=/run/postgresql&sslmode=disable')).toEqual({
      url: 'postgres://proxyd@/proxyd?sslmode=disable',
      socketDir: '/run/postgresql',
    });
    expect(redactUrl(multi)).toBe(
      'postgres://proxyd:***@10.0.0.1:5432,10.0.0.2:5433/proxyd?target_session_attrs=read-write',
    );
    expect(redactUrl('postgresql://u:p%40ss@h/db')).toBe('postgresql://u:***@h/db');
    expect(redactUrl('postgres://u@h:1,h:2/db')).toBe('postgres://u@h:1,h:2/db');
    expect(redactUrl(multi)).not.toContain('s3cret');
  });
});

describe('roles and location (SPEC 13)', () => {
  const db = 'postgres://u:p@127.0.0.1:5432/d';
  it('defaults to both, no location, hop on 127.0.0.1:3129', () => {
    const c = toServeConfig(base, {});
    expect(c.role).toBe('both');
    expect(c.location).toBeNull();
    expect(c.hopListen).toEqual({ host: '127.0.0.1', port: 3129 });
  });
  it('--public-host: a name or an address without a port (default none); a bad one exits 2 naming the flag', async () => {
    expect(toServeConfig(base, {}).publicHost).toBeNull();
    expect(toServeConfig({ ...base, publicHost: 'Proxy.Example.com.' }, {}).publicHost).toBe('proxy.example.com');
    expect(toServeConfig({ ...base, publicHost: '203.0.113.7' }, {}).publicHost).toBe('203.0.113.7');
    expect(toServeConfig({ ...base, publicHost: '[2001:db8::1]' }, {}).publicHost).toBe('2001:db8::1');
    for (const bad of [
      'proxy.example.com:3128',
      'http://proxy.example.com',
      'a b',
      '-bad.example',
      'x'.repeat(64) + '.com',
    ]) {
      expect(() => toServeConfig({ ...base, publicHost: bad }, {}), bad).toThrow(/--public-host/);
    }
    const r = await run(PROXYD, ['serve', '--data-dir', tempDir(), '--public-host', 'proxy.example.com:3128']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--public-host');
  });
  it('parses the location, lower-cased', () => {
    expect(toServeConfig({ ...base, location: 'US' }, {}).location).toEqual({ country: 'us', city: null });
    expect(toServeConfig({ ...base, location: 'de:Berlin' }, {}).location).toEqual({ country: 'de', city: 'berlin' });
    for (const bad of ['usa', 'u', 'us:', 'us:new york', 'us:la:x', '12'])
      expect(() => toServeConfig({ ...base, location: bad }, {})).toThrow(/--location/);
  });
  it('entry and exit need the fleet database; an entry has no egress of its own', () => {
    expect(() => toServeConfig({ ...base, role: 'exit' }, {})).toThrow(/--database-url/);
    expect(() => toServeConfig({ ...base, role: 'entry' }, {})).toThrow(/--database-url/);
    expect(toServeConfig({ ...base, role: 'exit', databaseUrl: db, egressAddress: '127.0.0.2' }, {}).role).toBe('exit');
    expect(() => toServeConfig({ ...base, role: 'entry', databaseUrl: db, egressAddress: '127.0.0.2' }, {})).toThrow(
      /no egress address of its own/,
    );
    expect(() => toServeConfig({ ...base, role: 'middle', databaseUrl: db }, {})).toThrow(/--role/);
    expect(() => toServeConfig({ ...base, role: 'exit', databaseUrl: db, hopListen: 'nowhere' }, {})).toThrow(
      /--hop-listen/,
    );
  });
  it('an exit on a wildcard hop listener must say what entries dial', () => {
    expect(() => toServeConfig({ ...base, role: 'exit', databaseUrl: db, hopListen: '0.0.0.0:3129' }, {})).toThrow(
      /--hop-advertise/,
    );
    expect(
      toServeConfig(
        { ...base, role: 'exit', databaseUrl: db, hopListen: '0.0.0.0:3129', hopAdvertise: '10.0.0.21:3129' },
        {},
      ).hopAdvertise,
    ).toEqual({ host: '10.0.0.21', port: 3129 });
    expect(() =>
      toServeConfig(
        { ...base, role: 'exit', databaseUrl: db, hopListen: '[::]:3129', hopAdvertise: '0.0.0.0:3129' },
        {},
      ),
    ).toThrow(/--hop-advertise/);
    expect(toServeConfig({ ...base, hopListen: '0.0.0.0:3129' }, {}).role).toBe('both'); // not an exit: unused
  });
});
