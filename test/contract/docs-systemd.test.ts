// The systemd unit and the logrotate stanza in docs/operations.md are copied by operators as they are: systemd
// takes no comment at the end of a line (`EnvironmentFile=-/etc/proxyd/env  # …` named a file that does not
// exist, and the '-' skipped it without a word), and logrotate's signal must reach the daemon as a reload.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const doc = readFileSync(path.join(import.meta.dirname, '../../docs/operations.md'), 'utf8');
const block = (start: string): string => {
  const at = doc.indexOf(start);
  expect(at, start).toBeGreaterThanOrEqual(0);
  return doc.slice(at, doc.indexOf('```', at));
};

describe('docs/operations.md: what operators copy', () => {
  it('the unit file: every setting on a line of its own, no comment after a value', () => {
    const unit = block('# /etc/systemd/system/proxyd.service');
    const settings = unit.split('\n').filter((l) => /^[A-Za-z]+=/.test(l));
    expect(settings.length).toBeGreaterThan(10);
    for (const l of settings) expect(l, l).not.toMatch(/\s[#;]/);
    expect(settings).toContain('EnvironmentFile=-/etc/proxyd/env');
    expect(settings).toContain('ExecReload=/bin/kill -HUP $MAINPID');
  });

  it('logrotate reloads the service (SIGHUP to the main process, which tells its workers)', () => {
    const stanza = block('/var/log/proxyd/connections.jsonl {');
    expect(stanza).toContain('systemctl reload proxyd.service');
  });
});
