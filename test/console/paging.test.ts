// Console lists that grow with a provider's customers: proxy users and the whitelist a page at a time, and a page
// past the end shows the last one (not an empty "Showing 5001–5000").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { ConsoleClient } from './client.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';
let d: Daemon;
let c: ConsoleClient;

beforeAll(async () => {
  d = await startDaemon();
  expect(
    (
      await admin(
        d.dataDir,
        ['account', 'create', '--email', 'many@example.com', '--password-stdin', '--verified'],
        `${PASSWORD}\n`,
      )
    ).code,
  ).toBe(0);
  c = new ConsoleClient(d.api);
  expect((await c.login('many@example.com', PASSWORD)).status).toBe(303);
}, patient(60_000));
afterAll(async () => {
  await d?.stop();
});

const rows = (body: string) => (body.match(/<tr data-testid="proxy-user-row"/g) ?? []).length;

describe('console paging', () => {
  it(
    'proxy users: 50 a page with the range and links; a page past the end is the last',
    async () => {
      for (let i = 0; i < 55; i++) {
        await c.get('/console/proxy-users');
        expect((await c.post('/console/proxy-users', { username: `bulk${String(i).padStart(2, '0')}` })).status).toBe(
          303,
        );
      }
      const first = await c.get('/console/proxy-users');
      expect(rows(first.body)).toBe(50);
      expect(first.body).toContain('55 users');
      expect(first.body).toContain('Showing 1–50 of 55');
      expect(first.body).toContain('href="/console/proxy-users?page=2" rel="next"');
      for (const page of ['2', '9', '999999999']) {
        const last = await c.get(`/console/proxy-users?page=${page}`);
        expect(rows(last.body), page).toBe(5);
        expect(last.body).toContain('Showing 51–55 of 55');
      }
      expect(rows((await c.get('/console/proxy-users?page=abc')).body)).toBe(50);
    },
    patient(120_000),
  );

  it('whitelist: a page past the end shows the last page, not an empty range', async () => {
    await c.get('/console/whitelist');
    const ips = Array.from({ length: 25 }, (_, i) => `8.8.${Math.floor(i / 250)}.${(i % 250) + 1}`);
    expect((await c.post('/console/whitelist/add', { ip: ips.join(' '), remark: '' })).status).toBe(303);
    const past = await c.get('/console/whitelist?page=7');
    expect(past.status).toBe(200);
    expect(past.body).toContain('Showing 21–25 of 25');
    expect(past.body).toContain('rel="prev"');
  });
});
