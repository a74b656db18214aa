// The systemd unit and its environment file (packaging/systemd/, which docs/operations.md tells operators to install
// as they are) and the logrotate stanza in docs/operations.md are copied by operators as they are: systemd takes no
// comment at the end of a line (`EnvironmentFile=-/etc/proxyd/env  # …` named a file that does not exist, and the
// '-' skipped it without a word; `PROXYD_X=1 # …` in an environment file is a value with the comment in it), and
// logrotate's signal must reach the daemon as a reload. (The unit used to be a block in docs/operations.md; it
// ships as a file now, and this checks the file.)
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.join(import.meta.dirname, '../..');
const doc = readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
const block = (start: string): string => {
  const at = doc.indexOf(start);
  expect(at, start).toBeGreaterThanOrEqual(0);
  return doc.slice(at, doc.indexOf('```', at));
};

describe('what operators copy: the unit, its environment file, the logrotate stanza', () => {
  it('the unit file: every setting on a line of its own, no comment after a value; its settings file is required', () => {
    const unit = readFileSync(path.join(root, 'packaging/systemd/proxyd.service'), 'utf8');
    const settings = unit.split('\n').filter((l) => /^[A-Za-z]+=/.test(l));
    expect(settings.length).toBeGreaterThan(10);
    for (const l of settings) expect(l, l).not.toMatch(/\s[#;]/);
    // Without its '-', a missing file fails the start with a message, rather than serving on the defaults.
    expect(settings).toContain('EnvironmentFile=/etc/proxyd/proxyd.env');
    expect(settings).toContain(`ExecReload=/bin/sh -c 'kill -HUP "$MAINPID"'`);
    expect(doc).toContain('sudo install -m 0600 packaging/systemd/proxyd.env /etc/proxyd/');
  });

  it('where proxyd is elsewhere, the docs and the unit name every setting that holds its path, and where Node must be', () => {
    const unit = readFileSync(path.join(root, 'packaging/systemd/proxyd.service'), 'utf8');
    const holding = unit
      .split('\n')
      .filter((l) => /^[A-Za-z]+=.*\/usr\/local\/bin\/proxyd/.test(l))
      .map((l) => l.slice(0, l.indexOf('=') + 1));
    expect(holding).toEqual(['ExecStart=', 'ExecStartPost=']);
    const said = /change its path in `ExecStart=` and\s+`ExecStartPost=`/;
    expect(doc).toMatch(said);
    expect(unit).toMatch(/change its path in ExecStart= and\n# ExecStartPost=/);
    // The service sees no home directory: a Node there (nvm's) is not on its PATH.
    expect(unit).toContain('ProtectHome=yes');
    expect(doc).toMatch(/does not\s+see home directories \(`ProtectHome=yes`\)/);
  });

  it('the environment file: VARIABLE=value lines, no comment after a value', () => {
    const env = readFileSync(path.join(root, 'packaging/systemd/proxyd.env'), 'utf8');
    const lines = env.split('\n').filter((l) => l.trim() && !l.startsWith('#'));
    expect(lines.length).toBeGreaterThan(3);
    for (const l of lines) expect(l, l).toMatch(/^PROXYD_[A-Z_]+=[^\s#]*$/);
  });

  it('logrotate reloads the service (SIGHUP to the main process, which tells its workers)', () => {
    const stanza = block('/var/log/proxyd/connections.jsonl {');
    expect(stanza).toContain('systemctl reload proxyd.service');
  });
});
