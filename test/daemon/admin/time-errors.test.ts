// A refused time says which part is wrong, where the API reads it (10400 naming the field and the part) and where
// an operator types it (`proxyd admin plan set --expires`, `admin usage --from`, `admin connections --since`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusinessError } from '../../../src/contract/codes.js';
import {
  UsageDomainsQuerySchema,
  UsageSeriesQuerySchema,
  UsageSummaryQuerySchema,
} from '../../../src/contract/schemas.js';
import { parseStrictQuery } from '../../../src/daemon/api/routes/query.js';
import { planSet } from '../../../src/daemon/admin/plans.js';
import { adminUsage } from '../../../src/daemon/admin/usage.js';
import { parseSince } from '../../../src/daemon/admin/connections.js';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { PROXYD, run, tempDir } from '../../helpers/daemon.js';

function apiMessage(raw: string, schema: Parameters<typeof parseStrictQuery>[1]): string {
  try {
    parseStrictQuery(raw, schema);
  } catch (e) {
    expect(e).toBeInstanceOf(BusinessError);
    return (e as Error).message;
  }
  throw new Error(`accepted: ${raw}`);
}

describe('a refused time names the part that is wrong', () => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore({ dataDir: tempDir() });
    await store.accounts.create('times@example.com', 'x', true);
  });
  afterAll(async () => {
    await store?.close();
  });

  it('the usage API: 10400 names the field, then what is wrong with it', () => {
    expect(apiMessage('from=2026-12-01T10:00:00', UsageSummaryQuerySchema)).toBe(
      'invalid parameters: from (no time zone: add Z for UTC, or an offset such as +02:00)',
    );
    expect(apiMessage('from=2026-11-31', UsageSummaryQuerySchema)).toBe(
      'invalid parameters: from (November 2026 has 30 days)',
    );
    expect(apiMessage('granularity=day&to=2026-11-21T24:00:00Z', UsageSeriesQuerySchema)).toBe(
      'invalid parameters: to (there is no hour 24 (00 to 23))',
    );
    expect(apiMessage('to=2026-02-29', UsageDomainsQuerySchema)).toBe(
      'invalid parameters: to (February 2026 has 28 days)',
    );
    expect(apiMessage('from=yesterday', UsageSummaryQuerySchema)).toBe(
      'invalid parameters: from (expected an ISO 8601 date (2026-11-01) or date-time with a zone (2026-11-01T10:00:00Z))',
    );
    // Other fields keep their plain 10400 (no zod wording).
    expect(apiMessage('granularity=week', UsageSeriesQuerySchema)).toBe('invalid parameters: granularity');
  });

  it('admin plan set --expires 2026-02-30 says February has 28 days; nothing changes', async () => {
    await expect(planSet(store, { email: 'times@example.com', expires: '2026-02-30' })).rejects.toThrow(
      '--expires: "2026-02-30": February 2026 has 28 days (expected an ISO time such as 2027-01-31 or 2027-01-31T23:59:59Z, or never)',
    );
    await expect(planSet(store, { email: 'times@example.com', expires: 'next year' })).rejects.toThrow(
      '--expires: expected an ISO time such as 2027-01-31 or 2027-01-31T23:59:59Z, or never, got "next year"',
    );
    expect(await store.plans.get((await store.accounts.findByEmail('times@example.com'))!.id)).toBeNull();
  });

  it('admin usage --from and admin connections --since say it too', async () => {
    await expect(adminUsage(store, { email: 'times@example.com', from: '2026-04-31' })).rejects.toThrow(
      '--from: "2026-04-31": April 2026 has 30 days',
    );
    expect(() => parseSince('2026-11-25T10:75', Date.now())).toThrow(
      '--since: "2026-11-25T10:75": there is no minute 75 (00 to 59)',
    );
  });

  it('as the operator sees it: exit 1 and the message on stderr', async () => {
    const dataDir = tempDir();
    expect(
      (
        await run(
          PROXYD,
          ['admin', 'account', 'create', '--email', 'cli@example.com', '--password-stdin', '--data-dir', dataDir],
          { input: 'correct horse battery\n' },
        )
      ).code,
    ).toBe(0);
    const r = await run(PROXYD, [
      'admin',
      'plan',
      'set',
      '--email',
      'cli@example.com',
      '--expires',
      '2026-02-30',
      '--data-dir',
      dataDir,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('February 2026 has 28 days');
  });
});
