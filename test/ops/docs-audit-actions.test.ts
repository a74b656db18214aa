// docs/admin.md, "audit", is where operators and customers (docs/api.md points there for `action=`) read which
// actions the audit log records: every action a record can name must be in its list (it once lacked the ip.* ones).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AUDIT_ACTIONS } from '../../src/daemon/services/audit.js';
import { ROOT } from '../helpers/daemon.js';

describe('docs/admin.md: the audit actions', () => {
  it('lists every action a record can name', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/admin.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## audit'), doc.indexOf('`proxyd admin audit [--email E]'));
    for (const action of Object.keys(AUDIT_ACTIONS))
      expect(section, `${action} is missing from docs/admin.md "audit"`).toContain(`\`${action}\``);
  });
});
