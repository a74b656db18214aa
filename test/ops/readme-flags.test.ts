// README's `proxyd serve` flag table is what a new user reads: every option of the command must be in it
// (it once lacked --egress-pool), with the env var the option reads. Hidden (test-only) options aside.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/daemon/process/main.js';
import { ROOT } from '../helpers/daemon.js';

describe('README: proxyd serve flags', () => {
  it('lists every option of `proxyd serve` with its env var', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf('## `proxyd serve` flags'), readme.indexOf('## Documentation'));
    const serve = buildProgram().commands.find((c) => c.name() === 'serve')!;
    const rows = table.split('\n').filter((l) => l.startsWith('| `--'));
    for (const o of serve.options.filter((x) => !x.hidden)) {
      const row = rows.find((r) => r.startsWith(`| \`${o.long}`));
      expect(row, `${o.long} is missing from README's flag table`).toBeDefined();
      if (o.envVar) expect(row, o.long).toContain(o.envVar);
    }
  });
});
