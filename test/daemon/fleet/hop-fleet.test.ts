// The daemon's side of the hop: an exit's certificate kept in its data dir and rotated in phases by several
// workers sharing it (never serving a certificate the registry does not name), a kept certificate that
// expired, an unreadable one; the fleet secret as entries prove it and exits accept it around a rotation;
// certificates whose serial starts with a zero bit (DER's minimal INTEGER).
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { HopIdentityKeeper } from '../../../src/daemon/fleet/hop-identity.js';
import { HopSecrets } from '../../../src/daemon/fleet/hop-secrets.js';
import { makeHopIdentity, readHopIdentity, type HopIdentity } from '../../../src/gateway/index.js';
import type { ExitStore, HopSecretState } from '../../../src/daemon/store/index.js';
import { tempDir } from '../../helpers/daemon.js';
import { sleep } from '../../helpers/wait.js';

const DAY = 86_400_000;

describe("an exit's hop certificate", () => {
  it('is made once, kept across restarts, and parses every time (many serials)', () => {
    for (let i = 0; i < 300; i++) expect(() => readHopIdentity(makeHopIdentity(DAY).pem)).not.toThrow();
    const dir = tempDir('proxyd-hopid-');
    const a = new HopIdentityKeeper(dir, { lifetimeMs: 90 * DAY, onChange: () => {} }).load();
    const b = new HopIdentityKeeper(dir, { lifetimeMs: 90 * DAY, onChange: () => {} }).load();
    expect(b.fingerprint).toBe(a.fingerprint);
  });

  it('an expired kept certificate is replaced at start; an unusable file stops the start with its name', () => {
    const dir = tempDir('proxyd-hopid-');
    writeFileSync(path.join(dir, 'hop-identity.pem'), makeHopIdentity(DAY, Date.now() - 3 * DAY).pem, { mode: 0o600 });
    const fresh = new HopIdentityKeeper(dir, { lifetimeMs: 90 * DAY, onChange: () => {} }).load();
    expect(fresh.notAfter.getTime()).toBeGreaterThan(Date.now() + 80 * DAY);
    const broken = tempDir('proxyd-hopid-');
    writeFileSync(path.join(broken, 'hop-identity.pem'), 'not a certificate\n', { mode: 0o600 });
    expect(() => new HopIdentityKeeper(broken, { lifetimeMs: 90 * DAY, onChange: () => {} }).load()).toThrow(
      /hop-identity\.pem: the hop certificate file is there but cannot be used/,
    );
  });

  it('a rotation with two workers: announced beside the old one, then served by both, then alone; never served unannounced', async () => {
    const dir = tempDir('proxyd-hopid-');
    const served = [new Map<number, string>(), new Map<number, string>()];
    const workers = [0, 1].map((w) => {
      let current: HopIdentity | null = null;
      const k = new HopIdentityKeeper(dir, {
        lifetimeMs: 90 * DAY,
        onChange: (id) => (current = id),
        announceMs: 300,
        settleMs: 300,
      });
      current = k.load();
      return { k, serving: () => current!.fingerprint, w };
    });
    const old = workers[0]!.serving();
    const registered: string[][] = [];
    // Ticks as the heartbeat makes them (every 100 ms here), the first with the operator's request on worker 1.
    for (let t = 0; t < 20; t++) {
      for (const { k, serving, w } of workers) {
        k.tick(t === 0 && w === 1);
        const names = k.fingerprints();
        registered.push(names);
        served[w]!.set(t, serving());
        expect(names).toContain(serving()); // what a worker serves is always registered by it
      }
      await sleep(100);
    }
    const fresh = workers[1]!.serving();
    expect(fresh).not.toBe(old);
    expect(workers[0]!.serving()).toBe(fresh);
    expect(registered.some((r) => r.length === 2 && r[0] === old && r[1] === fresh)).toBe(true); // announced
    expect(registered.at(-1)).toEqual([fresh]); // then alone
    expect(existsSync(path.join(dir, 'hop-identity.next.pem'))).toBe(false);
  });

  it('renews by itself at two thirds of its lifetime', async () => {
    const dir = tempDir('proxyd-hopid-');
    const k = new HopIdentityKeeper(dir, { lifetimeMs: 3_000, onChange: () => {}, announceMs: 100, settleMs: 100 });
    const first = k.load().fingerprint;
    // A certificate whose lifetime is mostly gone (made 60 s ago for 10 s, valid from a minute before that).
    writeFileSync(path.join(dir, 'hop-identity.pem'), makeHopIdentity(10_000, Date.now() - 60_000).pem, {
      mode: 0o600,
    });
    k.tick(false); // follows the file
    k.tick(false); // due: announces the next one
    await sleep(150);
    k.tick(false); // serves it
    expect(k.fingerprints()[0]).not.toBe(first);
    expect(existsSync(path.join(dir, 'hop-identity.previous.pem'))).toBe(true);
  });

  it('a file this process cannot read is said, not thrown, while ticking', () => {
    if (process.getuid?.() === 0) return; // root reads mode-000 files: nothing to see
    const dir = tempDir('proxyd-hopid-');
    const k = new HopIdentityKeeper(dir, { lifetimeMs: 90 * DAY, onChange: () => {} });
    k.load();
    chmodSync(path.join(dir, 'hop-identity.pem'), 0);
    expect(() => k.tick(false)).not.toThrow();
  });
});

describe('the fleet secret around a rotation', () => {
  function store(state: HopSecretState): ExitStore {
    return { hopSecret: async () => state } as unknown as ExitStore;
  }
  const hex = (b: number) => Buffer.alloc(32, b).toString('hex');

  it('entries prove the new and the old one; exits accept the old one only during their grace', async () => {
    // On fake timers: its read every second and its clock (Date.now) are the fake ones; the store answers at once.
    vi.useFakeTimers();
    const state: HopSecretState = { current: hex(1), previous: null, rotatedAgoMs: null };
    const s = new HopSecrets(store(state), { graceMs: 600_000 });
    await s.start();
    try {
      expect(s.offered().map((b) => b[0])).toEqual([1]);
      expect(s.accepted().map((b) => b[0])).toEqual([1]);
      Object.assign(state, { current: hex(2), previous: hex(1), rotatedAgoMs: 1_000 });
      await vi.advanceTimersByTimeAsync(999);
      expect(s.offered().map((b) => b[0])).toEqual([1]); // not read yet
      await vi.advanceTimersByTimeAsync(1); // read every second
      expect(s.offered().map((b) => b[0])).toEqual([2, 1]);
      expect(s.accepted().map((b) => b[0])).toEqual([2, 1]);
      // Between reads the rotation's age grows with the clock: the grace ends on time, not at the next read.
      state.rotatedAgoMs = 599_500;
      await vi.advanceTimersByTimeAsync(1_000);
      await vi.advanceTimersByTimeAsync(499);
      expect(s.accepted().map((b) => b[0])).toEqual([2, 1]);
      await vi.advanceTimersByTimeAsync(1);
      expect(s.accepted().map((b) => b[0])).toEqual([2]);
      Object.assign(state, { rotatedAgoMs: 601_000 }); // the grace is over as the database says it
      await vi.advanceTimersByTimeAsync(1_000);
      expect(s.accepted().map((b) => b[0])).toEqual([2]);
      expect(s.offered().map((b) => b[0])).toEqual([2, 1]); // harmless: an exit past its grace ignores it
    } finally {
      s.stop();
      vi.useRealTimers();
    }
  });
});
